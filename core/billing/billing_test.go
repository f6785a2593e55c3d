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

func (f *fakeStore) SubscribedPlan(_ context.Context, id string) (string, error) {
	return f.plans[id], nil
}

func (f *fakeStore) SubscribePlan(_ context.Context, id, plan string, p ports.Plan, _ time.Time) (ports.Organization, error) {
	o, ok := f.orgs[id]
	if !ok {
		return o, ports.NotFound("organization not found")
	}
	o.Plan = p
	f.orgs[id] = o
	f.plans[id] = plan
	return o, nil
}

// The payment side of fakeStore: checkouts by organization and id, events seen, the paid subscription.
type checkoutKey struct{ org, id string }

func (f *fakeStore) payments() *fakePaymentState {
	if f.pay == nil {
		f.pay = &fakePaymentState{checkouts: map[checkoutKey]string{}, events: map[checkoutKey]bool{}, paidBy: map[string]string{}}
	}
	return f.pay
}

type fakePaymentState struct {
	checkouts map[checkoutKey]string
	events    map[checkoutKey]bool
	paidBy    map[string]string
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
	if st.events[checkoutKey{p.OrganizationID, p.EventID}] {
		return o, ports.PaymentDuplicate, nil
	}
	st.events[checkoutKey{p.OrganizationID, p.EventID}] = true
	if p.Ended && st.paidBy[p.OrganizationID] != p.SubscriptionID {
		return o, ports.PaymentIgnored, nil
	}
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
