package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func newJobs(n int) []ports.DeliveryJob {
	jobs := make([]ports.DeliveryJob, n)
	for i := range jobs {
		jobs[i] = ports.DeliveryJob{ID: newV7(), OrganizationID: newV7(), MessageID: newV7(), Domain: "example.org",
			RecipientIDs: []string{newV7(), newV7()}, Attempt: 1, FirstQueuedAt: baseTime, NotBefore: baseTime}
	}
	return jobs
}

func mustReceive(tb testing.TB, q *postgres.Queue, max int, within time.Duration) []ports.Delivery {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ds, err := q.Receive(ctx, max)
	if err != nil {
		tb.Fatalf("Receive: %v", err)
	}
	return ds
}

func requireNothing(tb testing.TB, q *postgres.Queue, wait time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ds, err := q.Receive(ctx, 10)
	if !errors.Is(err, context.DeadlineExceeded) || len(ds) != 0 {
		t := ""
		if len(ds) > 0 {
			t = ds[0].Job().ID
		}
		tb.Fatalf("Receive on an empty queue = %d deliveries (%s), %v; want none and the deadline", len(ds), t, err)
	}
}

func TestQueue_PublishReceiveAck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{PollInterval: 20 * time.Millisecond})

	jobs := newJobs(3)
	if err := q.Publish(ctx, jobs); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if err := q.Publish(ctx, jobs[:1]); err != nil { // a republished job is held once
		t.Fatalf("Publish again: %v", err)
	}
	ds := mustReceive(t, q, 10, 5*time.Second)
	if len(ds) != 3 {
		t.Fatalf("received %d, want 3", len(ds))
	}
	byID := map[string]ports.DeliveryJob{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	for _, d := range ds {
		got, want := d.Job(), byID[d.Job().ID]
		if got.OrganizationID != want.OrganizationID || got.MessageID != want.MessageID || got.Domain != want.Domain ||
			len(got.RecipientIDs) != 2 || got.RecipientIDs[1] != want.RecipientIDs[1] || got.Attempt != 1 ||
			!got.FirstQueuedAt.Equal(baseTime) || !got.NotBefore.Equal(baseTime) {
			t.Fatalf("job = %+v, want %+v", got, want)
		}
	}
	// Leased jobs are invisible to other receivers.
	requireNothing(t, q, 100*time.Millisecond)
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
	if n := countRows(t, s, `SELECT count(*) FROM delivery_queue`); n != 0 {
		t.Fatalf("rows after ack = %d", n)
	}
	requireNothing(t, q, 100*time.Millisecond)

	// max bounds one receive.
	if err := q.Publish(ctx, newJobs(5)); err != nil {
		t.Fatal(err)
	}
	if ds := mustReceive(t, q, 2, 5*time.Second); len(ds) != 2 {
		t.Fatalf("Receive(max 2) = %d deliveries", len(ds))
	}
}

func TestQueue_NackRedelivers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{PollInterval: 20 * time.Millisecond})
	if err := q.Publish(ctx, newJobs(1)); err != nil {
		t.Fatal(err)
	}
	first := mustReceive(t, q, 1, 5*time.Second)[0]
	if err := first.Nack(ctx); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	again := mustReceive(t, q, 1, time.Second)[0]
	if again.Job().ID != first.Job().ID {
		t.Fatalf("redelivered %s, want %s", again.Job().ID, first.Job().ID)
	}
	// The first delivery's lease is gone: it can no longer ack the job away from the new holder.
	requireCode(t, first.Ack(ctx), ports.CodeFailedPrecondition)
	if err := again.Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// TestQueue_NackAfterHidesTheJobAndCounts: a job nacked with a delay stays invisible until the delay has
