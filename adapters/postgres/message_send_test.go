package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestInsertMessage_WritesEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSendFixture(t, pgtest.Store(t))

	nm := f.newSend(t, "a@one.example", "b@Two.Example", "c@one.example")
	nm.Message.ReplyTo = "reply@" + f.dom.Name
	nm.Message.Headers = map[string]string{"X-Campaign": "spring", "List-Unsubscribe": "<https://u.example/x>"}
	nm.Message.Tags = map[string]string{"kind": "welcome"}
	nm.Message.Metadata = json.RawMessage(`{"orderId": 42, "nested": {"a": [1, 2]}}`)
	nm.Message.IdempotencyKey = "key-" + randomHex(t, 4)
	nm.Message.Attachments = []ports.StoredAttachment{
		{ID: newV7(), Filename: "invoice.pdf", ContentType: "application/pdf", Size: 1234, Key: "att/" + f.org.ID + "/x/1"},
		{ID: newV7(), Filename: "logo.png", ContentType: "image/png", Size: 99, Inline: true, ContentID: "logo", Key: "att/" + f.org.ID + "/x/2"},
	}
	sandbox := "sandbox: not delivered"
	nm.Events = append(nm.Events, ports.Event{ID: newV7(), OrganizationID: f.org.ID, Type: ports.EventEmailSent,
		MessageID: nm.Message.ID, RecipientID: nm.Message.Recipients[0].ID, ProviderResponse: &sandbox, OccurredAt: baseTime.Add(time.Millisecond)})

	ins, err := f.s.InsertMessage(ctx, nm)
	id, status, existing := ins.ID, ins.Status, ins.Existing
	if err != nil || existing || id != nm.Message.ID || status != ports.StatusQueued || ins.OverLimit != nil {
		t.Fatalf("InsertMessage = %q, %q, existing=%v, %v", id, status, existing, err)
	}

	got, err := f.s.GetMessage(ctx, f.org.ID, id)
	if err != nil {
		t.Fatalf("GetMessage: %v", err)
	}
	want := nm.Message
	if got.ID != want.ID || got.OrganizationID != f.org.ID || got.DomainID != f.dom.ID || got.Status != ports.StatusQueued ||
		got.From != want.From || got.Subject != want.Subject || got.HTML != want.HTML || got.Text != want.Text ||
		got.ReplyTo != want.ReplyTo || got.IdempotencyKey != want.IdempotencyKey || got.Sandbox || got.ScheduledAt != nil {
		t.Fatalf("GetMessage = %+v", got)
	}
	requireTime(t, "CreatedAt", &got.CreatedAt, baseTime)
	if fmt.Sprint(got.Headers) != fmt.Sprint(want.Headers) || fmt.Sprint(got.Tags) != fmt.Sprint(want.Tags) {
		t.Fatalf("headers %v tags %v", got.Headers, got.Tags)
	}
	var meta map[string]any
	if err := json.Unmarshal(got.Metadata, &meta); err != nil || meta["orderId"] != float64(42) {
		t.Fatalf("metadata = %s (%v)", got.Metadata, err)
	}
	if len(got.Recipients) != 3 {
		t.Fatalf("recipients = %+v", got.Recipients)
	}
	for i, r := range got.Recipients {
		if r != want.Recipients[i] {
			t.Fatalf("recipient %d = %+v, want %+v (request order)", i, r, want.Recipients[i])
		}
	}
	if len(got.Attachments) != 2 || got.Attachments[0] != want.Attachments[0] || got.Attachments[1] != want.Attachments[1] {
		t.Fatalf("attachments = %+v", got.Attachments)
	}
	if len(got.Events) != 2 || got.Events[0].Type != ports.EventEmailQueued || got.Events[1].Type != ports.EventEmailSent {
		t.Fatalf("events = %+v, want queued then sent", got.Events)
	}
	if got.Events[0].ProviderResponse != nil || got.Events[1].ProviderResponse == nil || *got.Events[1].ProviderResponse != sandbox ||
		got.Events[1].RecipientID != want.Recipients[0].ID || got.Events[0].RecipientID != "" || got.Events[0].MessageID != id {
		t.Fatalf("event fields = %+v / %+v", got.Events[0], got.Events[1])
	}
	requireTime(t, "OccurredAt", &got.Events[0].OccurredAt, baseTime)

	// One job per recipient domain, with that domain's recipients.
	if n := countRows(t, f.s, `SELECT count(*) FROM delivery_outbox WHERE message_id = $1`, id); n != 2 {
		t.Fatalf("outbox jobs = %d, want 2", n)
	}
	var ids []string
	if err := f.s.Pool().QueryRow(ctx, `SELECT recipient_ids::text[] FROM delivery_outbox WHERE message_id = $1 AND domain = 'one.example'`, id).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != want.Recipients[0].ID || ids[1] != want.Recipients[2].ID {
		t.Fatalf("job recipients = %v", ids)
	}
	if n := countRows(t, f.s, `SELECT count(*) FROM recipients WHERE message_id = $1 AND domain = 'two.example'`, id); n != 1 {
		t.Fatal("recipient domain not stored lower-cased")
	}
	if month, day := f.usage(t); month != 3 || day != 3 {
		t.Fatalf("usage = %d/%d, want 3/3", month, day)
	}

	if gotID, gotStatus, err := f.s.MessageByIdempotencyKey(ctx, f.org.ID, want.IdempotencyKey); err != nil || gotID != id || gotStatus != ports.StatusQueued {
		t.Fatalf("MessageByIdempotencyKey = %q %q %v", gotID, gotStatus, err)
	}
	_, _, err = f.s.MessageByIdempotencyKey(ctx, f.org.ID, "unused")
	requireCode(t, err, ports.CodeNotFound)
	for _, bad := range []string{newV7(), "not-a-uuid"} {
		_, err := f.s.GetMessage(ctx, f.org.ID, bad)
		if e := requireCode(t, err, ports.CodeNotFound); e.Message != "message not found" {
			t.Fatalf("message = %q", e.Message)
		}
	}
}

