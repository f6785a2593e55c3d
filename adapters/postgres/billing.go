package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.BillingStore = (*Billing)(nil)

// Billing is the PostgreSQL store of subscriptions (ports.BillingStore). Safe for concurrent use.
type Billing struct{ shared }

// SubscribedPlan implements ports.BillingStore: "" when the organization never subscribed.
func (s *Billing) SubscribedPlan(ctx context.Context, orgID string) (string, string, error) {
	row, err := s.queries.SubscribedPlan(ctx, orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", interpretError(err)
	}
	return row.PlanID, row.PendingPlanID, nil
}

// SubscribePlan implements ports.BillingStore: the organization's limits and the plan id change in one
// transaction, so a reader never sees the new plan with the old limits. The limits' update is announced to
// every process by the trigger on organizations.
func (s *Billing) SubscribePlan(ctx context.Context, orgID, planID string, plan ports.Plan, now time.Time) (ports.Organization, error) {
	var org ports.Organization
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		row, err := q.SetOrganizationPlan(ctx, db.SetOrganizationPlanParams{
			ID: orgID, MonthlyLimit: plan.MonthlyLimit, WarmupCap: plan.WarmupCap,
		})
		if err != nil {
			return err
		}
		org = organizationFromRow(row)
		return q.UpsertSubscribedPlan(ctx, db.UpsertSubscribedPlanParams{OrganizationID: orgID, PlanID: planID, UpdatedAt: now})
	})
	if err != nil {
		return ports.Organization{}, interpretErrorFor("organization", err)
	}
	return org, nil
}

// StartCheckout implements ports.BillingStore. Starting the same checkout again (a provider answering the
// same id) re-points it at the new plan until it completes.
func (s *Billing) StartCheckout(ctx context.Context, orgID, checkoutID, planID string, now time.Time) error {
	err := s.queries.InsertBillingCheckout(ctx, db.InsertBillingCheckoutParams{
		OrganizationID: orgID, CheckoutID: checkoutID, PlanID: planID, CreatedAt: now,
	})
	return billingOrgError(err)
}

// billingOrgError is interpretErrorFor("organization") for writes whose only reference is the organization:
// a missing one is not_found rather than a broken reference.
func billingOrgError(err error) error {
	err = interpretErrorFor("organization", err)
	var pe *ports.Error
	if errors.As(err, &pe) && pe.Constraint != "" && pe.Code == ports.CodeInvalidArgument {
		return ports.NotFound("organization not found")
	}
	return err
}

// CheckoutPlan implements ports.BillingStore: only a checkout this organization started is found.
func (s *Billing) CheckoutPlan(ctx context.Context, orgID, checkoutID string) (string, error) {
	plan, err := s.queries.BillingCheckoutPlan(ctx, db.BillingCheckoutPlanParams{OrganizationID: orgID, CheckoutID: checkoutID})
	if err != nil {
		return "", interpretErrorFor("checkout", err)
	}
	return plan, nil
}

// PaidSubscription implements ports.BillingStore.
func (s *Billing) PaidSubscription(ctx context.Context, orgID string) (string, error) {
	id, err := s.queries.PaidSubscription(ctx, orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", interpretError(err)
	}
	return id.String, nil
}

// StartPlanChange implements ports.BillingStore: the change is written on the organization's subscription
// row only while that row is paid by subscriptionID.
func (s *Billing) StartPlanChange(ctx context.Context, orgID, subscriptionID, planID, priceID string) error {
	n, err := s.queries.StartPlanChange(ctx, db.StartPlanChangeParams{
		OrganizationID: orgID, PaymentSubscriptionID: text(subscriptionID),
		PendingPlanID: text(planID), PendingPriceID: text(priceID),
	})
	if err != nil {
		return interpretError(err)
	}
	if n == 0 {
		return ports.NotFound("paid subscription not found")
	}
	return nil
}

