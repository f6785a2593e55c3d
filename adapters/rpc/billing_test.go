package rpc_test

import (
	"context"
	"sync"

	"github.com/postmill/postmill/ports"
)

// billingAnswers are what the fake core answers for the billing service, kept beside fakeCore so that the
// billing area adds a file rather than growing the fake.
type billingAnswers struct {
	sub     ports.BillingSubscription
	plans   []ports.PlanOffer
	payment ports.PaymentWebhookResult
}

var billingByFake sync.Map // *fakeCore -> *billingAnswers

func (f *fakeCore) billing() *billingAnswers {
	a, _ := billingByFake.LoadOrStore(f, &billingAnswers{})
	return a.(*billingAnswers)
}

func (f *fakeCore) BillingSubscription(ctx context.Context, orgID string) (ports.BillingSubscription, error) {
	return f.billing().sub, f.record(ctx, "BillingSubscription", orgID)
}

func (f *fakeCore) Subscribe(ctx context.Context, orgID, planID string) (ports.BillingSubscription, error) {
	return f.billing().sub, f.record(ctx, "Subscribe", orgID, planID)
}

func (f *fakeCore) Plans(ctx context.Context) ([]ports.PlanOffer, error) {
	return f.billing().plans, f.record(ctx, "Plans")
}

func (f *fakeCore) PaymentWebhook(ctx context.Context, payload []byte, signature string) (ports.PaymentWebhookResult, error) {
	return f.billing().payment, f.record(ctx, "PaymentWebhook", payload, signature)
}

func billingRoundTrips() []roundTrip {
	full := ports.BillingSubscription{
		OrganizationID: "org1", PlanID: "pro", PlanName: "Pro", Plan: ports.Plan{MonthlyLimit: 100000, WarmupCap: 500},
		PeriodStart: t0, PeriodEnd: t1, EmailsSent: 42, CheckoutURL: "https://checkout.example/c/1",
		PendingPlanID: "scale",
	}
	offers := []ports.PlanOffer{
		{ID: "free", Name: "Free", Plan: ports.Plan{MonthlyLimit: 3000}},
		{ID: "pro", Name: "Pro", Plan: ports.Plan{MonthlyLimit: 100000, WarmupCap: 500}, PriceID: "price_1"},
	}
	return []roundTrip{
		{
			name: "BillingSubscription", answer: func(f *fakeCore) { f.billing().sub = full },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Billing.BillingSubscription(ctx, "org1")
			},
			want: full, method: "BillingSubscription", args: []any{"org1"},
		},
		{
			name: "Subscribe", answer: func(f *fakeCore) { f.billing().sub = full },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Billing.Subscribe(ctx, "org1", "pro")
			},
			want: full, method: "Subscribe", args: []any{"org1", "pro"},
		},
		{
			name: "Subscribe/zero answer", answer: func(*fakeCore) {},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Billing.Subscribe(ctx, "org1", "")
			},
			want: ports.BillingSubscription{}, method: "Subscribe", args: []any{"org1", ""},
		},
		{
			name: "Plans", answer: func(f *fakeCore) { f.billing().plans = offers },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Billing.Plans(ctx)
			},
			want: offers, method: "Plans", args: nil,
		},
		{
			name: "Plans/empty", answer: func(f *fakeCore) { f.billing().plans = []ports.PlanOffer{} },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Billing.Plans(ctx)
			},
			want: []ports.PlanOffer{}, method: "Plans", args: nil,
		},
		{
			name: "PaymentWebhook",
			answer: func(f *fakeCore) {
				f.billing().payment = ports.PaymentWebhookResult{EventID: "evt_1", Outcome: ports.PaymentApplied}
			},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Billing.PaymentWebhook(ctx, []byte(`{"id":"evt_1"}`), "t=1,v1=ab")
			},
			want:   ports.PaymentWebhookResult{EventID: "evt_1", Outcome: ports.PaymentApplied},
			method: "PaymentWebhook", args: []any{[]byte(`{"id":"evt_1"}`), "t=1,v1=ab"},
		},
	}
}
