package billing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/postmill/postmill/core/billing"
	"github.com/postmill/postmill/ports"
)

type fakeStore struct {
	ports.OrganizationStore
	orgs  map[string]ports.Organization
	plans map[string]string
	usage int64
	pay   *fakePaymentState
}

func (f *fakeStore) Organization(_ context.Context, id string) (ports.Organization, error) {
	o, ok := f.orgs[id]
	if !ok {
		return o, ports.NotFound("organization not found")
	}
	return o, nil
}

func (f *fakeStore) Usage(context.Context, string, string, time.Time) (int64, error) {
	return f.usage, nil
}

func (f *fakeStore) SubscribedPlan(_ context.Context, id string) (string, string, error) {
	pending := ""
	if f.pay != nil {
		pending = f.pay.pending[id].plan
	}
	return f.plans[id], pending, nil
}

func (f *fakeStore) SubscribePlan(_ context.Context, id, plan string, p ports.Plan, _ time.Time) (ports.Organization, error) {
	o, ok := f.orgs[id]
	if !ok {
		return o, ports.NotFound("organization not found")
	}
	o.Plan = p
	f.orgs[id] = o
	f.plans[id] = plan
	delete(f.payments().paidBy, id)
	delete(f.payments().pending, id)
	return o, nil
}

// The payment side of fakeStore: checkouts by organization and id, events seen, the paid subscription.
type checkoutKey struct{ org, id string }

func (f *fakeStore) payments() *fakePaymentState {
	if f.pay == nil {
		f.pay = &fakePaymentState{checkouts: map[checkoutKey]string{}, events: map[checkoutKey]bool{}, paidBy: map[string]string{}, pending: map[string]pendingChange{}}
	}
	return f.pay
}

type fakePaymentState struct {
	checkouts map[checkoutKey]string
	events    map[checkoutKey]bool
	paidBy    map[string]string
	pending   map[string]pendingChange
}

type pendingChange struct{ sub, plan, price string }

func (f *fakeStore) PaidSubscription(_ context.Context, org string) (string, error) {
	return f.payments().paidBy[org], nil
}

func (f *fakeStore) StartPlanChange(_ context.Context, org, sub, plan, price string) error {
	st := f.payments()
	if sub == "" || st.paidBy[org] != sub {
		return ports.NotFound("paid subscription not found")
	}
	st.pending[org] = pendingChange{sub, plan, price}
	return nil
}

func (f *fakeStore) PendingPlanChange(_ context.Context, org, sub string) (string, string, error) {
	pc, ok := f.payments().pending[org]
	if !ok || pc.sub != sub {
		return "", "", ports.NotFound("plan change not found")
	}
	return pc.plan, pc.price, nil
}

func (f *fakeStore) StartCheckout(_ context.Context, org, id, plan string, _ time.Time) error {
	if _, ok := f.orgs[org]; !ok {
		return ports.NotFound("organization not found")
	}
	f.payments().checkouts[checkoutKey{org, id}] = plan
	return nil
}

func (f *fakeStore) CheckoutPlan(_ context.Context, org, id string) (string, error) {
	plan, ok := f.payments().checkouts[checkoutKey{org, id}]
	if !ok {
		return "", ports.NotFound("checkout not found")
	}
	return plan, nil
}

func (f *fakeStore) ApplyPayment(_ context.Context, p ports.PaymentApplication) (ports.Organization, ports.PaymentOutcome, error) {
	o, ok := f.orgs[p.OrganizationID]
	if !ok {
		return o, "", ports.NotFound("organization not found")
	}
	st := f.payments()
	change := !p.Ended && p.CheckoutID == "" && p.PriceID != ""
	if p.EventID != "" || !change {
		if st.events[checkoutKey{p.OrganizationID, p.EventID}] {
			return o, ports.PaymentDuplicate, nil
		}
		st.events[checkoutKey{p.OrganizationID, p.EventID}] = true
	}
	if p.Ended && st.paidBy[p.OrganizationID] != p.SubscriptionID {
		return o, ports.PaymentIgnored, nil
	}
	if change && st.pending[p.OrganizationID] != (pendingChange{p.SubscriptionID, p.PlanID, p.PriceID}) {
		return o, ports.PaymentIgnored, nil
	}
	delete(st.pending, p.OrganizationID)
	o.Plan = p.Plan
	f.orgs[p.OrganizationID] = o
	f.plans[p.OrganizationID] = p.PlanID
	st.paidBy[p.OrganizationID] = ""
	if !p.Ended {
		st.paidBy[p.OrganizationID] = p.SubscriptionID
	}
	return o, ports.PaymentApplied, nil
}

