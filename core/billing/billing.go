// Package billing is the plan catalogue and subscriptions of SPEC §4.13: GET /v1/billing/subscription reports
// an organization's plan and this month's usage, POST /v1/billing/subscribe moves it to another plan of the
// operator's catalogue, which changes the limits the send path meters at once.
package billing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// Config is what the operator decides: the catalogue. Plans must hold DefaultPlanID; New adds it, with
// DefaultPlan's limits, when it does not.
type Config struct {
	Plans []ports.PlanOffer
	// DefaultPlan is the limits of the free plan when the catalogue does not name it: the limits new
	// organizations get.
	DefaultPlan ports.Plan
}

// Deps are the ports the service uses. Payments and Changes may be nil.
type Deps struct {
	Organizations ports.OrganizationStore
	Store         ports.BillingStore
	Payments      ports.PaymentProvider
	Changes       ports.ChangeFeed
	Clock         ports.Clock
}

// Service implements ports.BillingService.
type Service struct {
	plans []ports.PlanOffer
	byID  map[string]ports.PlanOffer
	deps  Deps
}

var _ ports.BillingService = (*Service)(nil)

// New checks the catalogue: ids are non-empty, unique, lower-case words, limits not negative.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.Organizations == nil || deps.Store == nil {
		return nil, errors.New("billing: Organizations and Store are required")
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	s := &Service{byID: map[string]ports.PlanOffer{}, deps: deps}
	for i, p := range cfg.Plans {
		if err := checkOffer(p); err != nil {
			return nil, fmt.Errorf("billing: plan %d: %w", i, err)
		}
		if _, dup := s.byID[p.ID]; dup {
			return nil, fmt.Errorf("billing: plan id %q appears twice", p.ID)
		}
		if p.Name == "" {
			p.Name = p.ID
		}
		s.byID[p.ID] = p
		s.plans = append(s.plans, p)
	}
	if _, ok := s.byID[ports.DefaultPlanID]; !ok {
		free := ports.PlanOffer{ID: ports.DefaultPlanID, Name: "Free", Plan: cfg.DefaultPlan}
		if err := checkOffer(free); err != nil {
			return nil, fmt.Errorf("billing: default plan: %w", err)
		}
		s.byID[free.ID] = free
		s.plans = append([]ports.PlanOffer{free}, s.plans...)
	}
	return s, nil
}

func checkOffer(p ports.PlanOffer) error {
	if p.ID == "" || len(p.ID) > 64 {
		return errors.New("id must be 1 to 64 characters")
	}
	if strings.Trim(p.ID, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return fmt.Errorf("id %q may hold only a-z, 0-9, - and _", p.ID)
	}
	if p.Plan.MonthlyLimit < 0 || p.Plan.WarmupCap < 0 {
		return fmt.Errorf("plan %q has a negative limit", p.ID)
	}
	return nil
}

// Plans returns the catalogue, the free plan first unless the operator placed it.
func (s *Service) Plans(context.Context) ([]ports.PlanOffer, error) {
	return append([]ports.PlanOffer(nil), s.plans...), nil
}

// BillingSubscription reports the plan, the limits as they hold, and the emails sent in the current period,
// the calendar month in UTC (the period the monthly allowance is metered over).
func (s *Service) BillingSubscription(ctx context.Context, orgID string) (ports.BillingSubscription, error) {
	org, err := s.deps.Organizations.Organization(ctx, orgID)
	if err != nil {
		return ports.BillingSubscription{}, fmt.Errorf("billing: organization: %w", err)
	}
	return s.report(ctx, org)
}

