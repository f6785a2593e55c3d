package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// A consumer's queue in another process (here: another Queue on its own connections) hears the
// transactional jobs queued by the send path and by Publish while ListenTransactional runs, and only those:
// the announcement of bulk jobs carries no payload, so a broadcast's pages end no wait. The test has a
// database of its own, since every schema of a database shares the notification channel.
func TestQueue_HearsTransactionalJobsOfOtherProcesses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := pgtest.DatabaseStore(t)
	f := newSendFixture(t, st)
	writer := postgres.NewQueue(st.Pool(), postgres.QueueConfig{PollInterval: time.Hour})
	st.EnqueueSendsOn(writer)
	consumer := postgres.NewQueue(st.Pool(), postgres.QueueConfig{PollInterval: time.Hour})

	// An observer of the channel, to see what each queueing announced.
	observer, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Release()
	if _, err := observer.Exec(ctx, `LISTEN postmill_delivery_queue`); err != nil {
		t.Fatal(err)
	}
	announced := func(what string) string {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second) // a bound on failure, not a measurement
		defer wcancel()
		n, err := observer.Conn().WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no announcement after %s: %v", what, err)
		}
		return n.Payload
	}
	signalled := func() bool {
		select {
		case <-consumer.TransactionalQueued():
			return true
		default:
			return false
		}
	}
	job := func(bulk bool) []ports.DeliveryJob {
		return []ports.DeliveryJob{{ID: newV7(), OrganizationID: f.org.ID, MessageID: newV7(), Domain: "rcpt.example",
			RecipientIDs: []string{newV7()}, Attempt: 1, FirstQueuedAt: time.Now(), Bulk: bulk}}
	}

	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- consumer.ListenTransactional(lctx, nil) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("ListenTransactional after its context ended: %v", err)
		}
	}()
	// The listener says nothing when it has begun; its connection is the one of this database whose last
	// statement is the quoted LISTEN (the observer's is not quoted).
	waitListening(t, ctx, st, `LISTEN "postmill_delivery_queue"`)
	if signalled() {
		t.Fatal("signalled before anything was queued")
	}

	// Bulk jobs, published and written by the send path: announced without payload, not signalled.
	if err := writer.Publish(ctx, job(true)); err != nil {
		t.Fatal(err)
	}
	if p := announced("publishing a bulk job"); p != "" {
		t.Fatalf("a bulk job announced with %q, want no payload", p)
	}
	page := make([]ports.NewMessage, 3)
	for i := range page {
		page[i] = asBroadcastSend(f.newSend(t, fmt.Sprintf("c%d@rcpt.example", i)), i)
	}
	if _, err := st.InsertMessages(ctx, page); err != nil {
		t.Fatalf("InsertMessages: %v", err)
	}
	if p := announced("a page of bulk sends"); p != "" {
		t.Fatalf("a page of bulk sends announced with %q, want no payload", p)
	}
	// The consumer's connection hears each announcement when the observer does, give or take a moment.
	time.Sleep(200 * time.Millisecond)
	if signalled() {
		t.Fatal("the consumer was signalled for bulk jobs")
	}

	// Transactional jobs published by the other process: announced as such and heard.
	if err := writer.Publish(ctx, job(false)); err != nil {
		t.Fatal(err)
	}
	if p := announced("publishing a transactional job"); p != "tx" {
		t.Fatalf("a transactional job announced with %q, want tx", p)
	}
	select {
	case <-consumer.TransactionalQueued():
	case <-time.After(30 * time.Second): // a bound on failure, not a measurement
		t.Fatal("the consumer was not signalled for a transactional job published by another process")
	}

	// A transactional send in the other process: announced as such and heard.
	f.mustInsert(t, f.newSend(t, "a@one.example"))
	if p := announced("a transactional send"); p != "tx" {
		t.Fatalf("a transactional send announced with %q, want tx", p)
	}
	select {
	case <-consumer.TransactionalQueued():
	case <-time.After(30 * time.Second): // a bound on failure, not a measurement
		t.Fatal("the consumer was not signalled for a transactional send of another process")
	}
}

// waitListening waits until a connection to the store's database has run listen and sits waiting.
func waitListening(t *testing.T, ctx context.Context, st *postgres.Store, listen string) {
	t.Helper()
	for {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query = $1 AND state = 'idle'`, listen).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no connection ran %s", listen)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
