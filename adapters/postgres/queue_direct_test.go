package postgres_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// With EnqueueSendsOn, a send's jobs are written into delivery_queue in the send's transaction: only for
// the sends that were written (not for a taken key or one over its cap), in their lane, with nothing left
// in delivery_outbox, and a notification after the commit wakes a consumer that is waiting for one.
func TestEnqueueSendsOn_WritesJobsIntoTheQueue(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := pgtest.Store(t)
	f := newSendFixture(t, st)
	plan := ports.Plan{WarmupCap: 6}

	// Written before: its job goes to the outbox, as it does without the queue.
	earlier := underPlan(f.newSend(t, "old@rcpt.example"), plan)
	earlier.Message.IdempotencyKey = "broadcast:b:c1"
	earlierID := f.mustInsert(t, earlier)
	if n := countRows(t, st, `SELECT count(*) FROM delivery_outbox WHERE message_id = $1`, earlierID); n != 1 {
		t.Fatalf("outbox jobs of the earlier send = %d, want 1", n)
	}

	// A poll interval no test waits out: only a notification can wake the consumer below.
	q := postgres.NewQueue(st.Pool(), postgres.QueueConfig{PollInterval: time.Hour})
	st.EnqueueSendsOn(q)

	listener, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	if _, err := listener.Exec(ctx, `LISTEN postmill_delivery_queue`); err != nil {
		t.Fatal(err)
	}

	// One transactional send to two domains.
	single := f.newSend(t, "a@one.example", "b@two.example") // two units of the day
	singleID := f.mustInsert(t, single)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second) // a bound on failure, not a measurement
	defer wcancel()
	if _, err := listener.Conn().WaitForNotification(wctx); err != nil {
		t.Fatalf("no notification after the send committed: %v", err)
	}

	// A page of bulk sends: c0, c2 and c3 fit under the cap (after the earlier send's unit and the single send's two), c1's key is
	// taken and c4, c5 are over the cap.
	page := make([]ports.NewMessage, 6)
	for i := range page {
		page[i] = asBroadcastSend(underPlan(f.newSend(t, fmt.Sprintf("c%d@rcpt.example", i)), plan), i)
	}
	ins, err := st.InsertMessages(ctx, page)
	if err != nil {
		t.Fatalf("InsertMessages: %v", err)
	}
	if !ins[1].Existing || ins[1].ID != earlierID || ins[4].OverLimit == nil || ins[5].OverLimit == nil {
		t.Fatalf("answers = %+v", ins)
	}

	type row struct {
		message, domain string
		bulk            bool
		recipients      int
	}
	rows, err := st.Pool().Query(ctx, `SELECT message_id::text, domain, bulk, cardinality(recipient_ids) FROM delivery_queue ORDER BY bulk, domain`)
	if err != nil {
		t.Fatal(err)
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.message, &r.domain, &r.bulk, &r.recipients); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []row{{singleID, "one.example", false, 1}, {singleID, "two.example", false, 1}}
	for _, i := range []int{0, 2, 3} {
		want = append(want, row{page[i].Message.ID, "rcpt.example", true, 1})
	}
	byLane := func(a, b row) int {
		return cmp.Or(cmpBool(a.bulk, b.bulk), cmp.Compare(a.domain, b.domain), cmp.Compare(a.message, b.message))
	}
	slices.SortFunc(got, byLane)
	slices.SortFunc(want, byLane)
	if !slices.Equal(got, want) {
		t.Fatalf("queue = %+v\nwant    %+v", got, want)
	}
	if n := countRows(t, st, `SELECT count(*) FROM delivery_outbox`); n != 1 {
		t.Fatalf("outbox jobs = %d, want only the earlier send's", n)
	}

	// A consumer waiting on an empty lane is woken by the next send's notification.
	drained := 0
	for drained < len(want) {
		ds, err := q.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		drained += len(ds)
	}
	received := make(chan []ports.Delivery, 1)
	go func() {
		ds, err := q.Receive(wctx, 10)
		if err != nil {
			t.Error(err)
		}
		received <- ds
	}()
	// The receiver may look before or after this send commits; either way it must return the job, and
	// after the look that found nothing only the notification can make it look again.
	later := f.mustInsert(t, f.newSend(t, "z@one.example"))
	ds := <-received
	if len(ds) != 1 || ds[0].Job().MessageID != later || ds[0].Job().Bulk {
		t.Fatalf("received %d jobs, want the later send's", len(ds))
	}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// The queue tells a consumer of this process when transactional jobs were queued here (the MTA then leases