func TestInsertMessage_IdempotentReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSendFixture(t, pgtest.Store(t))

	first := f.newSend(t, "a@example.org")
	first.Message.IdempotencyKey = "order-1"
	id := f.mustInsert(t, first)

	// Rule 5: a different body with the same key returns the original, writes and meters nothing.
	replay := f.newSend(t, "x@example.org", "y@example.org")
	replay.Message.IdempotencyKey = "order-1"
	replay.Message.Subject = "Different"
	ins, err := f.s.InsertMessage(ctx, replay)
	gotID, status, existing := ins.ID, ins.Status, ins.Existing
	if err != nil || !existing || gotID != id || status != ports.StatusQueued {
		t.Fatalf("replay = %q %q existing=%v %v", gotID, status, existing, err)
	}
	counts := f.rowCounts(t)
	if counts["messages"] != 1 || counts["recipients"] != 1 || counts["events"] != 1 || counts["delivery_outbox"] != 1 {
		t.Fatalf("rows after replay = %v", counts)
	}
	if month, day := f.usage(t); month != 1 || day != 1 {
		t.Fatalf("usage after replay = %d/%d, want 1/1", month, day)
	}
	// Absent metadata, headers and tags read back as absent, not as JSON null or {}.
	got, err := f.s.GetMessage(ctx, f.org.ID, id)
	if err != nil || got.Metadata != nil || got.Headers != nil || got.Tags != nil {
		t.Fatalf("message without metadata = %+v (%v)", got, err)
	}
}