// passed, and every lease — after a nack or an expired lease — counts one more delivery.
func TestQueue_NackAfterHidesTheJobAndCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err := q.Publish(ctx, newJobs(1)); err != nil {
		t.Fatal(err)
	}
	first := mustReceive(t, q, 1, 5*time.Second)[0]
	if n := first.Deliveries(); n != 1 {
		t.Fatalf("first delivery counts %d, want 1", n)
	}
	const delay = 800 * time.Millisecond
	nacked := time.Now()
	if err := first.NackAfter(ctx, delay); err != nil {
		t.Fatalf("NackAfter: %v", err)
	}
	requireNothing(t, q, delay/2)
	second := mustReceive(t, q, 1, 5*time.Second)[0]
	if waited := time.Since(nacked); waited < delay {
		t.Fatalf("received again after %v, before the %v delay", waited, delay)
	}
	if second.Job().ID != first.Job().ID || second.Deliveries() != 2 {
		t.Fatalf("second delivery %s counts %d, want %s and 2", second.Job().ID, second.Deliveries(), first.Job().ID)
	}
	// The holder crashes: the lease runs out and the next lease counts as well.
	third := mustReceive(t, q, 1, 5*time.Second)[0]
	if third.Deliveries() != 3 {
		t.Fatalf("delivery after an expired lease counts %d, want 3", third.Deliveries())
	}
	requireCode(t, second.NackAfter(ctx, time.Second), ports.CodeFailedPrecondition)
	if err := third.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestQueue_DeadLetterKeepsTheRowOutOfCirculation: a dead-lettered job is never leased again but stays in
