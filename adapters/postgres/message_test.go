package postgres_test

import (
	"context"
	"fmt"
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
		Message: m,
		Events:  []ports.Event{{ID: newV7(), OrganizationID: f.org.ID, Type: ports.EventEmailQueued, MessageID: id, OccurredAt: baseTime}},
		Usage:   usageUnder(len(addrs), ports.Plan{}, baseTime),
	}
	for _, dom := range domains {
		nm.Outbox = append(nm.Outbox, ports.DeliveryJob{
			ID: newV7(), OrganizationID: f.org.ID, MessageID: id, Domain: dom, RecipientIDs: byDomain[dom],
			Attempt: 1, FirstQueuedAt: baseTime, NotBefore: baseTime,
		})
	}
	return nm
}

// usageUnder is the usage the core gives a send of units recipients under plan on day: the monthly
// allowance first and the daily warm-up cap second, a zero limit counting without limiting.
func usageUnder(units int, plan ports.Plan, day time.Time) ports.Usage {
	day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC)
	limit := func(n int64) int64 {
		if n == 0 {
			return ports.NoLimit
		}
		return n
	}
	return ports.Usage{Units: int64(units), Limits: []ports.UsageLimit{
		{Metric: ports.MetricEmailsSent, Period: time.Date(day.Year(), day.Month(), 1, 0, 0, 0, 0, time.UTC), Max: limit(plan.MonthlyLimit)},
		{Metric: ports.MetricEmailsSentDaily, Period: day, Max: limit(plan.WarmupCap)},
	}}
}

// underPlan is nm metered under plan on baseTime's day.
func underPlan(nm ports.NewMessage, plan ports.Plan) ports.NewMessage {
	nm.Usage = usageUnder(int(nm.Usage.Units), plan, baseTime)
	return nm
}

func (f sendFixture) mustInsert(tb testing.TB, nm ports.NewMessage) string {
	tb.Helper()
	ins, err := f.s.InsertMessage(context.Background(), nm)
	if err != nil || ins.Existing || ins.OverLimit != nil {
		tb.Fatalf("InsertMessage = %+v, %v", ins, err)
	}
	return ins.ID
}

// requireOverLimit fails unless ins is a refusal naming the limit of metric with maximum max.
func requireOverLimit(tb testing.TB, ins ports.Inserted, err error, metric string, max int64) {
	tb.Helper()
	if err != nil || ins.OverLimit == nil || ins.OverLimit.Metric != metric || ins.OverLimit.Max != max || ins.ID != "" || ins.Existing {
		tb.Fatalf("InsertMessage = %+v (limit %+v), %v; want refused over %s up to %d", ins, ins.OverLimit, err, metric, max)
	}
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
	day, err = f.s.Usage(ctx, f.org.ID, ports.MetricEmailsSentDaily, meterDay)
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
	if n := countRows(t, f.s, `SELECT count(*) FROM messages WHERE due_at IS NOT NULL`); n != 0 {
		t.Fatalf("messages still waiting for their time after the cancel: %d, want 0", n)
	}
}

// TestMessageStatusChangeIsHOT: a message's status is in none of the table's indexes (the scheduler's
// index names due_at, migration 00042), so changing it on a freshly written message is a HOT update, with
// no new index entries.
func TestMessageStatusChangeIsHOT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSendFixture(t, pgtest.Store(t))
	id := f.mustInsert(t, f.newSend(t, "a@example.org"))

	tx, err := f.s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, status := range []string{"sent", "delivered"} {
		if _, err := tx.Exec(ctx, `UPDATE messages SET status = $2 WHERE id = $1`, id, status); err != nil {
			t.Fatal(err)
		}
	}
	var updates, hot int
	if err := tx.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relid = 'messages'::regclass`).
		Scan(&updates, &hot); err != nil {
		t.Fatal(err)
	}
	if updates != 2 || hot != 2 {
		t.Fatalf("status changes: %d updates, %d of them HOT; want 2 and 2", updates, hot)
	}
}

// TestScheduledMessageOfAnEarlierVersion: a process of a version before due_at (still running beside the
// migrated database) writes a scheduled message without it and promotes or cancels with status alone. The
// guards of migration 00043 give the message its due time, so the scheduler finds it, and take the time
// away when the status moves on.
func TestScheduledMessageOfAnEarlierVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	now := baseTime.Add(time.Hour)
	due, cancelled := f.mustEarlierScheduled(t, now.Add(-time.Minute)), f.mustEarlierScheduled(t, now.Add(-time.Minute))
	if n := countRows(t, s, `SELECT count(*) FROM messages WHERE due_at = scheduled_at`); n != 2 {
		t.Fatalf("scheduled messages written without due_at that got it: %d, want 2", n)
	}
	mustExec(t, s, `UPDATE messages SET status = 'cancelled' WHERE id = $1`, cancelled)
	var promoted []string
	n, err := s.PromoteDue(ctx, now, 10, func(m ports.Message, _ ports.Organization, _ ports.Domain) (ports.MessageStatus, []ports.Event, []ports.DeliveryJob) {
		promoted = append(promoted, m.ID)
		return ports.StatusQueued, nil, nil
	})
	if err != nil || n != 1 || len(promoted) != 1 || promoted[0] != due {
		t.Fatalf("PromoteDue = %d, %v, promoted %v; want only %s", n, err, promoted, due)
	}
	if n := countRows(t, s, `SELECT count(*) FROM messages WHERE due_at IS NOT NULL`); n != 0 {
		t.Fatalf("messages keeping a due time after promotion and cancel: %d, want 0", n)
	}
}

// mustEarlierScheduled writes a message scheduled for at as a version before due_at (migration 00042) did:
// with the columns it knew of and no due time, and returns its id.
func (f sendFixture) mustEarlierScheduled(tb testing.TB, at time.Time) string {
	tb.Helper()
	var id string
	if err := f.s.Pool().QueryRow(context.Background(), `INSERT INTO messages (id, organization_id, domain_id, status,
		from_address, scheduled_at, created_at) VALUES (gen_random_uuid(), $1, $2, 'scheduled', 'a@b.example', $3, $3)
		RETURNING id::text`, f.org.ID, f.dom.ID, at).Scan(&id); err != nil {
		tb.Fatal(err)
	}
	return id
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
	// Only the message still waiting keeps its due time: the scheduler's index holds nothing else.
	if n := countRows(t, s, `SELECT count(*) FROM messages WHERE due_at IS NOT NULL`); n != 1 {
		t.Fatalf("messages with a due time = %d, want 1", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM messages WHERE id = $1 AND due_at = scheduled_at`, notYet); n != 1 {
		t.Fatalf("the not-yet-due message lost its due time")
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
	ins, err := s.InsertMessage(ctx, bm)
	gotID, existing := ins.ID, ins.Existing
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