// Subscribe moves the organization to planID. A plan with a price, when a payment provider is configured,
// starts a checkout and changes nothing until the provider confirms; an organization already paying through
// a provider subscription has that subscription's price changed instead (changePlan). A plan without a
// price is recorded with its limits at once, and every process's send path hears of them; a provider
// subscription paying for the plan left is cancelled first.
func (s *Service) Subscribe(ctx context.Context, orgID, planID string) (ports.BillingSubscription, error) {
	offer, ok := s.byID[planID]
	if !ok {
		return ports.BillingSubscription{}, ports.ValidationError(ports.FieldViolation{
			Path: "plan", Message: fmt.Sprintf("unknown plan %q; the plans are %s", planID, s.planIDs()),
		})
	}
	paidBy := ""
	if s.deps.Payments != nil {
		var err error
		if paidBy, err = s.deps.Store.PaidSubscription(ctx, orgID); err != nil {
			return ports.BillingSubscription{}, fmt.Errorf("billing: paid subscription: %w", err)
		}
	}
	if offer.PriceID != "" && s.deps.Payments != nil {
		org, err := s.deps.Organizations.Organization(ctx, orgID)
		if err != nil {
			return ports.BillingSubscription{}, fmt.Errorf("billing: organization: %w", err)
		}
		if paidBy != "" {
			return s.changePlan(ctx, org, paidBy, offer)
		}
		co, err := s.deps.Payments.Checkout(ctx, org.ID, offer)
		if err != nil {
			return ports.BillingSubscription{}, fmt.Errorf("billing: checkout: %w", err)
		}
		// The checkout is recorded for this organization and plan: its completion is matched to them, not
		// to what the provider's notification says alone.
		if err := s.deps.Store.StartCheckout(ctx, org.ID, co.ID, offer.ID, s.deps.Clock.Now()); err != nil {
			return ports.BillingSubscription{}, fmt.Errorf("billing: recording the checkout: %w", err)
		}
		sub, err := s.report(ctx, org)
		sub.CheckoutURL = co.URL
		return sub, err
	}
	if paidBy != "" {
		// The customer leaves the paid plan now, so the subscription ends now: the limits fall to the new
		// plan's at once, and the provider credits the rest of the period. Cancelled before the plan is
		// recorded: if the cancellation fails nothing changed, and if recording fails after it, the
		// provider's notification of the end still moves the organization to the free plan.
		if err := s.deps.Payments.CancelSubscription(ctx, orgID, paidBy); err != nil {
			return ports.BillingSubscription{}, fmt.Errorf("billing: cancelling the paid subscription: %w", err)
		}
	}
	org, err := s.deps.Store.SubscribePlan(ctx, orgID, offer.ID, offer.Plan, s.deps.Clock.Now())
	if err != nil {
		return ports.BillingSubscription{}, fmt.Errorf("billing: subscribe: %w", err)
	}
	s.announce(org.ID)
	return s.report(ctx, org)
}

// changePlan moves an organization paying through the provider's subscription subID to another priced
// plan inside that subscription. The change is recorded before the provider is asked, so whichever
// confirms it (the provider's answer here, or its notification later, for instance when the call timed out
// after the provider made the change) finds it; the plan applies once, from this record. The provider's
// answer, to Postmill's own authenticated call, is as much a confirmation as its signed notification: when
// it shows the subscription on the new price the plan applies at once, so the answer already carries the
// new limits. When the provider holds the change until the customer pays the difference, the answer still
// shows the plan as it was, and the notification applies the new one.
func (s *Service) changePlan(ctx context.Context, org ports.Organization, subID string, offer ports.PlanOffer) (ports.BillingSubscription, error) {
	if err := s.deps.Store.StartPlanChange(ctx, org.ID, subID, offer.ID, offer.PriceID); err != nil {
		return ports.BillingSubscription{}, fmt.Errorf("billing: recording the plan change: %w", err)
	}
	ch, err := s.deps.Payments.ChangePlan(ctx, org.ID, subID, offer)
	if err != nil {
		return ports.BillingSubscription{}, fmt.Errorf("billing: changing the paid subscription: %w", err)
	}
	if ch.Confirmed {
		applied, outcome, err := s.deps.Store.ApplyPayment(ctx, ports.PaymentApplication{
			OrganizationID: org.ID, SubscriptionID: subID, PriceID: offer.PriceID, PlanID: offer.ID, Plan: offer.Plan,
			Now: s.deps.Clock.Now(),
		})
		if err != nil {
			return ports.BillingSubscription{}, fmt.Errorf("billing: applying the plan change: %w", err)
		}
		if outcome == ports.PaymentApplied {
			org = applied
			s.announce(org.ID)
		} else if org, err = s.deps.Organizations.Organization(ctx, org.ID); err != nil {
			// Ignored: the notification applied it first, or another subscribe replaced it meanwhile.
			return ports.BillingSubscription{}, fmt.Errorf("billing: organization: %w", err)
		}
	}
	return s.report(ctx, org)
}

// announce tells this process's send path, and the change feed's other listeners, of the organization's
// new limits.
func (s *Service) announce(orgID string) {
	if s.deps.Changes != nil {
		s.deps.Changes.Publish(ports.Change{Kind: ports.ChangeOrganization, OrganizationID: orgID})
	}
}

