package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestSuppressions_CreateListDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)

	first, err := s.InsertSuppression(ctx, ports.Suppression{ID: newV7(), OrganizationID: a.org.ID, Address: "Bob@Example.com", Scope: ports.SuppressionScopeTenant, Reason: ports.SuppressionManual, CreatedAt: baseTime})
	if err != nil || first.Address != "bob@example.com" || first.OrganizationID != a.org.ID {
		t.Fatalf("InsertSuppression = %+v (%v)", first, err)
	}
	again, err := s.InsertSuppression(ctx, ports.Suppression{ID: newV7(), OrganizationID: a.org.ID, Address: "bob@example.com", Scope: ports.SuppressionScopeTenant, Reason: ports.SuppressionBounce})
	if err != nil || again.ID != first.ID || again.Reason != ports.SuppressionManual {
		t.Fatalf("duplicate insert = %+v (%v), want the first row unchanged", again, err)
	}
	if _, err := s.InsertSuppression(ctx, ports.Suppression{OrganizationID: a.org.ID, Address: "example.org", Scope: ports.SuppressionScopeDomain, Reason: ports.SuppressionManual, CreatedAt: baseTime.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	global, err := s.InsertSuppression(ctx, ports.Suppression{Address: "spamtrap-" + randomHex(t, 4) + "@example.net", Scope: ports.SuppressionScopeGlobal, Reason: ports.SuppressionInvalid})
	if err != nil || global.OrganizationID != "" {
		t.Fatalf("global insert = %+v (%v)", global, err)
	}

	list, err := dataOf(s.ListSuppressions(ctx, a.org.ID, ports.Unpaged()))
	if err != nil || len(list) != 2 || list[0].Address != "example.org" || list[1].ID != first.ID {
		t.Fatalf("A's list = %+v (%v), want its two rows newest first", list, err)
	}
	if list, _ := dataOf(s.ListSuppressions(ctx, b.org.ID, ports.Unpaged())); len(list) != 0 {
		t.Fatalf("B lists %+v", list)
	}
	globals, err := dataOf(s.ListSuppressions(ctx, "", ports.Unpaged()))
	if err != nil || !containsSuppression(globals, global.ID) || containsSuppression(globals, first.ID) {
		t.Fatalf("global list = %+v (%v)", globals, err)
	}

	// The send path's check sees all three kinds for A, only the global one for B.
	got, err := s.SuppressedAmong(ctx, a.org.ID, []string{"bob@example.com", "x@example.org", global.Address, "ok@example.com"})
	if err != nil || !got["bob@example.com"] || !got["x@example.org"] || !got[global.Address] || got["ok@example.com"] {
		t.Fatalf("SuppressedAmong(A) = %v (%v)", got, err)
	}
	got, _ = s.SuppressedAmong(ctx, b.org.ID, []string{"bob@example.com", global.Address})
	if got["bob@example.com"] || !got[global.Address] {
		t.Fatalf("SuppressedAmong(B) = %v", got)
	}

	// Deleting across tenants, or a global row through a tenant, removes nothing.
	for _, c := range []struct{ org, id string }{{b.org.ID, first.ID}, {a.org.ID, global.ID}, {"", first.ID}, {a.org.ID, "not-a-uuid"}} {
		if ok, err := s.DeleteSuppression(ctx, c.org, c.id); err != nil || ok {
			t.Fatalf("DeleteSuppression(%q, %q) = %v (%v), want false", c.org, c.id, ok, err)
		}
	}
	if ok, err := s.DeleteSuppression(ctx, a.org.ID, first.ID); err != nil || !ok {
		t.Fatalf("A deletes its row: %v (%v)", ok, err)
	}
	if ok, _ := s.DeleteSuppression(ctx, a.org.ID, first.ID); ok {
		t.Fatal("second delete reported true")
	}
	if ok, err := s.DeleteSuppression(ctx, "", global.ID); err != nil || !ok {
		t.Fatalf("delete global: %v (%v)", ok, err)
	}
}

func containsSuppression(list []ports.Suppression, id string) bool {
	for _, s := range list {
		if s.ID == id {
			return true
		}
	}
	return false
}

// TestApplyFeedback_Bounce applies an asynchronous hard bounce to a delivered recipient: status, derived
// message status, event, bounce record and suppression in one transaction, visible to the lookups the
// core uses.
func TestApplyFeedback_Bounce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	nm := f.newSend(t, "gone@example.com")
	id := f.mustInsert(t, nm)
	rcpt := nm.Message.Recipients[0]
	mustExec(t, s, `UPDATE recipients SET status = 'delivered' WHERE id = $1`, rcpt.ID)
	mustExec(t, s, `UPDATE messages SET status = 'delivered' WHERE id = $1`, id)

	ref, err := s.RecipientByID(ctx, rcpt.ID)
	if err != nil || ref.MessageID != id || ref.OrganizationID != f.org.ID || ref.Address != "gone@example.com" {
		t.Fatalf("RecipientByID = %+v (%v)", ref, err)
	}
	if org, err := s.MessageOrganization(ctx, id); err != nil || org != f.org.ID {
		t.Fatalf("MessageOrganization = %q (%v)", org, err)
	}
	requireCode(t, firstErr(s.RecipientByID(ctx, newV7())), ports.CodeNotFound)

	resp := "smtp; 550 5.1.1 user unknown"
	decide := func(current []ports.Recipient) ports.FeedbackApplication {
		if len(current) != 1 || current[0].Status == ports.StatusBounced {
			return ports.FeedbackApplication{}
		}
		return ports.FeedbackApplication{
			Recipients:   map[string]ports.MessageStatus{rcpt.ID: ports.StatusBounced},
			Events:       []ports.Event{{ID: newV7(), Type: ports.EventEmailBounced, RecipientID: rcpt.ID, ProviderResponse: &resp, OccurredAt: baseTime}},
			Bounces:      []ports.Bounce{{ID: newV7(), RecipientID: rcpt.ID, Address: rcpt.Address, Type: ports.BounceHard, Status: "5.1.1", Action: "failed", DiagnosticCode: resp, CreatedAt: baseTime}},
			Suppressions: []ports.Suppression{{OrganizationID: f.org.ID, Address: rcpt.Address, Scope: ports.SuppressionScopeTenant, Reason: ports.SuppressionBounce}},
		}
	}
	for range 2 { // the second application sees the recipient bounced and writes nothing
		if err := s.ApplyFeedback(ctx, f.org.ID, id, decide); err != nil {
			t.Fatalf("ApplyFeedback: %v", err)
		}
	}
	m, err := s.GetMessage(ctx, f.org.ID, id)
	if err != nil || m.Status != ports.StatusBounced || m.Recipients[0].Status != ports.StatusBounced {
		t.Fatalf("message after bounce: %+v (%v)", m, err)
	}
	bounced := 0
	for _, e := range m.Events {
		if e.Type == ports.EventEmailBounced {
			bounced++
		}
	}
	if bounced != 1 {
		t.Fatalf("%d bounced events, want 1", bounced)
	}
	page, err := s.ListBounces(ctx, f.org.ID, ports.PageQuery{})
	if err != nil || len(page.Data) != 1 || page.Data[0].Status != "5.1.1" || page.Data[0].MessageID != id || page.Data[0].OrganizationID != f.org.ID {
		t.Fatalf("ListBounces = %+v (%v)", page, err)
	}
	if sup, _ := s.SuppressedAmong(ctx, f.org.ID, []string{"gone@example.com"}); !sup["gone@example.com"] {
		t.Fatal("the bounced address is not suppressed")
	}

	// Another organization can neither apply feedback to the message nor see the bounce.
	b := mustSignup(t, s)
	requireCode(t, s.ApplyFeedback(ctx, b.org.ID, id, decide), ports.CodeNotFound)
	if page, _ := s.ListBounces(ctx, b.org.ID, ports.PageQuery{}); len(page.Data) != 0 {
		t.Fatalf("B sees bounces %+v", page.Data)
	}
}

