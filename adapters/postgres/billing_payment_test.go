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
	if id, _, _ := s.SubscribedPlan(ctx, a.org.ID); id != "pro" {
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
	if id, _, _ := s.SubscribedPlan(ctx, a.org.ID); id != "pro" {
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
	if id, _, _ := s.SubscribedPlan(ctx, a.org.ID); id != "growth" {
		t.Fatalf("plan: %q, want growth", id)
	}

	// An unknown organization is not_found.
	if _, _, err := s.ApplyPayment(ctx, ports.PaymentApplication{OrganizationID: newID(), EventID: "evt_nobody", CheckoutID: "cs_1", Now: baseTime}); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("unknown organization: %v, want not_found", err)
	}
}

// TestBillingPlanChange: a change inside a paid subscription is recorded only on the organization's row
// paid by that subscription, is found only for it, applies once (by a notification, delivered several
// times at once, or by the provider's answer with no event), never for another organization, and is
// forgotten when the plan is recorded otherwise (subscribing, which also ends the link to the subscription).
func TestBillingPlanChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	pro, max := ports.Plan{MonthlyLimit: 100000, WarmupCap: 500}, ports.Plan{MonthlyLimit: 1000000}

	if paid, err := s.PaidSubscription(ctx, a.org.ID); err != nil || paid != "" {
		t.Fatalf("PaidSubscription before any = %q, %v", paid, err)
	}
	if err := s.StartCheckout(ctx, a.org.ID, "cs_1", "pro", baseTime); err != nil {
		t.Fatal(err)
	}
	if _, o, err := s.ApplyPayment(ctx, ports.PaymentApplication{
		OrganizationID: a.org.ID, EventID: "evt_paid", CheckoutID: "cs_1", SubscriptionID: "sub_1", PlanID: "pro", Plan: pro, Now: baseTime,
	}); err != nil || o != ports.PaymentApplied {
		t.Fatalf("checkout: %s, %v", o, err)
	}
	if paid, err := s.PaidSubscription(ctx, a.org.ID); err != nil || paid != "sub_1" {
		t.Fatalf("PaidSubscription = %q, %v; want sub_1", paid, err)
	}
	if paid, err := s.PaidSubscription(ctx, b.org.ID); err != nil || paid != "" {
		t.Fatalf("other organization's PaidSubscription = %q, %v", paid, err)
	}

	// Only the subscription the organization pays by, and only for that organization.
	for _, c := range []struct{ org, sub string }{{a.org.ID, "sub_other"}, {b.org.ID, "sub_1"}, {newID(), "sub_1"}} {
		if err := s.StartPlanChange(ctx, c.org, c.sub, "max", "price_max"); ports.ErrorCode(err) != ports.CodeNotFound {
			t.Fatalf("StartPlanChange(%s): %v, want not_found", c.sub, err)
		}
	}
	if _, _, err := s.PendingPlanChange(ctx, a.org.ID, "sub_1"); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("PendingPlanChange before any: %v, want not_found", err)
	}
	if err := s.StartPlanChange(ctx, a.org.ID, "sub_1", "max", "price_max"); err != nil {
		t.Fatal(err)
	}
	if plan, price, err := s.PendingPlanChange(ctx, a.org.ID, "sub_1"); err != nil || plan != "max" || price != "price_max" {
		t.Fatalf("PendingPlanChange = %q %q, %v", plan, price, err)
	}
	if _, _, err := s.PendingPlanChange(ctx, b.org.ID, "sub_1"); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("other organization's PendingPlanChange: %v, want not_found", err)
	}

	change := func(org, event, sub, plan, price string, limits ports.Plan) ports.PaymentOutcome {
		t.Helper()
		_, o, err := s.ApplyPayment(ctx, ports.PaymentApplication{
			OrganizationID: org, EventID: event, SubscriptionID: sub, PriceID: price, PlanID: plan, Plan: limits, Now: baseTime,
		})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	// The confirmation named for b, another price, an update confirming nothing, or another plan: nothing.
	if o := change(b.org.ID, "evt_b", "sub_1", "max", "price_max", max); o != ports.PaymentIgnored {
		t.Fatalf("a's change applied to b: %s", o)
	}
	if other, _ := s.Organization(ctx, b.org.ID); other.Plan != b.org.Plan {
		t.Fatalf("other organization's limits changed: %+v", other.Plan)
	}
	if o := change(a.org.ID, "evt_renew", "sub_1", "", "price_pro", ports.Plan{}); o != ports.PaymentIgnored {
		t.Fatalf("an update confirming nothing: %s", o)
	}
	if o := change(a.org.ID, "evt_renew", "sub_1", "max", "price_max", max); o != ports.PaymentDuplicate {
		t.Fatalf("a replay of an ignored update: %s, want duplicate", o)
	}
	if o := change(a.org.ID, "evt_wrong_plan", "sub_1", "pro", "price_max", pro); o != ports.PaymentIgnored {
		t.Fatalf("another plan at the change's price: %s", o)
	}
	if id, _, _ := s.SubscribedPlan(ctx, a.org.ID); id != "pro" {
		t.Fatalf("plan before the confirmation: %q", id)
	}

	// The confirmation delivered eight times at once applies once.
	var wg sync.WaitGroup
	outcomes := make([]ports.PaymentOutcome, 8)
	errs := make([]error, 8)
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, outcomes[i], errs[i] = s.ApplyPayment(ctx, ports.PaymentApplication{
				OrganizationID: a.org.ID, EventID: "evt_updated", SubscriptionID: "sub_1", PriceID: "price_max", PlanID: "max", Plan: max, Now: baseTime,
			})
		}()
	}
	wg.Wait()
	applied := 0
	for i, o := range outcomes {
		if errs[i] != nil {
			t.Fatalf("concurrent confirmation: %v", errs[i])
		}
		if o == ports.PaymentApplied {
			applied++
		} else if o != ports.PaymentDuplicate {
			t.Fatalf("concurrent confirmation outcome %q", o)
		}
	}
	if applied != 1 {
		t.Fatalf("%d of 8 concurrent confirmations applied, want 1", applied)
	}
	if org, _ := s.Organization(ctx, a.org.ID); org.Plan != max {
		t.Fatalf("limits after the change: %+v", org.Plan)
	}
	if id, _, _ := s.SubscribedPlan(ctx, a.org.ID); id != "max" {
		t.Fatalf("plan after the change: %q", id)
	}
	if paid, _ := s.PaidSubscription(ctx, a.org.ID); paid != "sub_1" {
		t.Fatalf("paid by %q after the change, want sub_1", paid)
	}
	if _, _, err := s.PendingPlanChange(ctx, a.org.ID, "sub_1"); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("the applied change is still pending: %v", err)
	}
	// Another event confirming the same price finds nothing waiting.
	if o := change(a.org.ID, "evt_again", "sub_1", "max", "price_max", ports.Plan{MonthlyLimit: 7}); o != ports.PaymentIgnored {
		t.Fatalf("a second confirmation: %s", o)
	}

	// Confirmed by the provider's answer: no event id; applies once, and the notification after it is
	// ignored.
	if err := s.StartPlanChange(ctx, a.org.ID, "sub_1", "pro", "price_pro"); err != nil {
		t.Fatal(err)
	}
	if o := change(a.org.ID, "", "sub_1", "pro", "price_pro", pro); o != ports.PaymentApplied {
		t.Fatalf("change confirmed by the answer: %s", o)
	}
	if o := change(a.org.ID, "", "sub_1", "pro", "price_pro", pro); o != ports.PaymentIgnored {
		t.Fatalf("the answer applied twice: %s", o)
	}
	if o := change(a.org.ID, "evt_late", "sub_1", "pro", "price_pro", pro); o != ports.PaymentIgnored {
		t.Fatalf("the notification after the answer: %s", o)
	}
	if org, _ := s.Organization(ctx, a.org.ID); org.Plan != pro {
		t.Fatalf("limits after the answer: %+v", org.Plan)
	}

	// Subscribing to a plan without a price forgets the waiting change and the subscription.
	if err := s.StartPlanChange(ctx, a.org.ID, "sub_1", "max", "price_max"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SubscribePlan(ctx, a.org.ID, "growth", ports.Plan{MonthlyLimit: 9}, baseTime); err != nil {
		t.Fatal(err)
	}
	if paid, _ := s.PaidSubscription(ctx, a.org.ID); paid != "" {
		t.Fatalf("paid by %q after subscribing to growth", paid)
	}
	if o := change(a.org.ID, "evt_after_free", "sub_1", "max", "price_max", max); o != ports.PaymentIgnored {
		t.Fatalf("a change confirmed after leaving the subscription: %s", o)
	}
	if id, _, _ := s.SubscribedPlan(ctx, a.org.ID); id != "growth" {
		t.Fatalf("plan: %q, want growth", id)
	}
	if err := s.StartPlanChange(ctx, a.org.ID, "sub_1", "max", "price_max"); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("StartPlanChange after leaving the subscription: %v, want not_found", err)
	}
}
