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

type clock struct{ t time.Time }

func (c clock) Now() time.Time { return c.t }

type fakePayments struct{ asked []string }

func (p *fakePayments) Checkout(_ context.Context, org string, o ports.PlanOffer) (string, error) {
	p.asked = append(p.asked, org+":"+o.PriceID)
	return "https://pay.example/" + o.ID, nil
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