// TestInsertMessage_IdempotencyConcurrent: of 20 concurrent sends with one key exactly one creates the
// message; the others get it back as existing, and usage is metered once (SPEC §4.2 rule 4).
func TestInsertMessage_IdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSendFixture(t, pgtest.Store(t))

	const n = 20
	var created atomic.Int32
	ids := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		nm := f.newSend(t, "a@example.org", "b@example.net")
		nm.Message.IdempotencyKey = "same-key"
		wg.Go(func() {
			<-start
			ins, err := f.s.InsertMessage(ctx, nm)
			ids[i], errs[i] = ins.ID, err
			if err == nil && !ins.Existing {
				created.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if ids[i] != ids[0] {
			t.Fatalf("send %d returned %q, send 0 %q: want one message", i, ids[i], ids[0])
		}
	}
	if created.Load() != 1 {
		t.Fatalf("created = %d, want exactly 1", created.Load())
	}
	counts := f.rowCounts(t)
	if counts["messages"] != 1 || counts["recipients"] != 2 || counts["events"] != 1 || counts["delivery_outbox"] != 2 {
		t.Fatalf("rows = %v, want one message's", counts)
	}
	if month, day := f.usage(t); month != 2 || day != 2 {
		t.Fatalf("usage = %d/%d, want 2/2 (metered once)", month, day)
	}
}

func TestInsertMessage_MeterRefusalWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSendFixture(t, pgtest.Store(t))

	nm := f.newSend(t, "a@example.org", "b@example.org", "c@example.org")
	nm.Message.Attachments = []ports.StoredAttachment{{ID: newV7(), Filename: "a.txt", ContentType: "text/plain", Size: 1, Key: "k"}}
	ins, err := f.s.InsertMessage(ctx, underPlan(nm, ports.Plan{MonthlyLimit: 2}))
	requireOverLimit(t, ins, err, ports.MetricEmailsSent, 2)
	for table, n := range f.rowCounts(t) {
		if n != 0 {
			t.Fatalf("refused send left %d rows in %s", n, table)
		}
	}
	if month, day := f.usage(t); month != 0 || day != 0 {
		t.Fatalf("refused send metered %d/%d", month, day)
	}

	ins, err = f.s.InsertMessage(ctx, underPlan(nm, ports.Plan{MonthlyLimit: 100, WarmupCap: 2}))
	requireOverLimit(t, ins, err, ports.MetricEmailsSentDaily, 2)
	// The monthly limit had room, but the units go onto every meter or onto none.
	if month, day := f.usage(t); month != 0 || day != 0 {
		t.Fatalf("warm-up refusal metered %d/%d", month, day)
	}
	// Over both limits, the refusal names the first limit the core listed, whichever that is.
	ins, err = f.s.InsertMessage(ctx, underPlan(nm, ports.Plan{MonthlyLimit: 2, WarmupCap: 2}))
	requireOverLimit(t, ins, err, ports.MetricEmailsSent, 2)
	reversed := underPlan(nm, ports.Plan{MonthlyLimit: 2, WarmupCap: 1})
	reversed.Usage.Limits[0], reversed.Usage.Limits[1] = reversed.Usage.Limits[1], reversed.Usage.Limits[0]
	ins, err = f.s.InsertMessage(ctx, reversed)
	requireOverLimit(t, ins, err, ports.MetricEmailsSentDaily, 1)
	for table, n := range f.rowCounts(t) {
		if n != 0 {
			t.Fatalf("refused sends left %d rows in %s", n, table)
		}
	}

	// Exactly at the limit is allowed; zero limits count without limiting.
	nm.Message.IdempotencyKey = "fits-exactly"
	f.mustInsert(t, underPlan(nm, ports.Plan{MonthlyLimit: 3, WarmupCap: 3}))
	unlimited := f.newSend(t, "d@example.org")
	f.mustInsert(t, unlimited)
	if month, day := f.usage(t); month != 4 || day != 4 {
		t.Fatalf("usage = %d/%d, want 4/4", month, day)
	}
	// A replay of a used key is answered with its message even when the limits are full: nothing is metered.
	replay := underPlan(f.newSend(t, "z@example.org"), ports.Plan{MonthlyLimit: 1, WarmupCap: 1})
	replay.Message.IdempotencyKey = "fits-exactly"
	if ins, err := f.s.InsertMessage(ctx, replay); err != nil || !ins.Existing || ins.ID != nm.Message.ID || ins.OverLimit != nil {
		t.Fatalf("replay over full limits = %+v, %v; want the original message", ins, err)
	}
	// A new day starts a new warm-up count but not a new month.
	tomorrow := f.newSend(t, "e@example.org")
	tomorrow.Usage = usageUnder(1, ports.Plan{MonthlyLimit: 5, WarmupCap: 1}, baseTime.Add(24*time.Hour))
	f.mustInsert(t, tomorrow)
	if month, _ := f.usage(t); month != 5 {
		t.Fatalf("month usage = %d, want 5", month)
	}
	if v, _ := f.s.Usage(ctx, f.org.ID, ports.MetricEmailsSentDaily, meterDay.Add(24*time.Hour)); v != 1 {
		t.Fatalf("next day's usage = %d, want 1", v)
	}
}