// at once instead of waiting for a batch of free slots): after the commit of a transactional send or
// Publish, and never for a broadcast's jobs alone. One unread value stands for every queueing before it.
func TestQueue_SignalsTransactionalJobs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := pgtest.Store(t)
	f := newSendFixture(t, st)
	q := postgres.NewQueue(st.Pool(), postgres.QueueConfig{PollInterval: time.Hour})
	st.EnqueueSendsOn(q)
	signalled := func() bool {
		select {
		case <-q.TransactionalQueued():
			return true
		default:
			return false
		}
	}

	page := make([]ports.NewMessage, 3)
	for i := range page {
		page[i] = asBroadcastSend(f.newSend(t, fmt.Sprintf("c%d@rcpt.example", i)), i)
	}
	if _, err := st.InsertMessages(ctx, page); err != nil {
		t.Fatalf("InsertMessages: %v", err)
	}
	if signalled() {
		t.Fatal("signalled after a page of bulk sends only")
	}

	f.mustInsert(t, f.newSend(t, "a@one.example"))
	f.mustInsert(t, f.newSend(t, "b@two.example"))
	if !signalled() {
		t.Fatal("no signal after transactional sends")
	}
	if signalled() {
		t.Fatal("two values for sends that came before the consumer looked; want one standing for both")
	}

	bulk := ports.DeliveryJob{ID: newV7(), OrganizationID: f.org.ID, MessageID: newV7(), Domain: "bulk.example",
		RecipientIDs: []string{newV7()}, Attempt: 1, FirstQueuedAt: time.Now(), Bulk: true}
	if err := q.Publish(ctx, []ports.DeliveryJob{bulk}); err != nil {
		t.Fatal(err)
	}
	if signalled() {
		t.Fatal("signalled after publishing a bulk job")
	}
	tx := bulk
	tx.ID, tx.Bulk = newV7(), false
	if err := q.Publish(ctx, []ports.DeliveryJob{tx}); err != nil {
		t.Fatal(err)
	}
	if !signalled() {
		t.Fatal("no signal after publishing a transactional job")
	}
}

// The Store's Outbox tells the relay of its process when the send path or the scheduler's promotion
// committed jobs to delivery_outbox (ports.OutboxSignal), and not when the send path wrote them straight
// into the PostgreSQL queue, where the relay has nothing to move.
func TestOutbox_SignalsJobsCommittedToIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t)
	f := newSendFixture(t, st)
	signalled := func() bool {
		select {
		case <-st.OutboxAdded():
			return true
		default:
			return false
		}
	}
	if signalled() {
		t.Fatal("signalled before anything was written")
	}

	f.mustInsert(t, f.newSend(t, "a@one.example"))
	f.mustInsert(t, f.newSend(t, "b@two.example"))
	if n := countRows(t, st, `SELECT count(*) FROM delivery_outbox`); n != 2 {
		t.Fatalf("outbox jobs = %d, want 2", n)
	}
	if !signalled() {
		t.Fatal("no signal after sends wrote their jobs to the outbox")
	}
	if signalled() {
		t.Fatal("two values for sends that came before the relay looked; want one standing for both")
	}

	now := baseTime.Add(time.Hour)
	due := f.mustEarlierScheduled(t, now.Add(-time.Minute))
	job := ports.DeliveryJob{ID: newV7(), Domain: "three.example", RecipientIDs: []string{newV7()}, Attempt: 1, FirstQueuedAt: now}
	n, err := st.PromoteDue(ctx, now, 10, func(m ports.Message, _ ports.Organization, _ ports.Domain) (ports.MessageStatus, []ports.Event, []ports.DeliveryJob) {
		return ports.StatusQueued, nil, []ports.DeliveryJob{job}
	})
	if err != nil || n != 1 {
		t.Fatalf("PromoteDue = %d, %v; want 1 (%s)", n, err, due)
	}
	if !signalled() {
		t.Fatal("no signal after a promotion wrote a job to the outbox")
	}

	q := postgres.NewQueue(st.Pool(), postgres.QueueConfig{PollInterval: time.Hour})
	st.EnqueueSendsOn(q)
	f.mustInsert(t, f.newSend(t, "c@four.example"))
	if n := countRows(t, st, `SELECT count(*) FROM delivery_queue`); n != 1 {
		t.Fatalf("queued jobs = %d, want 1", n)
	}
	if signalled() {
		t.Fatal("signalled after a send wrote its job straight into the queue")
	}
}
