package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.BillingStore = (*Billing)(nil)

// Billing is the PostgreSQL store of subscriptions (ports.BillingStore). Safe for concurrent use.
type Billing struct{ shared }

// SubscribedPlan implements ports.BillingStore: "" when the organization never subscribed.
func (s *Billing) SubscribedPlan(ctx context.Context, orgID string) (string, error) {
	id, err := s.queries.SubscribedPlan(ctx, orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", interpretError(err)
	}
	return id, nil
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