// PendingPlanChange implements ports.BillingStore.
func (s *Billing) PendingPlanChange(ctx context.Context, orgID, subscriptionID string) (string, string, error) {
	row, err := s.queries.PendingPlanChange(ctx, db.PendingPlanChangeParams{OrganizationID: orgID, PaymentSubscriptionID: text(subscriptionID)})
	if err != nil {
		return "", "", interpretErrorFor("plan change", err)
	}
	return row.PlanID, row.PriceID, nil
}

func text(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

// ApplyPayment implements ports.BillingStore. The event's row is the idempotency key: a concurrent replay
// waits on the first one's insert and then finds it, so an event changes the plan once whatever the
// interleaving. A checkout completes once: a second event completing it (Stripe sends both
// checkout.session.completed and async_payment_succeeded for some payment methods) is ignored. An ended subscription locks the subscription row it names, so a checkout completing at
// the same time either precedes it (and is ended) or follows it (and stands). A plan change completes the
// change recorded on the subscription row, conditionally on it being the one confirmed, so of the answer to
// the update and the notification (or two notifications) exactly one applies it, and a change replaced or
// cleared since (another plan asked for, a new checkout, the end of the subscription) is not applied.
func (s *Billing) ApplyPayment(ctx context.Context, p ports.PaymentApplication) (ports.Organization, ports.PaymentOutcome, error) {
	var org ports.Organization
	outcome := ports.PaymentApplied
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		change := !p.Ended && p.CheckoutID == "" && p.PriceID != ""
		// A change confirmed by the provider's answer has no event: its own completion is its idempotency.
		if p.EventID != "" || !change {
			n, err := q.InsertPaymentEvent(ctx, db.InsertPaymentEventParams{OrganizationID: p.OrganizationID, EventID: p.EventID, ReceivedAt: p.Now})
			if err != nil {
				return err
			}
			if n == 0 {
				outcome = ports.PaymentDuplicate
				return nil
			}
		}
		var paidBy pgtype.Text
		switch {
		case p.Ended:
			if _, err := q.LockPaidSubscription(ctx, db.LockPaidSubscriptionParams{
				OrganizationID: p.OrganizationID, PaymentSubscriptionID: pgtype.Text{String: p.SubscriptionID, Valid: true},
			}); errors.Is(err, pgx.ErrNoRows) {
				outcome = ports.PaymentIgnored
				return nil
			} else if err != nil {
				return err
			}
		case change:
			paidBy = text(p.SubscriptionID)
			n, err := q.CompletePlanChange(ctx, db.CompletePlanChangeParams{
				OrganizationID: p.OrganizationID, PaymentSubscriptionID: paidBy,
				PendingPlanID: text(p.PlanID), PendingPriceID: text(p.PriceID),
			})
			if err != nil {
				return err
			}
			if n == 0 {
				outcome = ports.PaymentIgnored
				return nil
			}
		default:
			paidBy = text(p.SubscriptionID)
			n, err := q.CompleteBillingCheckout(ctx, db.CompleteBillingCheckoutParams{
				OrganizationID: p.OrganizationID, CheckoutID: p.CheckoutID, CompletedAt: &p.Now, SubscriptionID: paidBy,
			})
			if err != nil {
				return err
			}
			if n == 0 {
				outcome = ports.PaymentIgnored
				return nil
			}
		}
		row, err := q.SetOrganizationPlan(ctx, db.SetOrganizationPlanParams{
			ID: p.OrganizationID, MonthlyLimit: p.Plan.MonthlyLimit, WarmupCap: p.Plan.WarmupCap,
		})
		if err != nil {
			return err
		}
		org = organizationFromRow(row)
		return q.UpsertSubscribedPlan(ctx, db.UpsertSubscribedPlanParams{
			OrganizationID: p.OrganizationID, PlanID: p.PlanID, UpdatedAt: p.Now, PaymentSubscriptionID: paidBy,
		})
	})
	if err != nil {
		return ports.Organization{}, "", billingOrgError(err)
	}
	return org, outcome, nil
}
