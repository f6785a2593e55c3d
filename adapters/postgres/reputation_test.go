package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// seedTraffic writes a domain and one message of the organization with n email.sent and email.delivered
// events, hard bounces and complaints on it, all at `at`.
func seedTraffic(t *testing.T, s *postgres.Store, orgID, domain string, at time.Time, sent, hard, soft, complained int) {
	t.Helper()
	domainID, msgID := newID(), newID()
	mustExec(t, s, `INSERT INTO domains (id, organization_id, name, status, dkim_selector, dkim_private_key, dkim_public_key, created_at)
		VALUES ($1, $2, $3, 'verified', 's', '\x00', 'p', $4) ON CONFLICT (organization_id, name) DO NOTHING`, domainID, orgID, domain, at)
	mustExec(t, s, `INSERT INTO messages (id, organization_id, domain_id, status, from_address, created_at)
		SELECT $1, $2, id, 'sent', 'a@'||$3, $4 FROM domains WHERE organization_id = $2 AND name = $3`, msgID, orgID, domain, at)
	for i := 0; i < sent; i++ {
		mustExec(t, s, `INSERT INTO events (id, organization_id, type, message_id, occurred_at) VALUES
			($1, $3, 'email.sent', $4, $5), ($2, $3, 'email.delivered', $4, $5)`, newID(), newID(), orgID, msgID, at)
	}
	for i := 0; i < hard+soft; i++ {
		typ, class := "hard", "bad_mailbox"
		if i >= hard {
			typ, class = "soft", "mailbox_full"
		}
		mustExec(t, s, `INSERT INTO bounces (id, organization_id, message_id, recipient_id, address, type, class, created_at)
			VALUES ($1, $2, $3, $4, 'x@rcpt.example', $5, $6, $7)`, newID(), orgID, msgID, newID(), typ, class, at)
	}
	for i := 0; i < complained; i++ {
		mustExec(t, s, `INSERT INTO complaints (id, organization_id, message_id, recipient_id, address, feedback_type, created_at)
			VALUES ($1, $2, $3, $4, 'x@rcpt.example', 'abuse', $5)`, newID(), orgID, msgID, newID(), at)
	}
}

func TestReputationCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	day1 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)
	seedTraffic(t, s, a.org.ID, "mail.a.example", day1, 10, 2, 1, 1)
	seedTraffic(t, s, a.org.ID, "mail.a.example", day2, 5, 0, 0, 0)
	seedTraffic(t, s, a.org.ID, "old.a.example", day1.AddDate(0, 0, -30), 7, 7, 0, 7) // before the window
	seedTraffic(t, s, b.org.ID, "mail.b.example", day1, 50, 50, 0, 50)

	days, err := s.ReputationDays(ctx, a.org.ID, day1.Truncate(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []ports.DomainDay{
		{Domain: "mail.a.example", ReputationDay: ports.ReputationDay{Date: day1.Truncate(24 * time.Hour), Sent: 10, Delivered: 10, HardBounced: 2, SoftBounced: 1, Complained: 1}},
		{Domain: "mail.a.example", ReputationDay: ports.ReputationDay{Date: day2.Truncate(24 * time.Hour), Sent: 5, Delivered: 5}},
	}
	if len(days) != len(want) || days[0] != want[0] || days[1] != want[1] {
		t.Fatalf("ReputationDays = %+v\nwant %+v", days, want)
	}
	classes, err := s.BounceClassCounts(ctx, a.org.ID, day1.Truncate(24*time.Hour))
	if err != nil || len(classes) != 2 || classes[0] != (ports.BounceClassCount{Domain: "mail.a.example", Class: "bad_mailbox", Count: 2}) {
		t.Fatalf("BounceClassCounts = %+v, %v", classes, err)
	}

	// Every organization with traffic appears once, with its own counts.
	health, err := s.OrganizationsHealth(ctx, day1.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ports.OrganizationHealth{}
	for _, h := range health {
		got[h.OrganizationID] = h
	}
	if h := got[a.org.ID]; h.Sent != 15 || h.Delivered != 15 || h.HardBounced != 2 || h.Complained != 1 {
		t.Errorf("health of a = %+v", h)
	}
	if h := got[b.org.ID]; h.Sent != 50 || h.Complained != 50 {
		t.Errorf("health of b = %+v", h)
	}
}

func TestReputationProtectionAndWarmup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)

	if p, err := s.Protection(ctx, a.org.ID); err != nil || p.BroadcastsPaused {
		t.Fatalf("Protection before any = %+v, %v", p, err)
	}
	p, err := s.SetBroadcastsPaused(ctx, a.org.ID, true, "complaints", baseTime)
	if err != nil || !p.BroadcastsPaused || p.Reason != "complaints" || p.PausedAt == nil || !p.PausedAt.Equal(baseTime) {
		t.Fatalf("SetBroadcastsPaused = %+v, %v", p, err)
	}
	if p, _ := s.Protection(ctx, b.org.ID); p.BroadcastsPaused {
		t.Fatal("another organization's broadcasts were paused")
	}
	if p, _ := s.SetBroadcastsPaused(ctx, a.org.ID, false, "", baseTime); p.BroadcastsPaused || p.PausedAt != nil {
		t.Fatalf("resume = %+v", p)
	}
	var pe *ports.Error
	if _, err := s.SetBroadcastsPaused(ctx, newID(), true, "x", baseTime); !errors.As(err, &pe) || pe.Code != ports.CodeNotFound {
		t.Fatalf("unknown organization: %v", err)
	}

	// A warm-up step happens once a day.
	day := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	if ok, err := s.StepWarmup(ctx, a.org.ID, 150, day, baseTime); err != nil || !ok {
		t.Fatalf("first step: %v, %v", ok, err)
	}
	if ok, _ := s.StepWarmup(ctx, a.org.ID, 225, day, baseTime); ok {
		t.Fatal("a second step on the same day happened")
	}
	if org, _ := s.Organization(ctx, a.org.ID); org.Plan.WarmupCap != 150 {
		t.Fatalf("cap = %d, want 150", org.Plan.WarmupCap)
	}
	if ok, _ := s.StepWarmup(ctx, a.org.ID, 225, day.AddDate(0, 0, 1), baseTime); !ok {
		t.Fatal("next day's step did not happen")
	}
	if org, _ := s.Organization(ctx, b.org.ID); org.Plan.WarmupCap != b.org.Plan.WarmupCap {
		t.Fatal("another organization's cap changed")
	}
}

func TestReputationQueueDepths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	for i, domain := range []string{"gmail.com", "gmail.com", "yahoo.com"} {
		mustExec(t, s, `INSERT INTO delivery_queue (id, organization_id, message_id, domain, recipient_ids, attempt, first_queued_at, not_before, lease_until)
			VALUES ($1, $2, $3, $4, '{}', 1, $5, $5, $6)`, newID(), a.org.ID, newID(), domain, baseTime.Add(time.Duration(i)*time.Minute),
			map[bool]any{true: time.Now().Add(time.Hour), false: nil}[i == 0])
	}
	mustExec(t, s, `INSERT INTO delivery_outbox (id, organization_id, message_id, domain, recipient_ids, attempt, first_queued_at, not_before)
		VALUES ($1, $2, $3, 'yahoo.com', '{}', 2, $4, $4)`, newID(), a.org.ID, newID(), baseTime)
	got, err := s.QueueDepths(ctx, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("QueueDepths = %+v, %v", got, err)
	}
	if g := got[0]; g.Domain != "gmail.com" || g.Queued != 2 || g.Leased != 1 || g.Outbox != 0 || !g.OldestQueuedAt.Equal(baseTime) {
		t.Errorf("gmail.com = %+v", g)
	}
	if y := got[1]; y.Domain != "yahoo.com" || y.Queued != 1 || y.Outbox != 1 {
		t.Errorf("yahoo.com = %+v", y)
	}
	if one, _ := s.QueueDepths(ctx, 1); len(one) != 1 {
		t.Errorf("limit 1 gave %d rows", len(one))
	}
}