type clock struct{ t time.Time }

func (c clock) Now() time.Time { return c.t }

type fakePayments struct {
	asked []string
	// events are what ParseEvent answers, by signature; any other signature is refused.
	events map[string]ports.PaymentEvent
	// changed and cancelled record ChangePlan ("org:sub:price") and CancelSubscription ("org:sub").
	changed, cancelled []string
	// confirm is what ChangePlan answers; cancelErr what CancelSubscription does.
	confirm   bool
	cancelErr error
}

func (p *fakePayments) ChangePlan(_ context.Context, org, sub string, o ports.PlanOffer) (ports.PaymentPlanChange, error) {
	p.changed = append(p.changed, org+":"+sub+":"+o.PriceID)
	return ports.PaymentPlanChange{Confirmed: p.confirm}, nil
}

func (p *fakePayments) CancelSubscription(_ context.Context, org, sub string) error {
	if p.cancelErr != nil {
		return p.cancelErr
	}
	p.cancelled = append(p.cancelled, org+":"+sub)
	return nil
}

func (p *fakePayments) Checkout(_ context.Context, org string, o ports.PlanOffer) (ports.PaymentCheckout, error) {
	p.asked = append(p.asked, org+":"+o.PriceID)
	return ports.PaymentCheckout{ID: "cs_" + org + "_" + o.ID, URL: "https://pay.example/" + o.ID}, nil
}

func (p *fakePayments) ParseEvent(_ []byte, signature string) (ports.PaymentEvent, error) {
	ev, ok := p.events[signature]
	if !ok {
		return ports.PaymentEvent{}, ports.Errorf(ports.CodeInvalidArgument, "bad signature")
	}
	return ev, nil
}

func newService(t *testing.T, plans []ports.PlanOffer, pay ports.PaymentProvider) (*billing.Service, *fakeStore) {
	t.Helper()
	st := &fakeStore{orgs: map[string]ports.Organization{"o1": {ID: "o1", Plan: ports.Plan{MonthlyLimit: 3000}}}, plans: map[string]string{}, usage: 7}
	svc, err := billing.New(billing.Config{Plans: plans, DefaultPlan: ports.Plan{MonthlyLimit: 3000}},
		billing.Deps{Organizations: st, Store: st, Payments: pay, Clock: clock{time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)}})
	if err != nil {
		t.Fatal(err)
	}
	return svc, st
}

func TestSubscribeChangesLimits(t *testing.T) {
	ctx := context.Background()
	svc, st := newService(t, []ports.PlanOffer{{ID: "pro", Name: "Pro", Plan: ports.Plan{MonthlyLimit: 100000, WarmupCap: 500}}}, nil)

	sub, err := svc.BillingSubscription(ctx, "o1")
	if err != nil || sub.PlanID != "free" || sub.PlanName != "Free" || sub.EmailsSent != 7 ||
		!sub.PeriodStart.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) || !sub.PeriodEnd.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("before subscribing: %+v, %v", sub, err)
	}
	sub, err = svc.Subscribe(ctx, "o1", "pro")
	if err != nil || sub.PlanID != "pro" || sub.Plan != (ports.Plan{MonthlyLimit: 100000, WarmupCap: 500}) || sub.CheckoutURL != "" {
		t.Fatalf("Subscribe: %+v, %v", sub, err)
	}
	if st.orgs["o1"].Plan.MonthlyLimit != 100000 {
		t.Fatalf("limits not stored: %+v", st.orgs["o1"].Plan)
	}
}

