package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestBillingApplyPayment: a checkout is found only for the organization that started it; an event applies
// once, even when delivered several times at once; ending a subscription applies only while the
// organization is on it; the other organization is never touched.
func TestBillingApplyPayment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	pro := ports.Plan{MonthlyLimit: 100000, WarmupCap: 500}

	if err := s.StartCheckout(ctx, a.org.ID, "cs_1", "pro", baseTime); err != nil {
		t.Fatal(err)
	}
	if plan, err := s.CheckoutPlan(ctx, a.org.ID, "cs_1"); err != nil || plan != "pro" {
		t.Fatalf("CheckoutPlan = %q, %v", plan, err)
	}
	// Tenancy: the same checkout id is unknown to the other organization.
	if _, err := s.CheckoutPlan(ctx, b.org.ID, "cs_1"); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("other organization's CheckoutPlan: %v, want not_found", err)
	}
	if err := s.StartCheckout(ctx, newID(), "cs_x", "pro", baseTime); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("StartCheckout for an unknown organization: %v, want not_found", err)
	}

	// Applying cs_1 for b (a checkout b never started) changes nothing.
	_, outcome, err := s.ApplyPayment(ctx, ports.PaymentApplication{
		OrganizationID: b.org.ID, EventID: "evt_cross", CheckoutID: "cs_1", SubscriptionID: "sub_1", PlanID: "pro", Plan: pro, Now: baseTime,
	})
	if err != nil || outcome != ports.PaymentIgnored {
		t.Fatalf("cross-organization apply: %s, %v", outcome, err)
	}
	if other, _ := s.Organization(ctx, b.org.ID); other.Plan != b.org.Plan {
		t.Fatalf("other organization's limits changed: %+v", other.Plan)
	}

	// The same event delivered eight times at once applies exactly once.
	app := ports.PaymentApplication{
		OrganizationID: a.org.ID, EventID: "evt_paid", CheckoutID: "cs_1", SubscriptionID: "sub_1", PlanID: "pro", Plan: pro, Now: baseTime,
	}
	var wg sync.WaitGroup
	outcomes := make([]ports.PaymentOutcome, 8)
	errs := make([]error, 8)
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, outcomes[i], errs[i] = s.ApplyPayment(ctx, app)
		}()
	}
	wg.Wait()
	applied := 0
	for i, o := range outcomes {
		if errs[i] != nil {
			t.Fatalf("concurrent apply: %v", errs[i])
		}
		switch o {
		case ports.PaymentApplied:
			applied++
		case ports.PaymentDuplicate:
		default:
			t.Fatalf("concurrent apply outcome %q", o)
		}
	}
	if applied != 1 {
		t.Fatalf("%d of 8 concurrent deliveries applied, want 1", applied)
	}
	if org, _ := s.Organization(ctx, a.org.ID); org.Plan != pro {
		t.Fatalf("limits after payment: %+v", org.Plan)
	}
	if id, _ := s.SubscribedPlan(ctx, a.org.ID); id != "pro" {
		t.Fatalf("plan after payment: %q", id)
	}

	// Another event completing the same checkout is ignored: a checkout completes once.
	if _, o, err := s.ApplyPayment(ctx, ports.PaymentApplication{
		OrganizationID: a.org.ID, EventID: "evt_async", CheckoutID: "cs_1", SubscriptionID: "sub_1", PlanID: "pro", Plan: ports.Plan{MonthlyLimit: 7}, Now: baseTime,
	}); err != nil || o != ports.PaymentIgnored {
		t.Fatalf("second completion of one checkout: %s, %v", o, err)
	}
	if org, _ := s.Organization(ctx, a.org.ID); org.Plan != pro {
		t.Fatalf("a second completion changed the limits: %+v", org.Plan)
	}

	free := ports.Plan{MonthlyLimit: 3000}
	end := func(event, org, sub string) ports.PaymentOutcome {
		t.Helper()
		_, o, err := s.ApplyPayment(ctx, ports.PaymentApplication{
			OrganizationID: org, EventID: event, SubscriptionID: sub, Ended: true, PlanID: "free", Plan: free, Now: baseTime,
		})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	// Ending a subscription a is not on, or a's subscription named for b, changes nothing.
	if o := end("evt_end_other", a.org.ID, "sub_other"); o != ports.PaymentIgnored {
		t.Fatalf("ending another subscription: %s", o)
	}
	if o := end("evt_end_b", b.org.ID, "sub_1"); o != ports.PaymentIgnored {
		t.Fatalf("ending a's subscription for b: %s", o)
	}
	if id, _ := s.SubscribedPlan(ctx, a.org.ID); id != "pro" {
		t.Fatalf("plan after unrelated ends: %q", id)
	}
	if o := end("evt_end", a.org.ID, "sub_1"); o != ports.PaymentApplied {
		t.Fatalf("ending a's subscription: %s", o)
	}
	if org, _ := s.Organization(ctx, a.org.ID); org.Plan != free {
		t.Fatalf("limits after the end: %+v", org.Plan)
	}
	if o := end("evt_end", a.org.ID, "sub_1"); o != ports.PaymentDuplicate {
		t.Fatalf("replayed end: %s", o)
	}

	// Subscribing without payment clears the link: a late end of sub_1 no longer applies.
	if err := s.StartCheckout(ctx, a.org.ID, "cs_2", "pro", baseTime); err != nil {
		t.Fatal(err)
	}
	if _, o, err := s.ApplyPayment(ctx, ports.PaymentApplication{
		OrganizationID: a.org.ID, EventID: "evt_paid_2", CheckoutID: "cs_2", SubscriptionID: "sub_2", PlanID: "pro", Plan: pro, Now: baseTime,
	}); err != nil || o != ports.PaymentApplied {
		t.Fatalf("second payment: %s, %v", o, err)
	}
	if _, err := s.SubscribePlan(ctx, a.org.ID, "growth", ports.Plan{MonthlyLimit: 9}, baseTime); err != nil {
		t.Fatal(err)
	}
	if o := end("evt_end_2", a.org.ID, "sub_2"); o != ports.PaymentIgnored {
		t.Fatalf("end after moving to an unpaid plan: %s", o)
	}
	if id, _ := s.SubscribedPlan(ctx, a.org.ID); id != "growth" {
		t.Fatalf("plan: %q, want growth", id)
	}

	// An unknown organization is not_found.
	if _, _, err := s.ApplyPayment(ctx, ports.PaymentApplication{OrganizationID: newID(), EventID: "evt_nobody", CheckoutID: "cs_1", Now: baseTime}); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("unknown organization: %v, want not_found", err)
	}
}