// TestInsertMessage_MeteringConcurrent: 50 concurrent sends never pass the monthly allowance or the
// warm-up cap, and every refused send leaves no rows.
func TestInsertMessage_MeteringConcurrent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		plan   ports.Plan
		allow  int
		metric string
	}{
		{"monthly allowance", ports.Plan{MonthlyLimit: 30}, 15, ports.MetricEmailsSent},
		{"warm-up cap", ports.Plan{MonthlyLimit: 1000, WarmupCap: 21}, 10, ports.MetricEmailsSentDaily},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newSendFixture(t, pgtest.Store(t))
			const n = 50
			var ok, refused atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range n {
				nm := underPlan(f.newSend(t, "a@example.org", "b@example.net"), tc.plan) // two units each
				wg.Go(func() {
					<-start
					ins, err := f.s.InsertMessage(ctx, nm)
					switch {
					case err != nil:
						t.Errorf("send: %v", err)
					case ins.OverLimit == nil:
						ok.Add(1)
					case ins.OverLimit.Metric == tc.metric:
						refused.Add(1)
					default:
						t.Errorf("send refused over %+v, want %s", ins.OverLimit, tc.metric)
					}
				})
			}
			close(start)
			wg.Wait()
			if int(ok.Load()) != tc.allow || int(refused.Load()) != n-tc.allow {
				t.Fatalf("accepted %d, refused %d; want %d and %d", ok.Load(), refused.Load(), tc.allow, n-tc.allow)
			}
			counts := f.rowCounts(t)
			if counts["messages"] != tc.allow || counts["recipients"] != 2*tc.allow || counts["events"] != tc.allow ||
				counts["delivery_outbox"] != 2*tc.allow {
				t.Fatalf("rows = %v, want exactly the accepted sends'", counts)
			}
			if month, day := f.usage(t); month != int64(2*tc.allow) || day != int64(2*tc.allow) {
				t.Fatalf("usage = %d/%d, want %d", month, day, 2*tc.allow)
			}
		})
	}
}

