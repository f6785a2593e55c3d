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
	// PendingPlanID is the plan asked for inside the provider's subscription while the provider has not
	// confirmed it yet (the difference not paid); empty when no change is waiting.
	PendingPlanID string
}

// BillingService is GET /v1/billing/subscription and POST /v1/billing/subscribe (SPEC §4.13).
type BillingService interface {
	// BillingSubscription reports the organization's plan and this period's usage. Errors: not_found.
	BillingSubscription(ctx context.Context, orgID string) (BillingSubscription, error)
	// Subscribe moves the organization to a catalogue plan; its limits change at once unless the plan
	// needs payment through the provider. An organization already paying through a provider subscription
	// changes that subscription's price instead of starting a checkout, and leaving it for a plan without a
	// price cancels it. Errors: invalid_argument (unknown plan, detail path "plan"),
	// not_found.
	Subscribe(ctx context.Context, orgID, planID string) (BillingSubscription, error)
	// Plans lists the catalogue in the operator's order.
	Plans(ctx context.Context) ([]PlanOffer, error)
	// PaymentWebhook takes a notification from the payment provider as it arrived: the raw body and its
	// signature header. A verified checkout completion records the plan its checkout was started for, a
	// confirmed plan change the plan it was asked for; the provider's event id makes a replay change
	// nothing. Errors: invalid_argument (bad signature, stale
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
	// SubscribedPlan returns the plan id recorded for the organization ("" when none was recorded) and the
	// plan of a change StartPlanChange recorded and nothing has confirmed or replaced yet ("" when none).
	SubscribedPlan(ctx context.Context, orgID string) (planID, pendingPlanID string, err error)
	// SubscribePlan records planID and sets the organization's limits to plan in one transaction, and
	// returns the organization as it now is. It ends the link to any paid subscription. Errors: not_found.
	SubscribePlan(ctx context.Context, orgID, planID string, plan Plan, now time.Time) (Organization, error)
	// StartCheckout records that the organization started the provider's checkout checkoutID for planID,
	// so that its completion is later matched to this organization and this plan only. Errors: not_found.
	StartCheckout(ctx context.Context, orgID, checkoutID, planID string, now time.Time) error
	// CheckoutPlan returns the plan the organization's checkout was started for. Errors: not_found (no
	// such checkout of this organization).
	CheckoutPlan(ctx context.Context, orgID, checkoutID string) (string, error)
	// PaidSubscription returns the provider's subscription the organization's plan is paid by, recorded
	// when its checkout completed; "" when the plan is not paid through the provider.
	PaidSubscription(ctx context.Context, orgID string) (string, error)
	// StartPlanChange records that the organization's paid subscription subscriptionID was asked to move
	// to priceID for planID, replacing any change recorded before. It applies only when the provider
	// confirms that subscription on that price (ApplyPayment with PriceID). Errors: not_found (the
	// organization's plan is not paid by subscriptionID).
	StartPlanChange(ctx context.Context, orgID, subscriptionID, planID, priceID string) error
	// PendingPlanChange returns the plan and price recorded by StartPlanChange for the organization's
	// subscription. Errors: not_found (no change of this organization's subscription is waiting).
	PendingPlanChange(ctx context.Context, orgID, subscriptionID string) (planID, priceID string, err error)
	// ApplyPayment applies one provider event to one organization in one transaction: the event id is
	// recorded, and unless it already was (PaymentDuplicate), the checkout (if any) is marked complete and
	// the plan and its limits are recorded as SubscribePlan does, linked to the provider's subscription. An
	// ended subscription the organization is no longer on is PaymentIgnored. A confirmed plan change
	// (PriceID set, no CheckoutID) applies only while the change recorded by StartPlanChange for that
	// subscription is PlanID at PriceID, and completes it, so it applies once; otherwise (an empty PlanID
	// included: an update that confirms nothing) PaymentIgnored, with the event id recorded.
	// EventID may be empty only for a plan change, confirmed by the provider's answer rather than by a
	// notification. Nothing changes unless the outcome is PaymentApplied; org is then the organization as it
	// now is. Errors: not_found.
	ApplyPayment(ctx context.Context, p PaymentApplication) (org Organization, outcome PaymentOutcome, err error)
}

// PaymentApplication is one verified provider event for BillingStore.ApplyPayment.
type PaymentApplication struct {
	OrganizationID string
	// EventID is the provider's event id, the idempotency key; empty for a plan change the provider's
	// answer to the update confirmed.
	EventID string
	// CheckoutID is the completed checkout; empty for an ended subscription and a plan change.
	CheckoutID string
	// PriceID is set for a confirmed plan change: the price the subscription is now on.
	PriceID string
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
	// ChangePlan moves the organization's subscription subscriptionID (the one its completed checkout
	// created) to the offer's price, without a new checkout. Confirmed reports that the provider's answer
	// already shows the subscription on that price; otherwise the change waits for the customer (a payment
	// needing their action) and a later PaymentSubscriptionUpdated confirms it.
	ChangePlan(ctx context.Context, orgID, subscriptionID string, offer PlanOffer) (PaymentPlanChange, error)
	// CancelSubscription ends the organization's subscription subscriptionID at once, crediting the unused
	// part of the period, because the organization moved to a plan without a price. A subscription the
	// provider no longer has counts as cancelled.
	CancelSubscription(ctx context.Context, orgID, subscriptionID string) error
}

// PaymentPlanChange is the provider's answer to PaymentProvider.ChangePlan.
type PaymentPlanChange struct {
	// Confirmed: the subscription is on the new price now.
	Confirmed bool
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
	// PaymentSubscriptionUpdated: a live subscription with no change waiting on payment, on PriceID.
	PaymentSubscriptionUpdated PaymentEventType = "subscription_updated"
	PaymentEventOther          PaymentEventType = "other"
)

// PaymentEvent is a verified provider notification. OrganizationID is what the event says; the core
// believes it only together with a checkout or subscription recorded for that organization.
type PaymentEvent struct {
	ID             string
	Type           PaymentEventType
	OrganizationID string
	CheckoutID     string
	SubscriptionID string
	// PriceID is the price of a PaymentSubscriptionUpdated subscription's only item ("" when it has
	// several).
	PriceID string
}
