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
	// PaymentWebhook takes a notification from the payment provider as it arrived: the raw body and its
	// signature header. A verified checkout completion records the plan its checkout was started for; the
	// provider's event id makes a replay change nothing. Errors: invalid_argument (bad signature, stale
	// timestamp or unreadable body), not_found (no payment provider is configured).
	PaymentWebhook(ctx context.Context, payload []byte, signature string) (PaymentWebhookResult, error)
}

// PaymentOutcome says what a payment notification did.
type PaymentOutcome string

// The outcomes of PaymentWebhook.
const (
	// PaymentApplied: the notification changed the organization's plan.
	PaymentApplied PaymentOutcome = "applied"
	// PaymentDuplicate: the event was applied before; nothing changed again.
	PaymentDuplicate PaymentOutcome = "duplicate"
	// PaymentIgnored: a type Postmill does not act on, or one naming no checkout or subscription of the
	// organization it names.
	PaymentIgnored PaymentOutcome = "ignored"
)

// PaymentWebhookResult is what PaymentWebhook did with one notification.
type PaymentWebhookResult struct {
	EventID string
	Outcome PaymentOutcome
}

// BillingStore persists which plan each organization is on.
type BillingStore interface {
	// SubscribedPlan returns the plan id recorded for the organization; "" when none was recorded.
	SubscribedPlan(ctx context.Context, orgID string) (string, error)
	// SubscribePlan records planID and sets the organization's limits to plan in one transaction, and
	// returns the organization as it now is. It ends the link to any paid subscription. Errors: not_found.
	SubscribePlan(ctx context.Context, orgID, planID string, plan Plan, now time.Time) (Organization, error)
	// StartCheckout records that the organization started the provider's checkout checkoutID for planID,
	// so that its completion is later matched to this organization and this plan only. Errors: not_found.
	StartCheckout(ctx context.Context, orgID, checkoutID, planID string, now time.Time) error
	// CheckoutPlan returns the plan the organization's checkout was started for. Errors: not_found (no
	// such checkout of this organization).
	CheckoutPlan(ctx context.Context, orgID, checkoutID string) (string, error)
	// ApplyPayment applies one provider event to one organization in one transaction: the event id is
	// recorded, and unless it already was (PaymentDuplicate), the checkout (if any) is marked complete and
	// the plan and its limits are recorded as SubscribePlan does, linked to the provider's subscription. An
	// ended subscription the organization is no longer on is PaymentIgnored. Nothing changes unless the
	// outcome is PaymentApplied; org is then the organization as it now is. Errors: not_found.
	ApplyPayment(ctx context.Context, p PaymentApplication) (org Organization, outcome PaymentOutcome, err error)
}

// PaymentApplication is one verified provider event for BillingStore.ApplyPayment.
type PaymentApplication struct {
	OrganizationID string
	EventID        string
	// CheckoutID is the completed checkout; empty for an ended subscription.
	CheckoutID string
	// SubscriptionID is the provider's subscription the plan is paid by. For an ended subscription the
	// change applies only while the organization is still on it.
	SubscriptionID string
	// Ended: the subscription ended; PlanID and Plan are what the organization falls back to.
	Ended  bool
	PlanID string
	Plan   Plan
	Now    time.Time
}

// PaymentProvider takes payment for plans with a price. Postmill has none by default: every plan is then
// taken at once.
type PaymentProvider interface {
	// Checkout starts a payment of the offer's price by the organization and returns the provider's id
	// for it and the URL the customer completes it at. The provider later confirms it (PaymentWebhook), and
	// the plan is then recorded.
	Checkout(ctx context.Context, orgID string, offer PlanOffer) (PaymentCheckout, error)
	// ParseEvent verifies a notification's signature against the provider's secret and decodes it. Errors:
	// invalid_argument when the signature does not match, is too old, or the body is not an event.
	ParseEvent(payload []byte, signature string) (PaymentEvent, error)
}

// PaymentCheckout is a started checkout: the provider's id and where the customer pays.
type PaymentCheckout struct {
	ID  string
	URL string
}

// PaymentEventType is what a provider notification reports, as far as Postmill acts on it.
type PaymentEventType string

// The event types Postmill acts on; every other one is PaymentEventOther.
const (
	PaymentCheckoutCompleted PaymentEventType = "checkout_completed"
	PaymentSubscriptionEnded PaymentEventType = "subscription_ended"
	PaymentEventOther        PaymentEventType = "other"
)

// PaymentEvent is a verified provider notification. OrganizationID is what the event says; the core
// believes it only together with a checkout or subscription recorded for that organization.
type PaymentEvent struct {
	ID             string
	Type           PaymentEventType
	OrganizationID string
	CheckoutID     string
	SubscriptionID string
}
