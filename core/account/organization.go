package account

import (
	"context"
	"fmt"
	"time"

	"github.com/postmill/postmill/ports"
)

// GetOrganization returns one organization. Errors: not_found.
func (s *Service) GetOrganization(ctx context.Context, orgID string) (ports.Organization, error) {
	org, err := s.orgs.Organization(ctx, orgID)
	if err != nil {
		return ports.Organization{}, fmt.Errorf("account: organization: %w", err)
	}
	return org, nil
}

// ListOrganizations returns every organization, newest first. Only admin routes reach it.
func (s *Service) ListOrganizations(ctx context.Context) ([]ports.Organization, error) {
	orgs, err := s.orgs.ListOrganizations(ctx)
	if err != nil {
		return nil, fmt.Errorf("account: list organizations: %w", err)
	}
	return orgs, nil
}

// SetPaused pauses or resumes an organization's sending: new sends are refused (403), and mail already
// accepted is held at delivery until the organization is resumed. The change is published so that the
// very next send, in this process and (through the store) in the others, sees it.
func (s *Service) SetPaused(ctx context.Context, orgID string, paused bool) (ports.Organization, error) {
	org, err := s.orgs.SetOrganizationPaused(ctx, orgID, paused)
	if err != nil {
		return ports.Organization{}, fmt.Errorf("account: set paused: %w", err)
	}
	s.organizationChanged(org.ID)
	return org, nil
}

// SetPlan replaces an organization's monthly allowance and daily warm-up cap; zero means no limit.
func (s *Service) SetPlan(ctx context.Context, orgID string, plan ports.Plan) (ports.Organization, error) {
	var violations []ports.FieldViolation
	if plan.MonthlyLimit < 0 {
		violations = append(violations, ports.FieldViolation{Path: "monthlyLimit", Message: "must not be negative"})
	}
	if plan.WarmupCap < 0 {
		violations = append(violations, ports.FieldViolation{Path: "warmupCap", Message: "must not be negative"})
	}
	if len(violations) > 0 {
		return ports.Organization{}, ports.ValidationError(violations...)
	}
	org, err := s.orgs.SetOrganizationPlan(ctx, orgID, plan)
	if err != nil {
		return ports.Organization{}, fmt.Errorf("account: set plan: %w", err)
	}
	s.organizationChanged(org.ID)
	return org, nil
}

// organizationChanged tells this process's holders of organizations (the send path's cache) that orgID
// changed; the store tells the other processes.
func (s *Service) organizationChanged(orgID string) {
	if s.changes != nil {
		s.changes.Publish(ports.Change{Kind: ports.ChangeOrganization, OrganizationID: orgID})
	}
}

// Subscription reports the plan and the emails sent in the current billing period, the calendar month in UTC
// (the period the monthly allowance is metered over).
func (s *Service) Subscription(ctx context.Context, orgID string) (ports.Subscription, error) {
	org, err := s.orgs.Organization(ctx, orgID)
	if err != nil {
		return ports.Subscription{}, fmt.Errorf("account: organization: %w", err)
	}
	start, end := billingPeriod(s.now())
	sent, err := s.orgs.Usage(ctx, orgID, ports.MetricEmailsSent, start)
	if err != nil {
		return ports.Subscription{}, fmt.Errorf("account: usage: %w", err)
	}
	return ports.Subscription{
		OrganizationID: org.ID,
		Plan:           org.Plan,
		PeriodStart:    start,
		PeriodEnd:      end,
		EmailsSent:     sent,
	}, nil
}

// billingPeriod returns the UTC calendar month containing now: [first of the month 00:00Z, first of the next).
func billingPeriod(now time.Time) (start, end time.Time) {
	now = now.UTC()
	start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0)
}
