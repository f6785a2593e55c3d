package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// sendFixture is an organization with a verified domain to send from.
type sendFixture struct {
	s   *postgres.Store
	org ports.Organization
	dom ports.Domain
}

func newSendFixture(tb testing.TB, s *postgres.Store) sendFixture {
	tb.Helper()
	a := mustSignup(tb, s)
	return sendFixture{s: s, org: a.org, dom: mustDomain(tb, s, a.org.ID)}
}

// newSend builds what the core would hand InsertMessage for a queued message to addrs: one queued event,
// one delivery job per recipient domain and one metered unit per recipient, with no limits.
func (f sendFixture) newSend(tb testing.TB, addrs ...string) ports.NewMessage {
	tb.Helper()
	id := newV7()
	m := ports.Message{
		ID:             id,
		OrganizationID: f.org.ID,
		DomainID:       f.dom.ID,
		Status:         ports.StatusQueued,
		From:           "Sender <sender@" + f.dom.Name + ">",
		Subject:        "Hello",
		HTML:           "<p>Hello</p>",
		Text:           "Hello",
		CreatedAt:      baseTime,
	}
	byDomain := map[string][]string{}
	var domains []string
	for i, addr := range addrs {
		typ := ports.RecipientTo
		if i%3 == 1 {
			typ = ports.RecipientCc
		} else if i%3 == 2 {
			typ = ports.RecipientBcc
		}
		r := ports.Recipient{ID: newV7(), Type: typ, Address: addr, Status: ports.StatusQueued}
		m.Recipients = append(m.Recipients, r)
		dom := strings.ToLower(addr[strings.LastIndexByte(addr, '@')+1:])
		if _, ok := byDomain[dom]; !ok {
			domains = append(domains, dom)
		}
		byDomain[dom] = append(byDomain[dom], r.ID)
	}
	nm := ports.NewMessage{
		Message:  m,
		Events:   []ports.Event{{ID: newV7(), OrganizationID: f.org.ID, Type: ports.EventEmailQueued, MessageID: id, OccurredAt: baseTime}},
		Meter:    int64(len(addrs)),
		MeterDay: baseTime,
	}
	for _, dom := range domains {
		nm.Outbox = append(nm.Outbox, ports.DeliveryJob{
			ID: newV7(), OrganizationID: f.org.ID, MessageID: id, Domain: dom, RecipientIDs: byDomain[dom],
			Attempt: 1, FirstQueuedAt: baseTime, NotBefore: baseTime,
		})
	}
	return nm
}

func (f sendFixture) mustInsert(tb testing.TB, nm ports.NewMessage) string {
	tb.Helper()
	id, _, existing, err := f.s.InsertMessage(context.Background(), nm)
	if err != nil || existing {
		tb.Fatalf("InsertMessage: existing=%v err=%v", existing, err)
	}
	return id
}

var (
	meterMonth = time.Date(baseTime.Year(), baseTime.Month(), 1, 0, 0, 0, 0, time.UTC)
	meterDay   = time.Date(baseTime.Year(), baseTime.Month(), baseTime.Day(), 0, 0, 0, 0, time.UTC)
)

func (f sendFixture) usage(tb testing.TB) (month, day int64) {
	tb.Helper()
	ctx := context.Background()
	month, err := f.s.Usage(ctx, f.org.ID, ports.MetricEmailsSent, meterMonth)
	if err != nil {
		tb.Fatal(err)
	}
	day, err = f.s.Usage(ctx, f.org.ID, postgres.MetricEmailsSentDaily, meterDay)
	if err != nil {
		tb.Fatal(err)
	}
	return month, day
}

