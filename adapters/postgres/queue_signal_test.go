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
	// The listener says nothing when it has begun: publish transactional jobs until it hears one.
	for heard := false; !heard; {
		if err := writer.Publish(ctx, job(false)); err != nil {
			t.Fatal(err)
		}
		if p := announced("publishing a transactional job"); p != "tx" {
			t.Fatalf("a transactional job announced with %q, want tx", p)
		}
		select {
		case <-consumer.TransactionalQueued():
			heard = true
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("the listener never heard a transactional job")
		}
	}
	time.Sleep(200 * time.Millisecond) // announcements of the loop still on their way
	signalled()

	// Bulk jobs, published and written by the send path: announced without payload, not signalled.
	if err := writer.Publish(ctx, job(true)); err != nil {
		t.Fatal(err)
	}
	if p := announced("publishing a bulk job"); p != "" {
		t.Fatalf("a bulk job announced with %q, want no payload", p)
	}
	page := make([]ports.NewMessage, 3)
	for i := range page {
		nm := f.newSend(t, fmt.Sprintf("c%d@rcpt.example", i))
		nm.Message.IdempotencyKey = fmt.Sprintf("broadcast:b:c%d", i)
		for j := range nm.Outbox {
			nm.Outbox[j].Bulk = true
		}
		page[i] = nm
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
