package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// mustOutboxJobs enqueues n jobs for one message, due at notBefore.
func mustOutboxJobs(tb testing.TB, s *postgres.Store, f sendFixture, n int, notBefore time.Time) map[string]ports.DeliveryJob {
	tb.Helper()
	msg := f.newSend(tb, "a@example.org")
	msg.Outbox = nil
	id := f.mustInsert(tb, msg)
	jobs := map[string]ports.DeliveryJob{}
	for range n {
		j := ports.DeliveryJob{ID: newV7(), OrganizationID: f.org.ID, MessageID: id, Domain: "example.org",
			RecipientIDs: []string{msg.Message.Recipients[0].ID}, Attempt: 1, FirstQueuedAt: baseTime, NotBefore: notBefore}
		if err := s.EnqueueRetry(context.Background(), j); err != nil {
			tb.Fatalf("EnqueueRetry: %v", err)
		}
		jobs[j.ID] = j
	}
	return jobs
}

// TestRelayDue_Concurrent: four relays publish every due job exactly once and leave jobs not yet due.
func TestRelayDue_Concurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	now := baseTime.Add(time.Hour)
	due := mustOutboxJobs(t, s, f, 100, now.Add(-time.Minute))
	later := mustOutboxJobs(t, s, f, 10, now.Add(time.Minute))

	var mu sync.Mutex
	published := map[string]int{}
	publish := func(_ context.Context, jobs []ports.DeliveryJob) error {
		mu.Lock()
		defer mu.Unlock()
		for i, j := range jobs {
			published[j.ID]++
			if i > 0 && jobs[i-1].NotBefore.After(j.NotBefore) {
				t.Errorf("jobs not handed oldest first")
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				n, err := s.RelayDue(ctx, now, 7, publish)
				if err != nil {
					t.Errorf("RelayDue: %v", err)
					return
				}
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(published) != len(due) {
		t.Fatalf("published %d jobs, want %d", len(published), len(due))
	}
	for id, n := range published {
		if _, ok := due[id]; n != 1 || !ok {
			t.Fatalf("job %s published %d times (due: %v)", id, n, ok)
		}
	}
	if n := countRows(t, s, `SELECT count(*) FROM delivery_outbox`); n != len(later) {
		t.Fatalf("outbox rows left = %d, want the %d not yet due", n, len(later))
	}
}

func TestRelayDue_PublishFailureKeepsJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	now := baseTime.Add(time.Hour)
	jobs := mustOutboxJobs(t, s, f, 3, now)

	queueDown := errors.New("queue unavailable")
	n, err := s.RelayDue(ctx, now, 10, func(context.Context, []ports.DeliveryJob) error { return queueDown })
	if !errors.Is(err, queueDown) || n != 0 {
		t.Fatalf("RelayDue with a failing publish = %d, %v; want 0 and the publish error", n, err)
	}
	if got := countRows(t, s, `SELECT count(*) FROM delivery_outbox`); got != 3 {
		t.Fatalf("outbox rows after a failed publish = %d, want 3", got)
	}

	var got []ports.DeliveryJob
	n, err = s.RelayDue(ctx, now, 10, func(_ context.Context, js []ports.DeliveryJob) error { got = js; return nil })
	if err != nil || n != 3 || len(got) != 3 {
		t.Fatalf("RelayDue after recovery = %d, %v", n, err)
	}
	for _, j := range got {
		want := jobs[j.ID]
		if j.OrganizationID != want.OrganizationID || j.MessageID != want.MessageID || j.Domain != want.Domain ||
			len(j.RecipientIDs) != 1 || j.RecipientIDs[0] != want.RecipientIDs[0] || j.Attempt != 1 ||
			!j.FirstQueuedAt.Equal(want.FirstQueuedAt) || !j.NotBefore.Equal(want.NotBefore) {
			t.Fatalf("relayed job = %+v, want %+v", j, want)
		}
	}
	if n, err := s.RelayDue(ctx, now, 10, func(context.Context, []ports.DeliveryJob) error { return nil }); n != 0 || err != nil {
		t.Fatalf("RelayDue on an empty outbox = %d, %v", n, err)
	}
}

// TestEnqueueRetry: a retry waits until its NotBefore and keeps its attempt, recipients and first queue
// time.
func TestEnqueueRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	msg := f.newSend(t, "a@example.org", "b@example.org")
	msg.Outbox = nil
	id := f.mustInsert(t, msg)

	retry := ports.DeliveryJob{ID: newV7(), OrganizationID: f.org.ID, MessageID: id, Domain: "Example.ORG",
		RecipientIDs: []string{msg.Message.Recipients[0].ID, msg.Message.Recipients[1].ID}, Attempt: 3,
		FirstQueuedAt: baseTime, NotBefore: baseTime.Add(4 * time.Minute)}
	if err := s.EnqueueRetry(ctx, retry); err != nil {
		t.Fatal(err)
	}
	publishNothing := func(_ context.Context, js []ports.DeliveryJob) error {
		t.Fatalf("published %d jobs before their time", len(js))
		return nil
	}
	if n, err := s.RelayDue(ctx, baseTime.Add(time.Minute), 10, publishNothing); n != 0 || err != nil {
		t.Fatalf("RelayDue before NotBefore = %d, %v", n, err)
	}
	var got []ports.DeliveryJob
	if n, err := s.RelayDue(ctx, retry.NotBefore, 10, func(_ context.Context, js []ports.DeliveryJob) error { got = js; return nil }); n != 1 || err != nil {
		t.Fatalf("RelayDue at NotBefore = %d, %v", n, err)
	}
	j := got[0]
	if j.ID != retry.ID || j.Attempt != 3 || j.Domain != "example.org" || len(j.RecipientIDs) != 2 ||
		j.RecipientIDs[1] != retry.RecipientIDs[1] || !j.FirstQueuedAt.Equal(baseTime) || j.FirstQueuedAt.Location() != time.UTC {
		t.Fatalf("relayed retry = %+v", j)
	}
}