func TestApplyFeedback_ComplaintAndPaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	const n = 5
	for i := range n {
		nm := f.newSend(t, "reader@example.com")
		id := f.mustInsert(t, nm)
		rcpt := nm.Message.Recipients[0]
		arrival := baseTime.Add(-time.Hour)
		err := s.ApplyFeedback(ctx, f.org.ID, id, func([]ports.Recipient) ports.FeedbackApplication {
			return ports.FeedbackApplication{
				Complaints: []ports.Complaint{{ID: newV7(), RecipientID: rcpt.ID, Address: rcpt.Address, FeedbackType: "abuse",
					UserAgent: "FBL/1.0", SourceIP: "192.0.2.1", ArrivalDate: &arrival, CreatedAt: baseTime.Add(time.Duration(i) * time.Second)}},
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var seen []ports.Complaint
	cursor := ""
	for {
		page, err := s.ListComplaints(ctx, f.org.ID, ports.PageQuery{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, page.Data...)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(seen) != n {
		t.Fatalf("paged %d complaints, want %d", len(seen), n)
	}
	for i := 1; i < n; i++ {
		if !seen[i].CreatedAt.Before(seen[i-1].CreatedAt) {
			t.Fatalf("complaints not newest first: %v then %v", seen[i-1].CreatedAt, seen[i].CreatedAt)
		}
	}
	if seen[0].ArrivalDate == nil || !seen[0].ArrivalDate.Equal(baseTime.Add(-time.Hour)) || seen[0].SourceIP != "192.0.2.1" {
		t.Fatalf("complaint fields = %+v", seen[0])
	}
	requireCode(t, firstErr(s.ListComplaints(ctx, f.org.ID, ports.PageQuery{Cursor: "garbage"})), ports.CodeInvalidArgument)
	requireCode(t, firstErr(s.ListBounces(ctx, f.org.ID, ports.PageQuery{Limit: 101})), ports.CodeInvalidArgument)
}

// TestApplyFeedback_ReportAppliedOnce: a soft bounce changes no status, so only its report id keeps the same
// DSN, delivered twice, from being recorded twice.
func TestApplyFeedback_ReportAppliedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	nm := f.newSend(t, "slow@example.com")
	id := f.mustInsert(t, nm)
	rcpt := nm.Message.Recipients[0]
	report := newV7()
	decide := func([]ports.Recipient) ports.FeedbackApplication {
		return ports.FeedbackApplication{
			ReportID: report,
			Bounces:  []ports.Bounce{{ID: newV7(), RecipientID: rcpt.ID, Address: rcpt.Address, Type: ports.BounceSoft, Status: "4.4.1", Action: "delayed", CreatedAt: baseTime}},
			Events:   []ports.Event{{ID: newV7(), Type: ports.EventEmailDeliveryDelayed, RecipientID: rcpt.ID, OccurredAt: baseTime}},
		}
	}
	for range 3 {
		if err := s.ApplyFeedback(ctx, f.org.ID, id, decide); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.ListBounces(ctx, f.org.ID, ports.PageQuery{})
	if err != nil || len(page.Data) != 1 {
		t.Fatalf("bounces after one report applied three times: %d (%v)", len(page.Data), err)
	}
	report = newV7() // another report about the same recipient is recorded
	if err := s.ApplyFeedback(ctx, f.org.ID, id, decide); err != nil {
		t.Fatal(err)
	}
	if page, _ = s.ListBounces(ctx, f.org.ID, ports.PageQuery{}); len(page.Data) != 2 {
		t.Fatalf("a second report was not recorded: %d bounces", len(page.Data))
	}
}