// PaymentWebhook takes a provider notification. The provider verifies its signature; the core then
// believes the organization it names only together with a checkout (or paid subscription) recorded for that
// organization, so a notification about one organization's payment can never change another's plan. A
// completed checkout records the plan it was started for; a subscription updated onto the price of the plan
// change recorded for it (changePlan) records that plan; a subscription that ended moves the organization
// back to the free plan if it is still on that subscription. The provider's event id is recorded with the
// change, in one transaction, so a replay changes nothing. Every other event, and one naming nothing
// recorded, is ignored (the provider is still told it arrived, so it stops retrying).
func (s *Service) PaymentWebhook(ctx context.Context, payload []byte, signature string) (ports.PaymentWebhookResult, error) {
	if s.deps.Payments == nil {
		return ports.PaymentWebhookResult{}, ports.NotFound("No payment provider is configured")
	}
	ev, err := s.deps.Payments.ParseEvent(payload, signature)
	if err != nil {
		return ports.PaymentWebhookResult{}, err
	}
	res := ports.PaymentWebhookResult{EventID: ev.ID, Outcome: ports.PaymentIgnored}
	app := ports.PaymentApplication{
		OrganizationID: ev.OrganizationID, EventID: ev.ID, SubscriptionID: ev.SubscriptionID, Now: s.deps.Clock.Now(),
	}
	switch ev.Type {
	case ports.PaymentCheckoutCompleted:
		if ev.OrganizationID == "" || ev.CheckoutID == "" {
			return res, nil
		}
		planID, err := s.deps.Store.CheckoutPlan(ctx, ev.OrganizationID, ev.CheckoutID)
		if ports.ErrorCode(err) == ports.CodeNotFound {
			return res, nil
		}
		if err != nil {
			return ports.PaymentWebhookResult{}, fmt.Errorf("billing: checkout: %w", err)
		}
		offer, ok := s.byID[planID]
		if !ok {
			// The operator removed the plan after the checkout started: there are no limits to apply.
			return ports.PaymentWebhookResult{}, fmt.Errorf("billing: checkout %s paid for plan %q, which the catalogue no longer has", ev.CheckoutID, planID)
		}
		app.CheckoutID, app.PlanID, app.Plan = ev.CheckoutID, offer.ID, offer.Plan
	case ports.PaymentSubscriptionUpdated:
		if ev.OrganizationID == "" || ev.SubscriptionID == "" || ev.PriceID == "" {
			return res, nil
		}
		app.PriceID = ev.PriceID
		planID, priceID, err := s.deps.Store.PendingPlanChange(ctx, ev.OrganizationID, ev.SubscriptionID)
		if err != nil && ports.ErrorCode(err) != ports.CodeNotFound {
			return ports.PaymentWebhookResult{}, fmt.Errorf("billing: plan change: %w", err)
		}
		// Any other update of the subscription (a renewal, the price before the change, a change already
		// applied) goes to the store without a plan: it records the event and changes nothing, so a replay
		// of it can never confirm a later change to the same price.
		if err == nil && priceID == ev.PriceID {
			offer, ok := s.byID[planID]
			if !ok {
				return ports.PaymentWebhookResult{}, fmt.Errorf("billing: subscription %s moved to plan %q, which the catalogue no longer has", ev.SubscriptionID, planID)
			}
			app.PlanID, app.Plan = offer.ID, offer.Plan
		}
	case ports.PaymentSubscriptionEnded:
		if ev.OrganizationID == "" || ev.SubscriptionID == "" {
			return res, nil
		}
		free := s.byID[ports.DefaultPlanID]
		app.Ended, app.PlanID, app.Plan = true, free.ID, free.Plan
	default:
		return res, nil
	}
	org, outcome, err := s.deps.Store.ApplyPayment(ctx, app)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return res, nil
	}
	if err != nil {
		return ports.PaymentWebhookResult{}, fmt.Errorf("billing: applying a payment: %w", err)
	}
	if outcome == ports.PaymentApplied {
		s.announce(org.ID)
	}
	res.Outcome = outcome
	return res, nil
}

func (s *Service) planIDs() string {
	ids := make([]string, 0, len(s.plans))
	for _, p := range s.plans {
		ids = append(ids, p.ID)
	}
	return strings.Join(ids, ", ")
}

func (s *Service) report(ctx context.Context, org ports.Organization) (ports.BillingSubscription, error) {
	planID, pending, err := s.deps.Store.SubscribedPlan(ctx, org.ID)
	if err != nil {
		return ports.BillingSubscription{}, fmt.Errorf("billing: subscribed plan: %w", err)
	}
	if planID == "" {
		planID = ports.DefaultPlanID
	}
	name := planID
	if offer, ok := s.byID[planID]; ok {
		name = offer.Name
	}
	start, end := Period(s.deps.Clock.Now())
	sent, err := s.deps.Organizations.Usage(ctx, org.ID, ports.MetricEmailsSent, start)
	if err != nil {
		return ports.BillingSubscription{}, fmt.Errorf("billing: usage: %w", err)
	}
	return ports.BillingSubscription{
		OrganizationID: org.ID, PlanID: planID, PlanName: name, Plan: org.Plan,
		PeriodStart: start, PeriodEnd: end, EmailsSent: sent, PendingPlanID: pending,
	}, nil
}

// Period returns the UTC calendar month containing now: [first of the month 00:00Z, first of the next).
func Period(now time.Time) (start, end time.Time) {
	now = now.UTC()
	start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0)
}
