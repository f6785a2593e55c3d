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

// The bulk entry's store methods: a page of sends in one transaction, metered in page order, with a taken
// key answering Existing, the jobs in the bulk lane, and the keys looked up in one query.
func TestInsertMessages_PageInOrderWithLimitsAndKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSendFixture(t, pgtest.Store(t))
	plan := ports.Plan{WarmupCap: 5}

	// One earlier send holds a key and a unit of the day's cap.
	earlier := underPlan(f.newSend(t, "old@rcpt.example"), plan)
	earlier.Message.IdempotencyKey = "broadcast:b:c1"
	earlierID := f.mustInsert(t, earlier)

	// A page as the core builds it: fresh message ids, one key per contact.
	newPage := func(n int) []ports.NewMessage {
		page := make([]ports.NewMessage, n)
		for i := range page {
			page[i] = asBroadcastSend(underPlan(f.newSend(t, fmt.Sprintf("c%d@rcpt%d.example", i, i%2)), plan), i)
		}
		return page
	}
	page := newPage(8)
	ins, err := f.s.InsertMessages(ctx, page)
	if err != nil {
		t.Fatalf("InsertMessages: %v", err)
	}
	if len(ins) != len(page) {
		t.Fatalf("%d answers for %d sends", len(ins), len(page))
	}
	// c0 and c2..c4 fit (4 units after the earlier one's), c1 is the earlier message, c5.. are over the cap.
	if ins[1].ID != earlierID || !ins[1].Existing {
		t.Errorf("send with a taken key = %+v, want the earlier message", ins[1])
	}
	for _, i := range []int{0, 2, 3, 4} {
		if ins[i].ID != page[i].Message.ID || ins[i].Existing || ins[i].OverLimit != nil {
			t.Errorf("send %d = %+v, want written", i, ins[i])
		}
	}
	for _, i := range []int{5, 6, 7} {
		if ins[i].OverLimit == nil || ins[i].OverLimit.Metric != ports.MetricEmailsSentDaily {
			t.Errorf("send %d = %+v, want over the warm-up cap", i, ins[i])
		}
	}
	if n := countRows(t, f.s, `SELECT count(*) FROM messages WHERE organization_id = $1`, f.org.ID); n != 5 {
		t.Errorf("%d messages, want 5", n)
	}
	if n := countRows(t, f.s, `SELECT count(*) FROM delivery_outbox WHERE organization_id = $1 AND bulk`, f.org.ID); n != 4 {
		t.Errorf("%d bulk outbox jobs, want 4 (one per written page send)", n)
	}
	if n := countRows(t, f.s, `SELECT count(*) FROM recipients WHERE organization_id = $1`, f.org.ID); n != 5 {
		t.Errorf("%d recipients, want 5", n)
	}
	var used int64
	if err := f.s.Pool().QueryRow(ctx, `SELECT value FROM usage_meters WHERE organization_id = $1 AND metric = $2`,
		f.org.ID, ports.MetricEmailsSentDaily).Scan(&used); err != nil || used != 5 {
		t.Errorf("daily meter = %d (%v), want 5", used, err)
	}

	// Sending the page's first five contacts again (a restart) writes nothing: each answers with its message.
	again, err := f.s.InsertMessages(ctx, newPage(5))
	if err != nil {
		t.Fatalf("InsertMessages again: %v", err)
	}
	for i, r := range again {
		want := page[i].Message.ID
		if i == 1 {
			want = earlierID
		}
		if !r.Existing || r.ID != want {
			t.Errorf("repeated send %d = %+v, want existing %s", i, r, want)
		}
	}

	keys := []string{"broadcast:b:c0", "broadcast:b:c1", "broadcast:b:c6", "broadcast:other"}
	got, err := f.s.MessagesByIdempotencyKeys(ctx, f.org.ID, keys)
	if err != nil {
		t.Fatalf("MessagesByIdempotencyKeys: %v", err)
	}
	if len(got) != 2 || got["broadcast:b:c0"].ID != page[0].Message.ID || got["broadcast:b:c1"].ID != earlierID ||
		got["broadcast:b:c0"].Status != ports.StatusQueued {
		t.Errorf("MessagesByIdempotencyKeys = %+v", got)
	}
	// Another organization's keys are not seen.
	other := newSendFixture(t, f.s)
	if got, err := f.s.MessagesByIdempotencyKeys(ctx, other.org.ID, keys); err != nil || len(got) != 0 {
		t.Errorf("another organization sees %+v (%v)", got, err)
	}
}

// The queue leases every visible transactional job before any bulk job, however much older the bulk ones
// are, and a leased job says which lane it is in.
func TestQueue_TransactionalBeforeBulk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{PollInterval: 20 * time.Millisecond})

	bulk := newJobs(5)
	for i := range bulk {
		bulk[i].Bulk = true
	}
	if err := q.Publish(ctx, bulk); err != nil {
		t.Fatalf("Publish bulk: %v", err)
	}
	time.Sleep(5 * time.Millisecond) // the transactional jobs become visible after the bulk ones
	tx := newJobs(2)
	if err := q.Publish(ctx, tx); err != nil {
		t.Fatalf("Publish transactional: %v", err)
	}
	ds := mustReceive(t, q, 3, 5*time.Second)
	if len(ds) != 3 {
		t.Fatalf("received %d, want 3", len(ds))
	}
	got := map[string]bool{} // leased id → bulk
	for _, d := range ds {
		got[d.Job().ID] = d.Job().Bulk
	}
	bulk0, leased0 := got[bulk[0].ID]
	tx0, leasedTx0 := got[tx[0].ID]
	tx1, leasedTx1 := got[tx[1].ID]
	if !leasedTx0 || !leasedTx1 || tx0 || tx1 {
		t.Fatalf("leased %v: want both transactional jobs, in the transactional lane", got)
	}
	if !leased0 || !bulk0 {
		t.Fatalf("leased %v: want the oldest bulk job %s as the third, in the bulk lane", got, bulk[0].ID)
	}
}

// asBroadcastSend makes nm contact i's email of a broadcast, as the expander writes it: its idempotency key
// and jobs in the bulk lane.
func asBroadcastSend(nm ports.NewMessage, i int) ports.NewMessage {
	nm.Message.IdempotencyKey = fmt.Sprintf("broadcast:b:c%d", i)
	for j := range nm.Outbox {
		nm.Outbox[j].Bulk = true
	}
	return nm
}