// TestInsertMessage_ConcurrentMixed: concurrent sends are written in shared transactions; each still gets
// its own outcome. 80 sends over 20 idempotency keys (four sends per key) plus 20 sends without a key,
// against an allowance of 25 units: every key yields at most one message and every send of a key that
// succeeded got that message; no more than 25 messages exist, every accepted send is metered once, and no
// refused send left a row.
func TestInsertMessage_ConcurrentMixed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSendFixture(t, pgtest.Store(t))

	type result struct {
		key string
		ins ports.Inserted
		err error
	}
	var sends []ports.NewMessage
	for i := range 100 {
		nm := f.newSend(t, fmt.Sprintf("r%d@example.org", i))
		if i < 80 {
			nm.Message.IdempotencyKey = fmt.Sprintf("key-%02d", i%20)
		}
		sends = append(sends, underPlan(nm, ports.Plan{MonthlyLimit: 25}))
	}
	results := make([]result, len(sends))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, nm := range sends {
		wg.Go(func() {
			<-start
			ins, err := f.s.InsertMessage(ctx, nm)
			results[i] = result{nm.Message.IdempotencyKey, ins, err}
		})
	}
	close(start)
	wg.Wait()

	created, refused := 0, 0
	byKey := map[string]string{}
	for _, r := range results {
		switch {
		case r.err != nil:
			t.Fatalf("send error: %v", r.err)
		case r.ins.OverLimit != nil:
			if r.ins.OverLimit.Metric != ports.MetricEmailsSent {
				t.Fatalf("send refused over %+v", r.ins.OverLimit)
			}
			refused++
		case r.key == "":
			created++
		default:
			if prev, ok := byKey[r.key]; ok && prev != r.ins.ID {
				t.Fatalf("key %s answered with %s and %s", r.key, prev, r.ins.ID)
			}
			byKey[r.key] = r.ins.ID
			if !r.ins.Existing {
				created++
			}
		}
	}
	counts := f.rowCounts(t)
	if created != 25 || counts["messages"] != 25 {
		t.Fatalf("created %d (rows %d), want the allowance's 25 (refused %d)", created, counts["messages"], refused)
	}
	if counts["recipients"] != 25 || counts["events"] != 25 || counts["delivery_outbox"] != 25 {
		t.Fatalf("rows = %v, want 25 of each", counts)
	}
	if month, day := f.usage(t); month != 25 || day != 25 {
		t.Fatalf("usage = %d/%d, want 25", month, day)
	}
	for key, id := range byKey {
		n := countRows(t, f.s, `SELECT count(*) FROM messages WHERE organization_id = $1 AND idempotency_key = $2 AND id = $3`, f.org.ID, key, id)
		if n != 1 {
			t.Fatalf("key %s answered with %s, which is not its message", key, id)
		}
	}
}

// TestInsertMessage_GroupOutcomes drives the shared transaction directly with groups whose sends depend
// on each other.
func TestInsertMessage_GroupOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a refused send's key goes to the next send with that key", func(t *testing.T) {
		t.Parallel()
		f := newSendFixture(t, pgtest.Store(t))
		big := f.newSend(t, "a@example.org", "b@example.org") // 2 units: over the limit
		small := f.newSend(t, "c@example.org")                // 1 unit: fits
		big.Message.IdempotencyKey, small.Message.IdempotencyKey = "k", "k"
		big, small = underPlan(big, ports.Plan{MonthlyLimit: 1}), underPlan(small, ports.Plan{MonthlyLimit: 1})
		res, err := f.s.WriteSendGroup(ctx, big, small)
		if err != nil {
			t.Fatal(err)
		}
		requireOverLimit(t, res[0].Inserted, res[0].Err, ports.MetricEmailsSent, 1)
		if res[1].Err != nil || res[1].Existing || res[1].OverLimit != nil || res[1].ID != small.Message.ID {
			t.Fatalf("second send = %+v, want its own message created", res[1])
		}
		if counts := f.rowCounts(t); counts["messages"] != 1 || counts["recipients"] != 1 {
			t.Fatalf("rows = %v", counts)
		}
		if month, _ := f.usage(t); month != 1 {
			t.Fatalf("usage = %d, want 1", month)
		}
	})

	t.Run("same key in one group", func(t *testing.T) {
		t.Parallel()
		f := newSendFixture(t, pgtest.Store(t))
		first, second := f.newSend(t, "a@example.org"), f.newSend(t, "b@example.org")
		first.Message.IdempotencyKey, second.Message.IdempotencyKey = "k", "k"
		res, err := f.s.WriteSendGroup(ctx, first, second)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil || res[0].Existing || res[0].ID != first.Message.ID {
			t.Fatalf("first = %+v", res[0])
		}
		if res[1].Err != nil || !res[1].Existing || res[1].ID != first.Message.ID || res[1].Status != ports.StatusQueued {
			t.Fatalf("second = %+v, want the first's message as existing", res[1])
		}
		if month, _ := f.usage(t); month != 1 {
			t.Fatalf("usage = %d, want 1", month)
		}
	})

	t.Run("one failing send does not fail the others", func(t *testing.T) {
		t.Parallel()
		f := newSendFixture(t, pgtest.Store(t))
		good, bad, other := f.newSend(t, "a@example.org"), f.newSend(t, "b@example.org"), f.newSend(t, "c@example.org")
		bad.Message.DomainID = newV7()
		res, err := f.s.WriteSendGroup(ctx, good, bad, other)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil || res[2].Err != nil || res[0].ID != good.Message.ID || res[2].ID != other.Message.ID {
			t.Fatalf("good sends = %+v, %+v", res[0], res[2])
		}
		if e := requireCode(t, res[1].Err, ports.CodeInvalidArgument); e.Constraint != "messages_domain_id_fkey" {
			t.Fatalf("bad send = %+v", e)
		}
		if counts := f.rowCounts(t); counts["messages"] != 2 || counts["events"] != 2 {
			t.Fatalf("rows = %v", counts)
		}
		if month, _ := f.usage(t); month != 2 {
			t.Fatalf("usage = %d, want 2", month)
		}
	})

	t.Run("earlier sends get the allowance first", func(t *testing.T) {
		t.Parallel()
		f := newSendFixture(t, pgtest.Store(t))
		var sends []ports.NewMessage
		for i := range 5 {
			nm := f.newSend(t, fmt.Sprintf("r%d@example.org", i))
			sends = append(sends, underPlan(nm, ports.Plan{MonthlyLimit: 100, WarmupCap: 3}))
		}
		res, err := f.s.WriteSendGroup(ctx, sends...)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if i < 3 && (r.Err != nil || r.OverLimit != nil) {
				t.Fatalf("send %d: %+v, %v", i, r.OverLimit, r.Err)
			}
			if i >= 3 {
				requireOverLimit(t, r.Inserted, r.Err, ports.MetricEmailsSentDaily, 3)
			}
		}
		if month, day := f.usage(t); month != 3 || day != 3 {
			t.Fatalf("usage = %d/%d, want 3/3", month, day)
		}
	})
}