// delivery_queue with when and why (the reason made storable: no NUL, valid UTF-8, bounded); the operator's
// statement of docs/operations.md puts it back.
func TestQueue_DeadLetterKeepsTheRowOutOfCirculation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err := q.Publish(ctx, newJobs(1)); err != nil {
		t.Fatal(err)
	}
	d := mustReceive(t, q, 1, 5*time.Second)[0]
	reason := "report failed: 250 ok\x00\xff" + strings.Repeat("é", 3000)
	if err := d.DeadLetter(ctx, reason); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	requireNothing(t, q, time.Second) // three leases' time: nothing comes back
	var (
		deadAt     *time.Time
		deadReason string
	)
	if err := s.Pool().QueryRow(ctx, `SELECT dead_at, dead_reason FROM delivery_queue WHERE id = $1`, d.Job().ID).
		Scan(&deadAt, &deadReason); err != nil {
		t.Fatalf("the dead-lettered row is gone: %v", err)
	}
	if deadAt == nil || !strings.HasPrefix(deadReason, `report failed: 250 ok\x00`+"\uFFFD") || len(deadReason) > 2000 ||
		!utf8.ValidString(deadReason) {
		t.Fatalf("dead_at %v, dead_reason %q (%d bytes)", deadAt, deadReason[:min(len(deadReason), 40)], len(deadReason))
	}
	requireCode(t, d.Ack(ctx), ports.CodeFailedPrecondition) // the lease ended with the dead letter

	// Put back by an operator (docs/operations.md): received again, counting from one.
	if _, err := s.Pool().Exec(ctx, `UPDATE delivery_queue SET dead_at = NULL, dead_reason = NULL, deliveries = 0,
		visible_at = now() WHERE dead_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	back := mustReceive(t, q, 1, 5*time.Second)[0]
	if back.Job().ID != d.Job().ID || back.Deliveries() != 1 {
		t.Fatalf("put back %s counting %d, want %s counting 1", back.Job().ID, back.Deliveries(), d.Job().ID)
	}
	if err := back.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestQueue_LeaseExpiry: a job received and neither acked nor nacked (a crashed worker) is received again
// once its lease expires, and the stale holder can no longer ack it.
func TestQueue_LeaseExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err := q.Publish(ctx, newJobs(1)); err != nil {
		t.Fatal(err)
	}
	crashed := mustReceive(t, q, 1, 5*time.Second)[0]
	start := time.Now()
	takeover := mustReceive(t, q, 1, 5*time.Second)[0]
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("redelivered after %v, before the lease expired", waited)
	}
	if takeover.Job().ID != crashed.Job().ID {
		t.Fatalf("took over %s, want %s", takeover.Job().ID, crashed.Job().ID)
	}
	requireCode(t, crashed.Ack(ctx), ports.CodeFailedPrecondition)
	requireCode(t, crashed.Nack(ctx), ports.CodeFailedPrecondition)
	if err := takeover.Ack(ctx); err != nil {
		t.Fatalf("Ack by the new holder: %v", err)
	}
	if n := countRows(t, s, `SELECT count(*) FROM delivery_queue`); n != 0 {
		t.Fatalf("rows = %d", n)
	}
}

// TestQueue_RenewKeepsTheLease: a holder that renews keeps the job hidden past its first lease; once it stops
// renewing, the job is handed out again and the old holder can no longer renew.
func TestQueue_RenewKeepsTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{Lease: 400 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err := q.Publish(ctx, newJobs(1)); err != nil {
		t.Fatal(err)
	}
	held := mustReceive(t, q, 1, 5*time.Second)[0]
	renewer, ok := held.(ports.LeaseRenewer)
	if !ok {
		t.Fatal("a PostgreSQL delivery cannot renew its lease")
	}
	for range 4 { // 4 × 200 ms: twice the lease, renewed halfway each time
		time.Sleep(200 * time.Millisecond)
		if err := renewer.Renew(ctx); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		requireNothing(t, q, 10*time.Millisecond)
	}
	takeover := mustReceive(t, q, 1, 5*time.Second)[0] // no more renewals: the lease runs out
	if takeover.Job().ID != held.Job().ID {
		t.Fatalf("took over %s, want %s", takeover.Job().ID, held.Job().ID)
	}
	requireCode(t, renewer.Renew(ctx), ports.CodeFailedPrecondition)
	if err := takeover.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestQueue_ConcurrentConsumers: four consumers never receive the same job while its lease holds.
func TestQueue_ConcurrentConsumers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{PollInterval: 20 * time.Millisecond})
	const n = 300
	if err := q.Publish(ctx, newJobs(n)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				ds, err := q.Receive(rctx, 7)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					return
				}
				if err != nil {
					t.Errorf("Receive: %v", err)
					return
				}
				for _, d := range ds {
					mu.Lock()
					seen[d.Job().ID]++
					mu.Unlock()
					if err := d.Ack(ctx); err != nil {
						t.Errorf("Ack: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("received %d distinct jobs, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("job %s received %d times", id, c)
		}
	}
}

// TestQueue_PublishWakesReceiver: a receiver waiting on an empty queue is woken by a publish from another
// process (another Queue on its own pool) well before its poll interval.
func TestQueue_PublishWakesReceiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	consumer := postgres.NewQueue(s.Pool(), postgres.QueueConfig{PollInterval: time.Minute})

	producerStore, err := postgres.Open(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer producerStore.Close()
	producer := postgres.NewQueue(producerStore.Pool(), postgres.QueueConfig{})

	got := make(chan []ports.Delivery, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		ds, err := consumer.Receive(rctx, 10)
		if err != nil {
			t.Errorf("Receive: %v", err)
		}
		got <- ds
	}()
	time.Sleep(300 * time.Millisecond) // let the receiver find the queue empty and start waiting
	start := time.Now()
	if err := producer.Publish(ctx, newJobs(1)); err != nil {
		t.Fatal(err)
	}
	ds := <-got
	if len(ds) != 1 {
		t.Fatalf("received %d", len(ds))
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("receiver woke after %v; the notification did not wake it", waited)
	}
	// The waiting connection went back to the pool without listening: no pooled connection listens.
	conns := s.Pool().AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	if len(conns) == 0 {
		t.Fatal("no idle connections to inspect")
	}
	for _, c := range conns {
		var listening int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_listening_channels()`).Scan(&listening); err != nil {
			t.Fatal(err)
		}
		if listening != 0 {
			t.Fatalf("a pooled connection still listens on %d channels", listening)
		}
	}
}

func TestQueue_ReceiveHonoursContext(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{PollInterval: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	ds, err := q.Receive(ctx, 1)
	if !errors.Is(err, context.Canceled) || len(ds) != 0 {
		t.Fatalf("Receive = %d, %v; want context.Canceled", len(ds), err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("Receive ignored its context")
	}
}

// TestQueue_IdleReceiverDoesNotHoldPoolClose: a process shutting down may close its pool while a receiver
// still waits with a live context; Close returns within a poll interval and the receiver gets an error.
func TestQueue_IdleReceiverDoesNotHoldPoolClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.Store(t)
	s, err := postgres.Open(ctx, base.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{PollInterval: 50 * time.Millisecond})
	errs := make(chan error, 1)
	go func() {
		_, err := q.Receive(ctx, 1)
		errs <- err
	}()
	time.Sleep(200 * time.Millisecond)
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("closing the pool waited on an idle receiver")
	}
	select {
	case err := <-errs:
		if err == nil {
			t.Fatal("Receive on a closed pool returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Receive kept waiting on a closed pool")
	}
}
