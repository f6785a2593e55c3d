package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// planResponse renders the core's "zero means none" as null, the way ARCHITECTURE fixes the shape.
type planResponse struct {
	MonthlyLimit *int64 `json:"monthlyLimit" doc:"Emails per calendar month; null means no limit"`
	WarmupCap    *int64 `json:"warmupCap" doc:"Emails per day while warming up; null means no cap"`
}

type organizationResponse struct {
	ID        string       `json:"id" format:"uuid" doc:"Organization id"`
	Name      string       `json:"name" doc:"Display name"`
	Slug      string       `json:"slug" doc:"URL-safe name, unique across the platform"`
	CreatedAt time.Time    `json:"createdAt" doc:"When the organization was created"`
	Paused    bool         `json:"paused" doc:"A paused organization may not send (403 org_suspended)"`
	Plan      planResponse `json:"plan" doc:"Sending limits"`
	// Automatic protection's pause of broadcasts (edge/reputation.go).
	protectionResponse
}

type setLimitsRequest struct {
	_            struct{} `json:"-" additionalProperties:"true"`
	MonthlyLimit *int64   `json:"monthlyLimit,omitempty" required:"false" nullable:"true" minimum:"0" doc:"null or 0 means no limit"`
	WarmupCap    *int64   `json:"warmupCap,omitempty" required:"false" nullable:"true" minimum:"0" doc:"null or 0 means no cap"`
}

type setLimitsInput struct {
	ID   string `path:"id" format:"uuid" doc:"Organization id"`
	Body setLimitsRequest
}

type usageResponse struct {
	EmailsSent int64 `json:"emailsSent" doc:"Emails counted against the monthly allowance in this period"`
}

type subscriptionResponse struct {
	Plan        planResponse  `json:"plan" doc:"Sending limits"`
	PeriodStart time.Time     `json:"periodStart" doc:"Start of the current period: the first of this month, 00:00 UTC"`
	PeriodEnd   time.Time     `json:"periodEnd" doc:"End of the period (exclusive): the first of next month, 00:00 UTC"`
	Usage       usageResponse `json:"usage" doc:"Usage in the period"`
}

func (s *Server) registerOrganizationRoutes() {
	register(s, huma.Operation{
		OperationID: "get-organization", Method: http.MethodGet, Path: "/v1/organization",
		Tags: []string{tagOrganization}, Summary: "Get the organization",
		Description: "The organization the session token is scoped to.",
	}, access{kind: authSession}, s.getOrganization, http.StatusNotFound)

	admin := access{kind: authAdmin}
	register(s, huma.Operation{
		OperationID: "admin-list-organizations", Method: http.MethodGet, Path: "/v1/admin/organizations",
		Tags: []string{tagAdmin}, Summary: "List organizations",
		Description: "Every organization, newest first.",
	}, admin, s.listOrganizations)

	register(s, huma.Operation{
		OperationID: "admin-pause-organization", Method: http.MethodPost, Path: "/v1/admin/organizations/{id}/pause",
		Tags: []string{tagAdmin}, Summary: "Pause an organization's sending",
	}, admin, s.pauseOrganization, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "admin-resume-organization", Method: http.MethodPost, Path: "/v1/admin/organizations/{id}/resume",
		Tags: []string{tagAdmin}, Summary: "Resume an organization's sending",
	}, admin, s.resumeOrganization, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "admin-set-organization-limits", Method: http.MethodPut, Path: "/v1/admin/organizations/{id}/limits",
		Tags: []string{tagAdmin}, Summary: "Set an organization's plan limits",
		Description: "Replaces the monthly allowance and the daily warm-up cap; null, 0 or an absent field means none.",
	}, admin, s.setOrganizationLimits, http.StatusBadRequest, http.StatusNotFound)

	if s.core.Billing != nil {
		return // registerBillingRoutes serves the subscription
	}
	register(s, huma.Operation{
		OperationID: "get-billing-subscription", Method: http.MethodGet, Path: "/v1/billing/subscription",
		Tags: []string{tagBilling}, Summary: "Get the subscription",
		Description: "The plan and this calendar month's usage.",
	}, access{kind: authKey, scopes: []string{ports.ScopeBillingRead}}, s.getSubscription, http.StatusNotFound)
}

func toPlan(p ports.Plan) planResponse {
	return planResponse{MonthlyLimit: noneIfZero(p.MonthlyLimit), WarmupCap: noneIfZero(p.WarmupCap)}
}

func noneIfZero(v int64) *int64 {
	if v <= 0 {
		return nil
	}
	return &v
}

func toOrganization(o ports.Organization) organizationResponse {
	return organizationResponse{
		ID:        o.ID,
		Name:      o.Name,
		Slug:      o.Slug,
		CreatedAt: utc(o.CreatedAt),
		Paused:    o.Paused,
		Plan:      toPlan(o.Plan),
	}
}

func (s *Server) getOrganization(ctx context.Context, _ *struct{}) (*body[organizationResponse], error) {
	o, err := s.core.Organizations.GetOrganization(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	out := toOrganization(o)
	if out.protectionResponse, err = s.organizationProtection(ctx, o.ID); err != nil {
		return nil, err
	}
	return &body[organizationResponse]{out}, nil
}

func (s *Server) listOrganizations(ctx context.Context, _ *struct{}) (*body[[]organizationResponse], error) {
	orgs, err := s.core.Organizations.ListOrganizations(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]organizationResponse, 0, len(orgs))
	for _, o := range orgs {
		r := toOrganization(o)
		if r.protectionResponse, err = s.organizationProtection(ctx, o.ID); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return &body[[]organizationResponse]{out}, nil
}

func (s *Server) pauseOrganization(ctx context.Context, in *idPath) (*body[organizationResponse], error) {
	return s.setPaused(ctx, in.ID, true)
}

func (s *Server) resumeOrganization(ctx context.Context, in *idPath) (*body[organizationResponse], error) {
	return s.setPaused(ctx, in.ID, false)
}

func (s *Server) setPaused(ctx context.Context, id string, paused bool) (*body[organizationResponse], error) {
	o, err := s.core.Organizations.SetPaused(ctx, canonicalUUID(id), paused)
	if err != nil {
		return nil, err
	}
	return &body[organizationResponse]{toOrganization(o)}, nil
}

func (s *Server) setOrganizationLimits(ctx context.Context, in *setLimitsInput) (*body[organizationResponse], error) {
	var plan ports.Plan
	if in.Body.MonthlyLimit != nil {
		plan.MonthlyLimit = *in.Body.MonthlyLimit
	}
	if in.Body.WarmupCap != nil {
		plan.WarmupCap = *in.Body.WarmupCap
	}
	o, err := s.core.Organizations.SetPlan(ctx, canonicalUUID(in.ID), plan)
	if err != nil {
		return nil, err
	}
	return &body[organizationResponse]{toOrganization(o)}, nil
}

func (s *Server) getSubscription(ctx context.Context, _ *struct{}) (*body[subscriptionResponse], error) {
	sub, err := s.core.Organizations.Subscription(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	return &body[subscriptionResponse]{subscriptionResponse{
		Plan:        toPlan(sub.Plan),
		PeriodStart: utc(sub.PeriodStart),
		PeriodEnd:   utc(sub.PeriodEnd),
		Usage:       usageResponse{EmailsSent: sub.EmailsSent},
	}}, nil
}