func TestInsertMessage_DomainMustBeTheOrganizations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := newSendFixture(t, s)
	b := newSendFixture(t, s)

	for _, domainID := range []string{newV7(), b.dom.ID} {
		nm := a.newSend(t, "x@example.org")
		nm.Message.DomainID = domainID
		_, err := s.InsertMessage(ctx, nm)
		if e := requireCode(t, err, ports.CodeInvalidArgument); e.Constraint != "messages_domain_id_fkey" {
			t.Fatalf("constraint = %q", e.Constraint)
		}
		if n := countRows(t, s, `SELECT count(*) FROM usage_meters WHERE organization_id = $1`, a.org.ID); n != 0 {
			t.Fatal("a refused send was metered")
		}
	}
}

// BenchmarkInsertMessage measures the send path's store work: one message with one recipient, its queued
// event, one delivery job and metering against limits, all for one organization (so every send contends for
// the same usage rows, as in the send benchmark). "sequential" is one caller at a time (the latency of one
// send, commit included); "parallel-N" runs N concurrent callers, whose sends share transactions.
func BenchmarkInsertMessage(b *testing.B) {
	s := pgtest.Store(b)
	f := newSendFixture(b, s)
	ctx := context.Background()
	send := func(b *testing.B) {
		nm := underPlan(f.newSend(b, "rcpt@example.org"), ports.Plan{MonthlyLimit: 1 << 40, WarmupCap: 1 << 40})
		if ins, err := s.InsertMessage(ctx, nm); err != nil || ins.OverLimit != nil {
			b.Error(ins.OverLimit, err)
		}
	}
	b.Run("sequential", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			send(b)
		}
	})
	for _, callers := range []int{4, 16, 64} {
		b.Run(fmt.Sprintf("parallel-%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					send(b)
				}
			})
		})
	}
}