func TestSubscribeUnknownPlanChangesNothing(t *testing.T) {
	svc, st := newService(t, nil, nil)
	_, err := svc.Subscribe(context.Background(), "o1", "enterprise")
	var pe *ports.Error
	if !errors.As(err, &pe) || pe.Code != ports.CodeInvalidArgument || len(pe.Details) != 1 || pe.Details[0].Path != "plan" {
		t.Fatalf("unknown plan: %v, want invalid_argument on plan", err)
	}
	if st.plans["o1"] != "" || st.orgs["o1"].Plan.MonthlyLimit != 3000 {
		t.Fatal("an unknown plan changed the subscription")
	}
}

func TestPaidPlanGoesThroughCheckout(t *testing.T) {
	pay := &fakePayments{}
	svc, st := newService(t, []ports.PlanOffer{{ID: "pro", Plan: ports.Plan{MonthlyLimit: 1}, PriceID: "price_9"}}, pay)
	sub, err := svc.Subscribe(context.Background(), "o1", "pro")
	if err != nil || sub.CheckoutURL != "https://pay.example/pro" || sub.PlanID != "free" {
		t.Fatalf("paid plan: %+v, %v", sub, err)
	}
	if st.plans["o1"] != "" || len(pay.asked) != 1 || pay.asked[0] != "o1:price_9" {
		t.Fatalf("checkout: plans %v, asked %v", st.plans, pay.asked)
	}
	if plan, err := st.CheckoutPlan(context.Background(), "o1", "cs_o1_pro"); err != nil || plan != "pro" {
		t.Fatalf("the checkout was not recorded for o1 and pro: %q, %v", plan, err)
	}
}

type publishedChanges struct{ got []ports.Change }

func (c *publishedChanges) Publish(ch ports.Change) { c.got = append(c.got, ch) }
func (c *publishedChanges) Subscribe(func(ports.Change)) (cancel func()) {
	return func() {}
}

