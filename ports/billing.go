package ports

import (
	"context"
	"time"
)

// DefaultPlanID names the plan every operator's catalogue holds, and the one an organization is on until
// it subscribes to another.
const DefaultPlanID = "free"

// PlanOffer is one entry of the operator's plan catalogue: the limits an organization subscribing to it gets.
// Zero limits mean none.
type PlanOffer struct {
	ID   string
	Name string
	Plan Plan
	// PriceID is the payment provider's price for the plan; empty means the plan is free to take.
	PriceID string
}

// BillingSubscription is the plan an organization is on, its limits, the current period and its usage.
type BillingSubscription struct {
	OrganizationID string
	// PlanID is the catalogue plan last subscribed to (DefaultPlanID before any).
	PlanID   string
	PlanName string
	// Plan is the organization's limits as they hold now; an admin may have set them apart from the plan.
	Plan        Plan
	PeriodStart time.Time
	PeriodEnd   time.Time
	EmailsSent  int64
	// CheckoutURL is set when subscribing needs a payment first: the plan changes once the provider
	// confirms it. Empty when the change took effect at once.
	CheckoutURL string
}

// BillingService is GET /v1/billing/subscription and POST /v1/billing/subscribe (SPEC §4.13).
type BillingService interface {
	// BillingSubscription reports the organization's plan and this period's usage. Errors: not_found.
	BillingSubscription(ctx context.Context, orgID string) (BillingSubscription, error)
	// Subscribe moves the organization to a catalogue plan; its limits change at once unless the plan
	// needs payment through the provider. Errors: invalid_argument (unknown plan, detail path "plan"),
	// not_found.
	Subscribe(ctx context.Context, orgID, planID string) (BillingSubscription, error)
	// Plans lists the catalogue in the operator's order.
	Plans(ctx context.Context) ([]PlanOffer, error)
}

// BillingStore persists which plan each organization is on.
type BillingStore interface {
	// SubscribedPlan returns the plan id recorded for the organization; "" when none was recorded.
	SubscribedPlan(ctx context.Context, orgID string) (string, error)
	// SubscribePlan records planID and sets the organization's limits to plan in one transaction, and
	// returns the organization as it now is. Errors: not_found.
	SubscribePlan(ctx context.Context, orgID, planID string, plan Plan, now time.Time) (Organization, error)
}

// PaymentProvider takes payment for plans with a price. Postmill has none by default: every plan is then
// taken at once.
type PaymentProvider interface {
	// Checkout starts a payment of the offer's price by the organization and returns the URL the customer
	// completes it at. The provider later confirms it, and the plan is then recorded.
	Checkout(ctx context.Context, orgID string, offer PlanOffer) (url string, err error)
}
