package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// Billing shapes (SPEC §4.13). The subscription keeps the keys GET /v1/billing/subscription always had
// (plan.monthlyLimit, plan.warmupCap, periodStart, periodEnd, usage.emailsSent) and adds the plan's id and
// name, and the checkout URL of a plan that waits for payment.

type billingPlanResponse struct {
	ID           string `json:"id" doc:"Catalogue plan id; free until the organization subscribes to another" example:"pro"`
	Name         string `json:"name" doc:"The plan's display name" example:"Pro"`
	MonthlyLimit *int64 `json:"monthlyLimit" doc:"Emails per calendar month; null means no limit" example:"100000"`
	WarmupCap    *int64 `json:"warmupCap" doc:"Emails per day while warming up; null means no cap" example:"500"`
}

type billingSubscriptionResponse struct {
	Plan        billingPlanResponse `json:"plan" doc:"The plan and the limits that hold now (an operator may have set them apart from the plan's)"`
	PeriodStart time.Time           `json:"periodStart" doc:"Start of the current period: the first of this month, 00:00 UTC"`
	PeriodEnd   time.Time           `json:"periodEnd" doc:"End of the period (exclusive): the first of next month, 00:00 UTC"`
	Usage       usageResponse       `json:"usage" doc:"Usage in the period"`
	CheckoutURL *string             `json:"checkoutUrl" doc:"Where to pay for the plan asked for, which takes effect once paid; null when the change took effect at once"`
	PendingPlan *string             `json:"pendingPlan" doc:"A plan change inside the paid subscription that waits for the payment provider's confirmation (the difference not paid yet): the plan id asked for; null when none waits" example:"scale"`
}

type subscribeRequest struct {
	_    struct{} `json:"-" additionalProperties:"true"`
	Plan string   `json:"plan" minLength:"1" maxLength:"64" doc:"Id of a plan of the operator's catalogue (GET /v1/billing/plans)" example:"pro"`
}

type subscribeInput struct {
	Body subscribeRequest
}

type planOfferResponse struct {
	ID           string `json:"id" doc:"Plan id, what POST /v1/billing/subscribe takes" example:"pro"`
	Name         string `json:"name" doc:"Display name" example:"Pro"`
	MonthlyLimit *int64 `json:"monthlyLimit" doc:"Emails per calendar month; null means no limit" example:"100000"`
	WarmupCap    *int64 `json:"warmupCap" doc:"Emails per day while warming up; null means no cap" example:"500"`
	Paid         bool   `json:"paid" doc:"Whether subscribing goes through a payment first"`
}

func init() {
	requestExamples["billing-subscribe"] = []bodyExample{{"plan", "Move to the free plan", `{"plan":"free"}`}}
}

// registerBillingRoutes serves the billing routes from the billing service; without one, the organization
// routes answer GET /v1/billing/subscription from the organization service.
func (s *Server) registerBillingRoutes() {
	if s.core.Billing == nil {
		return
	}
	register(s, huma.Operation{
		OperationID: "get-billing-subscription", Method: http.MethodGet, Path: "/v1/billing/subscription",
		Tags: []string{tagBilling}, Summary: "Get the subscription",
		Description: "The plan, its limits, the current period (the calendar month in UTC) and the emails sent in it.",
	}, access{kind: authKey, scopes: []string{ports.ScopeBillingRead}}, s.getBillingSubscription, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "billing-subscribe", Method: http.MethodPost, Path: "/v1/billing/subscribe",
		Tags: []string{tagBilling}, Summary: "Subscribe to a plan",
		Description: "Moves the organization to a plan of the operator's catalogue. Its limits change at once, " +
			"for the very next send; a plan that needs payment answers a checkoutUrl instead and changes once paid. " +
			"An unknown plan is a 400 naming the plans.",
	}, access{kind: authKey, scopes: []string{ports.ScopeBillingWrite}}, s.subscribe, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "list-billing-plans", Method: http.MethodGet, Path: "/v1/billing/plans",
		Tags: []string{tagBilling}, Summary: "List the plans",
		Description: "The operator's plan catalogue; free is always there.",
	}, access{kind: authKey, scopes: []string{ports.ScopeBillingRead, ports.ScopeBillingWrite}}, s.listBillingPlans)

	s.registerPaymentWebhookRoute()
}

func toBillingSubscription(sub ports.BillingSubscription) billingSubscriptionResponse {
	out := billingSubscriptionResponse{
		Plan: billingPlanResponse{
			ID: sub.PlanID, Name: sub.PlanName,
			MonthlyLimit: noneIfZero(sub.Plan.MonthlyLimit), WarmupCap: noneIfZero(sub.Plan.WarmupCap),
		},
		PeriodStart: utc(sub.PeriodStart),
		PeriodEnd:   utc(sub.PeriodEnd),
		Usage:       usageResponse{EmailsSent: sub.EmailsSent},
	}
	if sub.CheckoutURL != "" {
		out.CheckoutURL = &sub.CheckoutURL
	}
	if sub.PendingPlanID != "" {
		out.PendingPlan = &sub.PendingPlanID
	}
	return out
}

func (s *Server) getBillingSubscription(ctx context.Context, _ *struct{}) (*body[billingSubscriptionResponse], error) {
	sub, err := s.core.Billing.BillingSubscription(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	return &body[billingSubscriptionResponse]{toBillingSubscription(sub)}, nil
}

func (s *Server) subscribe(ctx context.Context, in *subscribeInput) (*body[billingSubscriptionResponse], error) {
	sub, err := s.core.Billing.Subscribe(ctx, principalFrom(ctx).OrganizationID, in.Body.Plan)
	if err != nil {
		return nil, err
	}
	return &body[billingSubscriptionResponse]{toBillingSubscription(sub)}, nil
}

func (s *Server) listBillingPlans(ctx context.Context, _ *struct{}) (*body[[]planOfferResponse], error) {
	plans, err := s.core.Billing.Plans(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]planOfferResponse, 0, len(plans))
	for _, p := range plans {
		out = append(out, planOfferResponse{
			ID: p.ID, Name: p.Name, MonthlyLimit: noneIfZero(p.Plan.MonthlyLimit), WarmupCap: noneIfZero(p.Plan.WarmupCap),
			Paid: p.PriceID != "",
		})
	}
	return &body[[]planOfferResponse]{out}, nil
}