func TestPaymentWebhook(t *testing.T) {
	ctx := context.Background()
	pro := ports.PlanOffer{ID: "pro", Plan: ports.Plan{MonthlyLimit: 100000, WarmupCap: 500}, PriceID: "price_9"}
	pay := &fakePayments{events: map[string]ports.PaymentEvent{
		"paid":      {ID: "evt_1", Type: ports.PaymentCheckoutCompleted, OrganizationID: "o1", CheckoutID: "cs_o1_pro", SubscriptionID: "sub_1"},
		"other-org": {ID: "evt_2", Type: ports.PaymentCheckoutCompleted, OrganizationID: "o2", CheckoutID: "cs_o1_pro", SubscriptionID: "sub_1"},
		"unknown":   {ID: "evt_3", Type: ports.PaymentCheckoutCompleted, OrganizationID: "o1", CheckoutID: "cs_nope"},
		"invoice":   {ID: "evt_4", Type: ports.PaymentEventOther},
		"old-sub":   {ID: "evt_5", Type: ports.PaymentSubscriptionEnded, OrganizationID: "o1", SubscriptionID: "sub_0"},
		"ended":     {ID: "evt_6", Type: ports.PaymentSubscriptionEnded, OrganizationID: "o1", SubscriptionID: "sub_1"},
		"o2-ended":  {ID: "evt_7", Type: ports.PaymentSubscriptionEnded, OrganizationID: "o2", SubscriptionID: "sub_1"},
	}}
	_, st := newService(t, []ports.PlanOffer{pro}, pay)
	st.orgs["o2"] = ports.Organization{ID: "o2", Plan: ports.Plan{MonthlyLimit: 3000}}
	changes := &publishedChanges{}
	svc2, err := billing.New(billing.Config{Plans: []ports.PlanOffer{pro}, DefaultPlan: ports.Plan{MonthlyLimit: 3000}},
		billing.Deps{Organizations: st, Store: st, Payments: pay, Changes: changes, Clock: clock{time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc2.Subscribe(ctx, "o1", "pro"); err != nil {
		t.Fatal(err)
	}

	hook := func(sig string, want ports.PaymentOutcome) {
		t.Helper()
		res, err := svc2.PaymentWebhook(ctx, []byte("{}"), sig)
		if err != nil || res.Outcome != want {
			t.Fatalf("%s: %+v, %v; want %s", sig, res, err, want)
		}
	}

	// A bad signature is the provider's invalid_argument, and changes nothing.
	if _, err := svc2.PaymentWebhook(ctx, []byte("{}"), "forged"); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("bad signature: %v, want invalid_argument", err)
	}
	// o1's checkout named by an event about o2 changes neither.
	hook("other-org", ports.PaymentIgnored)
	hook("unknown", ports.PaymentIgnored)
	hook("invoice", ports.PaymentIgnored)
	if st.plans["o1"] != "" || st.plans["o2"] != "" || len(changes.got) != 0 {
		t.Fatalf("an ignored event changed plans: %v, changes %v", st.plans, changes.got)
	}

	hook("paid", ports.PaymentApplied)
	if st.plans["o1"] != "pro" || st.orgs["o1"].Plan != pro.Plan {
		t.Fatalf("after payment: plan %q limits %+v", st.plans["o1"], st.orgs["o1"].Plan)
	}
	if len(changes.got) != 1 || changes.got[0].OrganizationID != "o1" || changes.got[0].Kind != ports.ChangeOrganization {
		t.Fatalf("changes published: %+v", changes.got)
	}
	hook("paid", ports.PaymentDuplicate)
	if len(changes.got) != 1 {
		t.Fatalf("a replay published again: %+v", changes.got)
	}

	// Ending another subscription, or o1's subscription named for o2, leaves the plan alone.
	hook("old-sub", ports.PaymentIgnored)
	hook("o2-ended", ports.PaymentIgnored)
	if st.plans["o1"] != "pro" || st.plans["o2"] != "" {
		t.Fatalf("an unrelated end changed plans: %v", st.plans)
	}
	hook("ended", ports.PaymentApplied)
	if st.plans["o1"] != "free" || st.orgs["o1"].Plan != (ports.Plan{MonthlyLimit: 3000}) {
		t.Fatalf("after the subscription ended: plan %q limits %+v", st.plans["o1"], st.orgs["o1"].Plan)
	}
}

func TestPaymentWebhookWithoutProvider(t *testing.T) {
	svc, _ := newService(t, nil, nil)
	if _, err := svc.PaymentWebhook(context.Background(), []byte("{}"), "t=1,v1=00"); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("without a provider: %v, want not_found", err)
	}
}

func TestCatalogue(t *testing.T) {
	plans, err := billing.ParseCatalogue([]byte(`[{"id":"free","name":"Free","monthlyLimit":100},{"id":"pro","monthlyLimit":5000,"warmupCap":50}]`))
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := newService(t, plans, nil)
	got, _ := svc.Plans(context.Background())
	if len(got) != 2 || got[0].Plan.MonthlyLimit != 100 || got[1].Name != "pro" {
		t.Fatalf("Plans = %+v", got)
	}
	if _, err := billing.ParseCatalogue([]byte(`[{"id":"pro","monthlyLimt":5}]`)); err == nil {
		t.Error("a misspelt field was accepted")
	}
	for _, bad := range [][]ports.PlanOffer{
		{{ID: "Pro"}}, {{ID: ""}}, {{ID: "a"}, {ID: "a"}}, {{ID: "neg", Plan: ports.Plan{WarmupCap: -1}}},
	} {
		st := &fakeStore{}
		if _, err := billing.New(billing.Config{Plans: bad}, billing.Deps{Organizations: st, Store: st}); err == nil {
			t.Errorf("catalogue %+v accepted", bad)
		}
	}
}

// paidService is o1 paying for pro through sub_1 (its checkout completed), with max another priced plan
// and growth a plan without a price.
func paidService(t *testing.T, pay *fakePayments) (*billing.Service, *fakeStore, *publishedChanges) {
	t.Helper()
	plans := []ports.PlanOffer{
		{ID: "pro", Plan: ports.Plan{MonthlyLimit: 100000, WarmupCap: 500}, PriceID: "price_pro"},
		{ID: "max", Plan: ports.Plan{MonthlyLimit: 1000000}, PriceID: "price_max"},
		{ID: "growth", Plan: ports.Plan{MonthlyLimit: 50000}},
	}
	if pay.events == nil {
		pay.events = map[string]ports.PaymentEvent{}
	}
	pay.events["paid"] = ports.PaymentEvent{ID: "evt_paid", Type: ports.PaymentCheckoutCompleted, OrganizationID: "o1", CheckoutID: "cs_o1_pro", SubscriptionID: "sub_1"}
	_, st := newService(t, nil, pay)
	st.orgs["o2"] = ports.Organization{ID: "o2", Plan: ports.Plan{MonthlyLimit: 3000}}
	changes := &publishedChanges{}
	svc, err := billing.New(billing.Config{Plans: plans, DefaultPlan: ports.Plan{MonthlyLimit: 3000}},
		billing.Deps{Organizations: st, Store: st, Payments: pay, Changes: changes, Clock: clock{time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := svc.Subscribe(ctx, "o1", "pro"); err != nil {
		t.Fatal(err)
	}
	if res, err := svc.PaymentWebhook(ctx, nil, "paid"); err != nil || res.Outcome != ports.PaymentApplied {
		t.Fatalf("checkout completion: %+v, %v", res, err)
	}
	changes.got = nil
	return svc, st, changes
}

// TestPlanChangeInsideSubscription: an organization paying through a subscription that subscribes to
// another priced plan has that subscription's price changed, with no second checkout; the plan applies when
// Stripe confirms the subscription on the new price, once, and only for the organization and subscription
// the change was recorded for.
func TestPlanChangeInsideSubscription(t *testing.T) {
	ctx := context.Background()
	pay := &fakePayments{events: map[string]ports.PaymentEvent{
		"renewal":   {ID: "evt_renewal", Type: ports.PaymentSubscriptionUpdated, OrganizationID: "o1", SubscriptionID: "sub_1", PriceID: "price_pro"},
		"other-org": {ID: "evt_other", Type: ports.PaymentSubscriptionUpdated, OrganizationID: "o2", SubscriptionID: "sub_1", PriceID: "price_max"},
		"other-sub": {ID: "evt_other_sub", Type: ports.PaymentSubscriptionUpdated, OrganizationID: "o1", SubscriptionID: "sub_9", PriceID: "price_max"},
		"updated":   {ID: "evt_updated", Type: ports.PaymentSubscriptionUpdated, OrganizationID: "o1", SubscriptionID: "sub_1", PriceID: "price_max"},
		"again":     {ID: "evt_again", Type: ports.PaymentSubscriptionUpdated, OrganizationID: "o1", SubscriptionID: "sub_1", PriceID: "price_max"},
	}}
	svc, st, changes := paidService(t, pay)
	hook := func(sig string, want ports.PaymentOutcome) {
		t.Helper()
		res, err := svc.PaymentWebhook(ctx, nil, sig)
		if err != nil || res.Outcome != want {
			t.Fatalf("%s: %+v, %v; want %s", sig, res, err, want)
		}
	}

	// Stripe holds the change (the difference is not paid yet): the answer is the plan as it was.
	sub, err := svc.Subscribe(ctx, "o1", "max")
	if err != nil || sub.PlanID != "pro" || sub.CheckoutURL != "" || sub.Plan.MonthlyLimit != 100000 {
		t.Fatalf("Subscribe max: %+v, %v", sub, err)
	}
	if len(pay.asked) != 1 || len(pay.changed) != 1 || pay.changed[0] != "o1:sub_1:price_max" {
		t.Fatalf("checkouts %v, changes %v; want the one checkout and a change of sub_1 to price_max", pay.asked, pay.changed)
	}
	if len(pay.cancelled) != 0 || len(changes.got) != 0 {
		t.Fatalf("cancelled %v, published %v", pay.cancelled, changes.got)
	}

	// Updates that are not the change, and the change named for another organization or subscription,
	// change nothing.
	hook("renewal", ports.PaymentIgnored)
	hook("other-org", ports.PaymentIgnored)
	hook("other-sub", ports.PaymentIgnored)
	if st.plans["o1"] != "pro" || st.plans["o2"] != "" || st.orgs["o2"].Plan.MonthlyLimit != 3000 {
		t.Fatalf("ignored updates changed plans: %v", st.plans)
	}

	// Stripe confirms: max and its limits, from Postmill's record; once.
	hook("updated", ports.PaymentApplied)
	if st.plans["o1"] != "max" || st.orgs["o1"].Plan != (ports.Plan{MonthlyLimit: 1000000}) {
		t.Fatalf("after the confirmation: plan %q limits %+v", st.plans["o1"], st.orgs["o1"].Plan)
	}
	if len(changes.got) != 1 || changes.got[0].OrganizationID != "o1" {
		t.Fatalf("published: %+v", changes.got)
	}
	hook("updated", ports.PaymentDuplicate)
	hook("again", ports.PaymentIgnored)
	if len(changes.got) != 1 {
		t.Fatalf("a replay published again: %+v", changes.got)
	}
	if paid, _ := st.PaidSubscription(ctx, "o1"); paid != "sub_1" {
		t.Fatalf("paid by %q after the change, want sub_1", paid)
	}

	// Stripe's answer shows the new price: the plan applies at once, and the notification that follows
	// changes nothing more.
	pay.confirm = true
	pay.events["back"] = ports.PaymentEvent{ID: "evt_back", Type: ports.PaymentSubscriptionUpdated, OrganizationID: "o1", SubscriptionID: "sub_1", PriceID: "price_pro"}
	sub, err = svc.Subscribe(ctx, "o1", "pro")
	if err != nil || sub.PlanID != "pro" || sub.Plan != (ports.Plan{MonthlyLimit: 100000, WarmupCap: 500}) {
		t.Fatalf("confirmed change: %+v, %v", sub, err)
	}
	if len(pay.asked) != 1 || len(pay.changed) != 2 || len(changes.got) != 2 {
		t.Fatalf("checkouts %v, changes %v, published %v", pay.asked, pay.changed, changes.got)
	}
	hook("back", ports.PaymentIgnored)
}

// TestFreePlanCancelsTheSubscription: leaving a paid plan for one without a price cancels the Stripe
// subscription first and applies the new plan's limits at once; the end Stripe then notifies changes
// nothing more. A cancellation that fails changes nothing.
func TestFreePlanCancelsTheSubscription(t *testing.T) {
	ctx := context.Background()
	pay := &fakePayments{events: map[string]ports.PaymentEvent{
		"ended": {ID: "evt_ended", Type: ports.PaymentSubscriptionEnded, OrganizationID: "o1", SubscriptionID: "sub_1"},
	}}
	svc, st, changes := paidService(t, pay)

	pay.cancelErr = errors.New("stripe: 500")
	if _, err := svc.Subscribe(ctx, "o1", "growth"); err == nil {
		t.Fatal("a failed cancellation was ignored")
	}
	if st.plans["o1"] != "pro" || st.orgs["o1"].Plan.MonthlyLimit != 100000 || len(changes.got) != 0 {
		t.Fatalf("a failed cancellation changed the plan: %q %+v", st.plans["o1"], st.orgs["o1"].Plan)
	}

	pay.cancelErr = nil
	sub, err := svc.Subscribe(ctx, "o1", "growth")
	if err != nil || sub.PlanID != "growth" || sub.Plan != (ports.Plan{MonthlyLimit: 50000}) {
		t.Fatalf("Subscribe growth: %+v, %v", sub, err)
	}
	if len(pay.cancelled) != 1 || pay.cancelled[0] != "o1:sub_1" || len(changes.got) != 1 {
		t.Fatalf("cancelled %v, published %v", pay.cancelled, changes.got)
	}
	if paid, _ := st.PaidSubscription(ctx, "o1"); paid != "" {
		t.Fatalf("still paid by %q", paid)
	}
	res, err := svc.PaymentWebhook(ctx, nil, "ended")
	if err != nil || res.Outcome != ports.PaymentIgnored || st.plans["o1"] != "growth" {
		t.Fatalf("the end after the cancellation: %+v, %v, plan %q", res, err, st.plans["o1"])
	}

	// Without a paid subscription there is nothing to cancel; the free plan is taken as before.
	if _, err := svc.Subscribe(ctx, "o1", "free"); err != nil || len(pay.cancelled) != 1 {
		t.Fatalf("free without a subscription: %v, cancelled %v", err, pay.cancelled)
	}
	if _, err := svc.Subscribe(ctx, "o2", "growth"); err != nil || len(pay.cancelled) != 1 {
		t.Fatalf("another organization's move: %v, cancelled %v", err, pay.cancelled)
	}
}