// rowCounts counts the organization's rows in every table a send writes.
func (f sendFixture) rowCounts(tb testing.TB) map[string]int {
	tb.Helper()
	out := map[string]int{}
	for _, table := range []string{"messages", "recipients", "attachments", "events", "delivery_outbox"} {
		out[table] = countRows(tb, f.s, `SELECT count(*) FROM `+table+` WHERE organization_id = $1`, f.org.ID)
	}
	out["events"] -= countRows(tb, f.s, `SELECT count(*) FROM events WHERE organization_id = $1 AND domain_id IS NOT NULL`, f.org.ID)
	return out
}

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

	id, status, existing, err := f.s.InsertMessage(ctx, nm)
	if err != nil || existing || id != nm.Message.ID || status != ports.StatusQueued {
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
	gotID, status, existing, err := f.s.InsertMessage(ctx, replay)
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
			id, _, existing, err := f.s.InsertMessage(ctx, nm)
			ids[i], errs[i] = id, err
			if err == nil && !existing {
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
	nm.Plan = ports.Plan{MonthlyLimit: 2}
	_, _, _, err := f.s.InsertMessage(ctx, nm)
	e := requireCode(t, err, ports.CodePaymentRequired)
	if e.Reason != "plan_limit_exceeded" || e.Message != "Plan limit reached for emails_sent" ||
		e.Fields["metric"] != "emails_sent" || e.Fields["limit"] != int64(2) {
		t.Fatalf("error = %+v", e)
	}
	for table, n := range f.rowCounts(t) {
		if n != 0 {
			t.Fatalf("refused send left %d rows in %s", n, table)
		}
	}
	if month, day := f.usage(t); month != 0 || day != 0 {
		t.Fatalf("refused send metered %d/%d", month, day)
	}

	nm.Plan = ports.Plan{MonthlyLimit: 100, WarmupCap: 2}
	_, _, _, err = f.s.InsertMessage(ctx, nm)
	e = requireCode(t, err, ports.CodeResourceExhausted)
	if e.Reason != "warmup_cap_reached" || e.Message != "warm-up daily send cap reached" || e.RetryAfterSeconds != 0 {
		t.Fatalf("error = %+v", e)
	}
	// The month row was incremented inside the refused transaction: it must have been rolled back too.
	if month, day := f.usage(t); month != 0 || day != 0 {
		t.Fatalf("warm-up refusal metered %d/%d", month, day)
	}

	// Exactly at the limit is allowed; zero limits count without limiting.
	nm.Plan = ports.Plan{MonthlyLimit: 3, WarmupCap: 3}
	f.mustInsert(t, nm)
	unlimited := f.newSend(t, "d@example.org")
	f.mustInsert(t, unlimited)
	if month, day := f.usage(t); month != 4 || day != 4 {
		t.Fatalf("usage = %d/%d, want 4/4", month, day)
	}
	// A new day starts a new warm-up count but not a new month.
	tomorrow := f.newSend(t, "e@example.org")
	tomorrow.MeterDay = baseTime.Add(24 * time.Hour)
	tomorrow.Plan = ports.Plan{MonthlyLimit: 5, WarmupCap: 1}
	f.mustInsert(t, tomorrow)
	if month, _ := f.usage(t); month != 5 {
		t.Fatalf("month usage = %d, want 5", month)
	}
	if v, _ := f.s.Usage(ctx, f.org.ID, postgres.MetricEmailsSentDaily, meterDay.Add(24*time.Hour)); v != 1 {
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
		code   ports.Code
		reason string
	}{
		{"monthly allowance", ports.Plan{MonthlyLimit: 30}, 15, ports.CodePaymentRequired, "plan_limit_exceeded"},
		{"warm-up cap", ports.Plan{MonthlyLimit: 1000, WarmupCap: 21}, 10, ports.CodeResourceExhausted, "warmup_cap_reached"},
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
				nm := f.newSend(t, "a@example.org", "b@example.net") // two units each
				nm.Plan = tc.plan
				wg.Go(func() {
					<-start
					_, _, _, err := f.s.InsertMessage(ctx, nm)
					if err == nil {
						ok.Add(1)
						return
					}
					if e, isPorts := ports.AsError(err); isPorts && e.Code == tc.code && e.Reason == tc.reason {
						refused.Add(1)
						return
					}
					t.Errorf("send: %v", err)
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
		key, id  string
		existing bool
		err      error
	}
	var sends []ports.NewMessage
	for i := range 100 {
		nm := f.newSend(t, fmt.Sprintf("r%d@example.org", i))
		if i < 80 {
			nm.Message.IdempotencyKey = fmt.Sprintf("key-%02d", i%20)
		}
		nm.Plan = ports.Plan{MonthlyLimit: 25}
		sends = append(sends, nm)
	}
	results := make([]result, len(sends))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, nm := range sends {
		wg.Go(func() {
			<-start
			id, _, existing, err := f.s.InsertMessage(ctx, nm)
			results[i] = result{nm.Message.IdempotencyKey, id, existing, err}
		})
	}
	close(start)
	wg.Wait()

	created, refused := 0, 0
	byKey := map[string]string{}
	for _, r := range results {
		switch {
		case r.err != nil:
			if e, ok := ports.AsError(r.err); !ok || e.Reason != "plan_limit_exceeded" {
				t.Fatalf("send error: %v", r.err)
			}
			refused++
		case r.key == "":
			created++
		default:
			if prev, ok := byKey[r.key]; ok && prev != r.id {
				t.Fatalf("key %s answered with %s and %s", r.key, prev, r.id)
			}
			byKey[r.key] = r.id
			if !r.existing {
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
		big.Plan, small.Plan = ports.Plan{MonthlyLimit: 1}, ports.Plan{MonthlyLimit: 1}
		res, err := f.s.WriteSendGroup(ctx, big, small)
		if err != nil {
			t.Fatal(err)
		}
		requireCode(t, res[0].Err, ports.CodePaymentRequired)
		if res[1].Err != nil || res[1].Existing || res[1].ID != small.Message.ID {
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
			nm.Plan = ports.Plan{MonthlyLimit: 100, WarmupCap: 3}
			sends = append(sends, nm)
		}
		res, err := f.s.WriteSendGroup(ctx, sends...)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if i < 3 && r.Err != nil {
				t.Fatalf("send %d: %v", i, r.Err)
			}
			if i >= 3 {
				requireCode(t, r.Err, ports.CodeResourceExhausted)
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
		_, _, _, err := s.InsertMessage(ctx, nm)
		if e := requireCode(t, err, ports.CodeInvalidArgument); e.Constraint != "messages_domain_id_fkey" {
			t.Fatalf("constraint = %q", e.Constraint)
		}
		if n := countRows(t, s, `SELECT count(*) FROM usage_meters WHERE organization_id = $1`, a.org.ID); n != 0 {
			t.Fatal("a refused send was metered")
		}
	}
}

func TestListMessages_Paging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSendFixture(t, pgtest.Store(t))

	// Seven messages, two of them created at the same instant (ordered by id then).
	var want []string // newest first
	for i := range 7 {
		nm := f.newSend(t, fmt.Sprintf("r%d@example.org", i))
		nm.Message.CreatedAt = baseTime.Add(time.Duration(min(i, 5)) * time.Minute)
		if i == 2 {
			nm.Message.Status = ports.StatusScheduled
			at := baseTime.Add(time.Hour)
			nm.Message.ScheduledAt = &at
			nm.Outbox = nil
		}
		f.mustInsert(t, nm)
		want = append([]string{nm.Message.ID}, want...)
	}
	// Ids are UUIDv7, so the later of the two equal-time messages has the larger id and comes first.

	var got []string
	cursor := ""
	for page := 0; ; page++ {
		p, err := f.s.ListMessages(ctx, f.org.ID, ports.ListEmailsQuery{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		for _, m := range p.Data {
			got = append(got, m.ID)
			if len(m.Recipients) != 1 || m.Recipients[0].Status == "" || m.HTML != "" {
				t.Fatalf("list item = %+v: want recipients with states and no body", m)
			}
		}
		if p.NextCursor == "" {
			if len(p.Data) != 1 {
				t.Fatalf("last page has %d items, want 1", len(p.Data))
			}
			break
		}
		if len(p.Data) != 3 {
			t.Fatalf("page %d has %d items", page, len(p.Data))
		}
		cursor = p.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged order\n got %v\nwant %v", got, want)
	}

	// A page exactly filled by the remaining rows has no next cursor.
	p, err := f.s.ListMessages(ctx, f.org.ID, ports.ListEmailsQuery{Limit: 7})
	if err != nil || len(p.Data) != 7 || p.NextCursor != "" {
		t.Fatalf("limit 7: %d items, cursor %q, %v", len(p.Data), p.NextCursor, err)
	}
	p, err = f.s.ListMessages(ctx, f.org.ID, ports.ListEmailsQuery{})
	if err != nil || len(p.Data) != 7 {
		t.Fatalf("default limit: %d items, %v", len(p.Data), err)
	}

	scheduled, err := f.s.ListMessages(ctx, f.org.ID, ports.ListEmailsQuery{Status: ports.StatusScheduled})
	if err != nil || len(scheduled.Data) != 1 || scheduled.Data[0].ID != want[4] || scheduled.Data[0].ScheduledAt == nil {
		t.Fatalf("status filter = %+v (%v)", scheduled.Data, err)
	}

	for _, bad := range []ports.ListEmailsQuery{{Limit: 101}, {Limit: -1}, {Cursor: "%%%"}, {Cursor: "bm90LWEtY3Vyc29y"}} {
		_, err := f.s.ListMessages(ctx, f.org.ID, bad)
		if e := requireCode(t, err, ports.CodeInvalidArgument); len(e.Details) != 1 {
			t.Fatalf("%+v: details = %+v", bad, e.Details)
		}
	}
}

func TestCancelScheduled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSendFixture(t, pgtest.Store(t))

	nm := f.newSend(t, "a@example.org", "b@example.org")
	at := baseTime.Add(time.Hour)
	nm.Message.Status = ports.StatusScheduled
	nm.Message.ScheduledAt = &at
	nm.Message.Recipients[0].Status = ports.StatusScheduled
	nm.Message.Recipients[1].Status = ""
	nm.Events[0].Type = ports.EventEmailScheduled
	nm.Outbox = nil
	id := f.mustInsert(t, nm)

	cancel := func() ports.Event {
		return ports.Event{ID: newV7(), OrganizationID: f.org.ID, Type: ports.EventEmailCancelled, MessageID: id, OccurredAt: baseTime.Add(time.Minute)}
	}
	got, err := f.s.CancelScheduled(ctx, f.org.ID, id, cancel())
	if err != nil {
		t.Fatalf("CancelScheduled: %v", err)
	}
	if got.Status != ports.StatusCancelled || len(got.Recipients) != 2 || got.Recipients[0].Status != ports.StatusCancelled ||
		got.Recipients[1].Status != ports.StatusCancelled {
		t.Fatalf("cancelled message = %+v", got)
	}
	if len(got.Events) != 2 || got.Events[0].Type != ports.EventEmailScheduled || got.Events[1].Type != ports.EventEmailCancelled {
		t.Fatalf("timeline = %+v", got.Events)
	}

	_, err = f.s.CancelScheduled(ctx, f.org.ID, id, cancel())
	requireCode(t, err, ports.CodeFailedPrecondition)
	queued := f.mustInsert(t, f.newSend(t, "c@example.org"))
	_, err = f.s.CancelScheduled(ctx, f.org.ID, queued, cancel())
	requireCode(t, err, ports.CodeFailedPrecondition)
	for _, bad := range []string{newV7(), "not-a-uuid"} {
		_, err = f.s.CancelScheduled(ctx, f.org.ID, bad, cancel())
		requireCode(t, err, ports.CodeNotFound)
	}
	if n := countRows(t, f.s, `SELECT count(*) FROM events WHERE type = 'email.cancelled'`); n != 1 {
		t.Fatalf("cancelled events = %d, want 1 (refused cancels write nothing)", n)
	}
}

// TestPromoteDue_Concurrent: four schedulers promoting at once decide and promote each due message once.
func TestPromoteDue_Concurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	paused := newSendFixture(t, s)
	if _, err := s.SetOrganizationPaused(ctx, paused.org.ID, true); err != nil {
		t.Fatal(err)
	}

	scheduled := func(f sendFixture, at time.Time) string {
		nm := f.newSend(t, "a@one.example", "b@two.example")
		nm.Message.Status = ports.StatusScheduled
		nm.Message.ScheduledAt = &at
		nm.Events[0].Type = ports.EventEmailScheduled
		nm.Outbox = nil
		return f.mustInsert(t, nm)
	}
	now := baseTime.Add(time.Hour)
	due := map[string]bool{}
	for i := range 40 {
		due[scheduled(f, now.Add(-time.Duration(i)*time.Second))] = true
	}
	pausedID := scheduled(paused, now.Add(-time.Minute))
	due[pausedID] = true
	notYet := scheduled(f, now.Add(time.Second))

	var mu sync.Mutex
	decided := map[string]int{}
	decide := func(m ports.Message, org ports.Organization, _ ports.Domain) (ports.MessageStatus, []ports.Event, []ports.DeliveryJob) {
		mu.Lock()
		decided[m.ID]++
		mu.Unlock()
		if org.Paused {
			resp := "organization sending is paused"
			return ports.StatusFailed, []ports.Event{{ID: newV7(), OrganizationID: m.OrganizationID, Type: ports.EventEmailFailed,
				MessageID: m.ID, ProviderResponse: &resp, OccurredAt: now}}, nil
		}
		if len(m.Recipients) != 2 || m.OrganizationID != org.ID {
			t.Errorf("decide got %d recipients, org %s for message of %s", len(m.Recipients), org.ID, m.OrganizationID)
		}
		job := ports.DeliveryJob{ID: newV7(), OrganizationID: m.OrganizationID, MessageID: m.ID, Domain: "one.example",
			RecipientIDs: []string{m.Recipients[0].ID}, Attempt: 1, FirstQueuedAt: now, NotBefore: now}
		return ports.StatusQueued, []ports.Event{{ID: newV7(), OrganizationID: m.OrganizationID, Type: ports.EventEmailQueued,
			MessageID: m.ID, OccurredAt: now}}, []ports.DeliveryJob{job}
	}

	var total atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				n, err := s.PromoteDue(ctx, now, 3, decide)
				if err != nil {
					t.Errorf("PromoteDue: %v", err)
					return
				}
				if n == 0 {
					return
				}
				total.Add(int32(n))
			}
		})
	}
	wg.Wait()
	if int(total.Load()) != len(due) {
		t.Fatalf("promoted %d, want %d", total.Load(), len(due))
	}
	for id, n := range decided {
		if n != 1 || !due[id] {
			t.Fatalf("message %s decided %d times (due: %v)", id, n, due[id])
		}
	}
	if len(decided) != len(due) {
		t.Fatalf("decided %d messages, want %d", len(decided), len(due))
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE organization_id = $1 AND type = 'email.queued'`, f.org.ID); n != 40 {
		t.Fatalf("queued events = %d, want 40", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM delivery_outbox WHERE organization_id = $1`, f.org.ID); n != 40 {
		t.Fatalf("outbox jobs = %d, want 40", n)
	}
	got, err := s.GetMessage(ctx, paused.org.ID, pausedID)
	if err != nil || got.Status != ports.StatusFailed || got.Recipients[0].Status != ports.StatusFailed ||
		got.Events[len(got.Events)-1].Type != ports.EventEmailFailed {
		t.Fatalf("paused organization's message = %+v (%v)", got, err)
	}
	for id := range due {
		if id == pausedID {
			continue
		}
		m, _ := s.GetMessage(ctx, f.org.ID, id)
		if m.Status != ports.StatusQueued || m.Recipients[1].Status != ports.StatusQueued {
			t.Fatalf("promoted message %s = %s / %+v", id, m.Status, m.Recipients)
		}
		break
	}
	if m, _ := s.GetMessage(ctx, f.org.ID, notYet); m.Status != ports.StatusScheduled {
		t.Fatalf("not-yet-due message = %s", m.Status)
	}
	if n, err := s.PromoteDue(ctx, now, 10, decide); n != 0 || err != nil {
		t.Fatalf("PromoteDue after all promoted = %d, %v", n, err)
	}
}

// TestCrossOrganization_Messages: organization B cannot read, list, cancel or look up A's messages, and
// an idempotency key is A's alone.
func TestCrossOrganization_Messages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := newSendFixture(t, s)
	b := newSendFixture(t, s)

	nm := a.newSend(t, "x@example.org")
	at := baseTime.Add(time.Hour)
	nm.Message.Status = ports.StatusScheduled
	nm.Message.ScheduledAt = &at
	nm.Message.IdempotencyKey = "shared-key"
	nm.Outbox = nil
	id := a.mustInsert(t, nm)

	_, err := s.GetMessage(ctx, b.org.ID, id)
	requireCode(t, err, ports.CodeNotFound)
	if page, err := s.ListMessages(ctx, b.org.ID, ports.ListEmailsQuery{}); err != nil || len(page.Data) != 0 {
		t.Fatalf("B lists %d messages (%v)", len(page.Data), err)
	}
	_, err = s.CancelScheduled(ctx, b.org.ID, id, ports.Event{ID: newV7(), OrganizationID: b.org.ID, Type: ports.EventEmailCancelled, MessageID: id, OccurredAt: at})
	requireCode(t, err, ports.CodeNotFound)
	_, _, err = s.MessageByIdempotencyKey(ctx, b.org.ID, "shared-key")
	requireCode(t, err, ports.CodeNotFound)
	_, _, err = s.OutboundData(ctx, b.org.ID, id)
	requireCode(t, err, ports.CodeNotFound)

	// B's own message with the same key is a new message, not A's.
	bm := b.newSend(t, "y@example.org")
	bm.Message.IdempotencyKey = "shared-key"
	gotID, _, existing, err := s.InsertMessage(ctx, bm)
	if err != nil || existing || gotID != bm.Message.ID {
		t.Fatalf("B's send with A's key = %q existing=%v %v", gotID, existing, err)
	}

	// A's message is untouched, and A's list does not show B's message.
	got, err := s.GetMessage(ctx, a.org.ID, id)
	if err != nil || got.Status != ports.StatusScheduled {
		t.Fatalf("A's message = %+v (%v)", got, err)
	}
	page, err := s.ListMessages(ctx, a.org.ID, ports.ListEmailsQuery{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != id {
		t.Fatalf("A's list = %+v (%v)", page.Data, err)
	}
	// A cursor taken from A's list does not reveal A's rows to B.
	older := a.newSend(t, "z@example.org")
	older.Message.CreatedAt = baseTime.Add(-time.Hour)
	a.mustInsert(t, older)
	page, err = s.ListMessages(ctx, a.org.ID, ports.ListEmailsQuery{Limit: 1})
	if err != nil || page.NextCursor == "" {
		t.Fatalf("A's first page: cursor %q, %v", page.NextCursor, err)
	}
	bPage, err := s.ListMessages(ctx, b.org.ID, ports.ListEmailsQuery{Cursor: page.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range bPage.Data {
		if m.OrganizationID != b.org.ID {
			t.Fatalf("B's list with A's cursor shows %+v", m)
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
		nm := f.newSend(b, "rcpt@example.org")
		nm.Plan = ports.Plan{MonthlyLimit: 1 << 40, WarmupCap: 1 << 40}
		if _, _, _, err := s.InsertMessage(ctx, nm); err != nil {
			b.Error(err)
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

// TestPromoteDue_DomainTracking: the scheduler's decide sees the From domain's tracking settings as they are
// at promotion, not at acceptance.
func TestPromoteDue_DomainTracking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	at := baseTime.Add(time.Minute)
	nm := f.newSend(t, "a@one.example")
	nm.Message.Status, nm.Message.ScheduledAt, nm.Events[0].Type, nm.Outbox = ports.StatusScheduled, &at, ports.EventEmailScheduled, nil
	id := f.mustInsert(t, nm)
	on := true
	if _, err := s.SetDomainTracking(ctx, f.org.ID, f.dom.ID, ports.TrackingSettings{ClickTracking: &on}); err != nil {
		t.Fatal(err)
	}
	var seen ports.Domain
	n, err := s.PromoteDue(ctx, at.Add(time.Second), 10, func(m ports.Message, _ ports.Organization, d ports.Domain) (ports.MessageStatus, []ports.Event, []ports.DeliveryJob) {
		if m.ID == id {
			seen = d
		}
		return ports.StatusQueued, nil, nil
	})
	if err != nil || n < 1 {
		t.Fatalf("PromoteDue = %d, %v", n, err)
	}
	if seen.ID != f.dom.ID || !seen.ClickTracking || seen.OpenTracking || seen.DKIMPrivateKey != nil {
		t.Fatalf("decide saw domain %+v", seen)
	}
}
