package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	organizationv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/organization/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/organization/v1/organizationv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.OrganizationService { return &c.Organizations },
		organizationv1connect.NewOrganizationServiceHandler, newOrganizationServer,
		organizationv1connect.NewOrganizationServiceClient, newOrganizationClient).
		calledBy(organizationv1connect.OrganizationServiceName, TierEdge))
}

// organizationServer serves postmill.organization.v1.OrganizationService from a
// ports.OrganizationService.
type organizationServer struct {
	svc ports.OrganizationService
	log *slog.Logger
}

func newOrganizationServer(svc ports.OrganizationService, log *slog.Logger) organizationv1connect.OrganizationServiceHandler {
	return &organizationServer{svc: svc, log: log}
}

func (s *organizationServer) GetOrganization(ctx context.Context, req *connect.Request[organizationv1.GetOrganizationRequest]) (*connect.Response[organizationv1.GetOrganizationResponse], error) {
	o, err := s.svc.GetOrganization(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *organizationv1.GetOrganizationResponse {
		return &organizationv1.GetOrganizationResponse{Organization: organizationToProto(o)}
	})
}

func (s *organizationServer) ListOrganizations(ctx context.Context, req *connect.Request[organizationv1.ListOrganizationsRequest]) (*connect.Response[organizationv1.ListOrganizationsResponse], error) {
	orgs, err := s.svc.ListOrganizations(ctx)
	return respond(ctx, s.log, req, err, func() *organizationv1.ListOrganizationsResponse {
		return &organizationv1.ListOrganizationsResponse{Organizations: organizationsToProto(orgs)}
	})
}

func (s *organizationServer) SetPaused(ctx context.Context, req *connect.Request[organizationv1.SetPausedRequest]) (*connect.Response[organizationv1.SetPausedResponse], error) {
	o, err := s.svc.SetPaused(ctx, req.Msg.GetOrganizationId(), req.Msg.GetPaused())
	return respond(ctx, s.log, req, err, func() *organizationv1.SetPausedResponse {
		return &organizationv1.SetPausedResponse{Organization: organizationToProto(o)}
	})
}

func (s *organizationServer) SetPlan(ctx context.Context, req *connect.Request[organizationv1.SetPlanRequest]) (*connect.Response[organizationv1.SetPlanResponse], error) {
	o, err := s.svc.SetPlan(ctx, req.Msg.GetOrganizationId(), planFromProto(req.Msg.GetPlan()))
	return respond(ctx, s.log, req, err, func() *organizationv1.SetPlanResponse {
		return &organizationv1.SetPlanResponse{Organization: organizationToProto(o)}
	})
}

func (s *organizationServer) Subscription(ctx context.Context, req *connect.Request[organizationv1.SubscriptionRequest]) (*connect.Response[organizationv1.SubscriptionResponse], error) {
	sub, err := s.svc.Subscription(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *organizationv1.SubscriptionResponse {
		return &organizationv1.SubscriptionResponse{Subscription: subscriptionToProto(sub)}
	})
}

// organizationClient implements ports.OrganizationService over
// postmill.organization.v1.OrganizationService.
type organizationClient struct {
	conn organizationv1connect.OrganizationServiceClient
}

func newOrganizationClient(conn organizationv1connect.OrganizationServiceClient) ports.OrganizationService {
	return &organizationClient{conn: conn}
}

func (c *organizationClient) GetOrganization(ctx context.Context, orgID string) (ports.Organization, error) {
	return call(ctx, organizationv1connect.OrganizationServiceGetOrganizationProcedure, c.conn.GetOrganization,
		&organizationv1.GetOrganizationRequest{OrganizationId: orgID},
		pick((*organizationv1.GetOrganizationResponse).GetOrganization, organizationFromProto))
}

func (c *organizationClient) ListOrganizations(ctx context.Context) ([]ports.Organization, error) {
	return call(ctx, organizationv1connect.OrganizationServiceListOrganizationsProcedure, c.conn.ListOrganizations,
		&organizationv1.ListOrganizationsRequest{},
		pick((*organizationv1.ListOrganizationsResponse).GetOrganizations, organizationsFromProto))
}

func (c *organizationClient) SetPaused(ctx context.Context, orgID string, paused bool) (ports.Organization, error) {
	return call(ctx, organizationv1connect.OrganizationServiceSetPausedProcedure, c.conn.SetPaused,
		&organizationv1.SetPausedRequest{OrganizationId: orgID, Paused: paused},
		pick((*organizationv1.SetPausedResponse).GetOrganization, organizationFromProto))
}

func (c *organizationClient) SetPlan(ctx context.Context, orgID string, plan ports.Plan) (ports.Organization, error) {
	return call(ctx, organizationv1connect.OrganizationServiceSetPlanProcedure, c.conn.SetPlan,
		&organizationv1.SetPlanRequest{OrganizationId: orgID, Plan: planToProto(plan)},
		pick((*organizationv1.SetPlanResponse).GetOrganization, organizationFromProto))
}

func (c *organizationClient) Subscription(ctx context.Context, orgID string) (ports.Subscription, error) {
	return call(ctx, organizationv1connect.OrganizationServiceSubscriptionProcedure, c.conn.Subscription,
		&organizationv1.SubscriptionRequest{OrganizationId: orgID},
		pick((*organizationv1.SubscriptionResponse).GetSubscription, subscriptionFromProto))
}

func planToProto(p ports.Plan) *organizationv1.Plan {
	return &organizationv1.Plan{MonthlyLimit: p.MonthlyLimit, WarmupCap: p.WarmupCap}
}

func planFromProto(p *organizationv1.Plan) ports.Plan {
	return ports.Plan{MonthlyLimit: p.GetMonthlyLimit(), WarmupCap: p.GetWarmupCap()}
}

func organizationToProto(o ports.Organization) *organizationv1.Organization {
	return &organizationv1.Organization{
		Id:        o.ID,
		Name:      o.Name,
		Slug:      o.Slug,
		CreatedAt: timeToProto(o.CreatedAt),
		Paused:    o.Paused,
		Plan:      planToProto(o.Plan),
	}
}

func organizationFromProto(o *organizationv1.Organization) ports.Organization {
	return ports.Organization{
		ID:        o.GetId(),
		Name:      o.GetName(),
		Slug:      o.GetSlug(),
		CreatedAt: timeFromProto(o.GetCreatedAt()),
		Paused:    o.GetPaused(),
		Plan:      planFromProto(o.GetPlan()),
	}
}

func organizationsToProto(orgs []ports.Organization) *organizationv1.OrganizationList {
	if orgs == nil {
		return nil
	}
	return &organizationv1.OrganizationList{Items: mapItems(orgs, organizationToProto)}
}

func organizationsFromProto(l *organizationv1.OrganizationList) []ports.Organization {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), organizationFromProto)
}

func subscriptionToProto(s ports.Subscription) *organizationv1.Subscription {
	return &organizationv1.Subscription{
		OrganizationId: s.OrganizationID,
		Plan:           planToProto(s.Plan),
		PeriodStart:    timeToProto(s.PeriodStart),
		PeriodEnd:      timeToProto(s.PeriodEnd),
		EmailsSent:     s.EmailsSent,
	}
}

func subscriptionFromProto(s *organizationv1.Subscription) ports.Subscription {
	return ports.Subscription{
		OrganizationID: s.GetOrganizationId(),
		Plan:           planFromProto(s.GetPlan()),
		PeriodStart:    timeFromProto(s.GetPeriodStart()),
		PeriodEnd:      timeFromProto(s.GetPeriodEnd()),
		EmailsSent:     s.GetEmailsSent(),
	}
}
