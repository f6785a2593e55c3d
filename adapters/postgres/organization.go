package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.OrganizationStore = (*Organizations)(nil)

// Organizations is the PostgreSQL store of organizations, their plans and usage meters
// (ports.OrganizationStore). Safe for concurrent use.
type Organizations struct{ shared }

// Organization implements ports.OrganizationStore.
func (s *Organizations) Organization(ctx context.Context, orgID string) (ports.Organization, error) {
	row, err := s.queries.OrganizationByID(ctx, orgID)
	if err != nil {
		return ports.Organization{}, interpretErrorFor("organization", err)
	}
	return organizationFromRow(row), nil
}

// ListOrganizations implements ports.OrganizationStore: newest first, ties broken by id so that the
// order is stable across calls.
func (s *Organizations) ListOrganizations(ctx context.Context) ([]ports.Organization, error) {
	rows, err := s.queries.ListOrganizations(ctx)
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]ports.Organization, 0, len(rows))
	for _, r := range rows {
		out = append(out, organizationFromRow(r))
	}
	return out, nil
}

// SetOrganizationPaused implements ports.OrganizationStore and returns the organization as it now is.
func (s *Organizations) SetOrganizationPaused(ctx context.Context, orgID string, paused bool) (ports.Organization, error) {
	row, err := s.queries.SetOrganizationPaused(ctx, db.SetOrganizationPausedParams{ID: orgID, Paused: paused})
	if err != nil {
		return ports.Organization{}, interpretErrorFor("organization", err)
	}
	return organizationFromRow(row), nil
}

// SetOrganizationPlan implements ports.OrganizationStore and returns the organization as it now is. The
// caller validates the plan; negative limits violate a check constraint and come back as internal.
func (s *Organizations) SetOrganizationPlan(ctx context.Context, orgID string, plan ports.Plan) (ports.Organization, error) {
	row, err := s.queries.SetOrganizationPlan(ctx, db.SetOrganizationPlanParams{
		ID:           orgID,
		MonthlyLimit: plan.MonthlyLimit,
		WarmupCap:    plan.WarmupCap,
	})
	if err != nil {
		return ports.Organization{}, interpretErrorFor("organization", err)
	}
	return organizationFromRow(row), nil
}

// Usage implements ports.OrganizationStore. The period is a calendar date: its year, month and day are
// taken as written in periodStart's own location, so the caller decides in which zone periods begin.
// An unmetered period, or an unknown organization, is 0.
func (s *Organizations) Usage(ctx context.Context, orgID, metric string, periodStart time.Time) (int64, error) {
	y, m, d := periodStart.Date()
	v, err := s.queries.Usage(ctx, db.UsageParams{
		OrganizationID: orgID,
		Metric:         metric,
		PeriodStart:    time.Date(y, m, d, 0, 0, 0, 0, time.UTC),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err := listError(err); err != nil {
		return 0, err
	}
	return v, nil
}

func organizationFromRow(r db.Organization) ports.Organization {
	return ports.Organization{
		ID:        r.ID,
		Name:      r.Name,
		Slug:      r.Slug,
		CreatedAt: r.CreatedAt.UTC(),
		Paused:    r.Paused,
		Plan:      ports.Plan{MonthlyLimit: r.MonthlyLimit, WarmupCap: r.WarmupCap},
	}
}
