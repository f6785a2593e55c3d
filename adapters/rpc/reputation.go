package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	reputationv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/reputation/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/reputation/v1/reputationv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.ReputationService { return &c.Reputation },
		reputationv1connect.NewReputationServiceHandler, newReputationServer,
		reputationv1connect.NewReputationServiceClient, newReputationClient).
		calledBy(reputationv1connect.ReputationServiceName, TierEdge))
}

// reputationServer serves postmill.reputation.v1.ReputationService from a ports.ReputationService.
type reputationServer struct {
	svc ports.ReputationService
	log *slog.Logger
}

func newReputationServer(svc ports.ReputationService, log *slog.Logger) reputationv1connect.ReputationServiceHandler {
	return &reputationServer{svc: svc, log: log}
}

func (s *reputationServer) Reputation(ctx context.Context, req *connect.Request[reputationv1.ReputationRequest]) (*connect.Response[reputationv1.ReputationResponse], error) {
	r, err := s.svc.Reputation(ctx, req.Msg.GetOrganizationId(), int(req.Msg.GetDays()))
	return respond(ctx, s.log, req, err, func() *reputationv1.ReputationResponse {
		return &reputationv1.ReputationResponse{Reputation: reputationToProto(r)}
	})
}

func (s *reputationServer) Protection(ctx context.Context, req *connect.Request[reputationv1.ProtectionRequest]) (*connect.Response[reputationv1.ProtectionResponse], error) {
	p, err := s.svc.Protection(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *reputationv1.ProtectionResponse {
		return &reputationv1.ProtectionResponse{Protection: protectionToProto(p)}
	})
}

func (s *reputationServer) ResumeBroadcasts(ctx context.Context, req *connect.Request[reputationv1.ResumeBroadcastsRequest]) (*connect.Response[reputationv1.ResumeBroadcastsResponse], error) {
	p, err := s.svc.ResumeBroadcasts(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *reputationv1.ResumeBroadcastsResponse {
		return &reputationv1.ResumeBroadcastsResponse{Protection: protectionToProto(p)}
	})
}

func (s *reputationServer) PlatformView(ctx context.Context, req *connect.Request[reputationv1.PlatformViewRequest]) (*connect.Response[reputationv1.PlatformViewResponse], error) {
	v, err := s.svc.PlatformView(ctx)
	return respond(ctx, s.log, req, err, func() *reputationv1.PlatformViewResponse {
		return &reputationv1.PlatformViewResponse{Window: durationToProto(v.Window),
			Organizations: mapItems(v.Organizations, adminOrganizationToProto), Queues: mapItems(v.Queues, queueDepthToProto)}
	})
}

// reputationClient implements ports.ReputationService over postmill.reputation.v1.ReputationService.
type reputationClient struct {
	conn reputationv1connect.ReputationServiceClient
}

func newReputationClient(conn reputationv1connect.ReputationServiceClient) ports.ReputationService {
	return &reputationClient{conn: conn}
}

func (c *reputationClient) Reputation(ctx context.Context, orgID string, days int) (ports.Reputation, error) {
	return call(ctx, reputationv1connect.ReputationServiceReputationProcedure, c.conn.Reputation,
		&reputationv1.ReputationRequest{OrganizationId: orgID, Days: int64(days)},
		pick((*reputationv1.ReputationResponse).GetReputation, reputationFromProto))
}

func (c *reputationClient) Protection(ctx context.Context, orgID string) (ports.Protection, error) {
	return call(ctx, reputationv1connect.ReputationServiceProtectionProcedure, c.conn.Protection,
		&reputationv1.ProtectionRequest{OrganizationId: orgID},
		pick((*reputationv1.ProtectionResponse).GetProtection, protectionFromProto))
}

func (c *reputationClient) ResumeBroadcasts(ctx context.Context, orgID string) (ports.Protection, error) {
	return call(ctx, reputationv1connect.ReputationServiceResumeBroadcastsProcedure, c.conn.ResumeBroadcasts,
		&reputationv1.ResumeBroadcastsRequest{OrganizationId: orgID},
		pick((*reputationv1.ResumeBroadcastsResponse).GetProtection, protectionFromProto))
}

func protectionToProto(p ports.Protection) *reputationv1.Protection {
	return &reputationv1.Protection{BroadcastsPaused: p.BroadcastsPaused, Reason: p.Reason, PausedAt: timePtrToProto(p.PausedAt)}
}

func protectionFromProto(p *reputationv1.Protection) ports.Protection {
	return ports.Protection{BroadcastsPaused: p.GetBroadcastsPaused(), Reason: p.GetReason(), PausedAt: timePtrFromProto(p.GetPausedAt())}
}

func reputationDayToProto(d ports.ReputationDay) *reputationv1.Day {
	return &reputationv1.Day{Date: timeToProto(d.Date), Sent: d.Sent, Delivered: d.Delivered,
		HardBounced: d.HardBounced, SoftBounced: d.SoftBounced, Complained: d.Complained}
}

func reputationDayFromProto(d *reputationv1.Day) ports.ReputationDay {
	return ports.ReputationDay{Date: timeFromProto(d.GetDate()), Sent: d.GetSent(), Delivered: d.GetDelivered(),
		HardBounced: d.GetHardBounced(), SoftBounced: d.GetSoftBounced(), Complained: d.GetComplained()}
}

func bounceClassToProto(c ports.BounceClassCount) *reputationv1.BounceClassCount {
	return &reputationv1.BounceClassCount{Domain: c.Domain, Class: c.Class, Count: c.Count}
}

func bounceClassFromProto(c *reputationv1.BounceClassCount) ports.BounceClassCount {
	return ports.BounceClassCount{Domain: c.GetDomain(), Class: c.GetClass(), Count: c.GetCount()}
}

func domainReputationToProto(d ports.DomainReputation) *reputationv1.DomainReputation {
	return &reputationv1.DomainReputation{
		Domain: d.Domain, Days: mapItems(d.Days, reputationDayToProto), Total: reputationDayToProto(d.Total),
		BounceRate: d.BounceRate, ComplaintRate: d.ComplaintRate, Status: d.Status,
		BounceClasses: mapItems(d.BounceClasses, bounceClassToProto),
	}
}

func domainReputationFromProto(d *reputationv1.DomainReputation) ports.DomainReputation {
	return ports.DomainReputation{
		Domain: d.GetDomain(), Days: mapItems(d.GetDays(), reputationDayFromProto), Total: reputationDayFromProto(d.GetTotal()),
		BounceRate: d.GetBounceRate(), ComplaintRate: d.GetComplaintRate(), Status: d.GetStatus(),
		BounceClasses: mapItems(d.GetBounceClasses(), bounceClassFromProto),
	}
}

func reputationToProto(r ports.Reputation) *reputationv1.Reputation {
	t := r.Thresholds
	return &reputationv1.Reputation{
		Days: int64(r.Days), Since: timeToProto(r.Since),
		Thresholds: &reputationv1.Thresholds{ComplaintWarning: t.ComplaintWarning, ComplaintAtRisk: t.ComplaintAtRisk,
			BounceWarning: t.BounceWarning, BounceAtRisk: t.BounceAtRisk, MinVolume: t.MinVolume},
		Domains:    mapItems(r.Domains, domainReputationToProto),
		Protection: protectionToProto(r.Protection),
	}
}

func reputationFromProto(r *reputationv1.Reputation) ports.Reputation {
	t := r.GetThresholds()
	return ports.Reputation{
		Days: int(r.GetDays()), Since: timeFromProto(r.GetSince()),
		Thresholds: ports.ReputationThresholds{ComplaintWarning: t.GetComplaintWarning(), ComplaintAtRisk: t.GetComplaintAtRisk(),
			BounceWarning: t.GetBounceWarning(), BounceAtRisk: t.GetBounceAtRisk(), MinVolume: t.GetMinVolume()},
		Domains:    mapItems(r.GetDomains(), domainReputationFromProto),
		Protection: protectionFromProto(r.GetProtection()),
	}
}

func (c *reputationClient) PlatformView(ctx context.Context) (ports.PlatformView, error) {
	return call(ctx, reputationv1connect.ReputationServicePlatformViewProcedure, c.conn.PlatformView,
		&reputationv1.PlatformViewRequest{}, func(r *reputationv1.PlatformViewResponse) ports.PlatformView {
			return ports.PlatformView{Window: durationFromProto(r.GetWindow()),
				Organizations: mapItems(r.GetOrganizations(), adminOrganizationFromProto), Queues: mapItems(r.GetQueues(), queueDepthFromProto)}
		})
}

func adminOrganizationToProto(o ports.AdminOrganization) *reputationv1.AdminOrganization {
	return &reputationv1.AdminOrganization{
		OrganizationId: o.OrganizationID, Name: o.Name, Sent: o.Sent, Delivered: o.Delivered, HardBounced: o.HardBounced,
		Complained: o.Complained, WarmupCap: o.WarmupCap, Protection: protectionToProto(o.Protection),
		WarmupStepOn: timePtrToProto(o.WarmupStepOn), BounceRate: o.BounceRate, ComplaintRate: o.ComplaintRate, Status: o.Status,
	}
}

func adminOrganizationFromProto(o *reputationv1.AdminOrganization) ports.AdminOrganization {
	return ports.AdminOrganization{
		OrganizationHealth: ports.OrganizationHealth{
			OrganizationID: o.GetOrganizationId(), Name: o.GetName(), Sent: o.GetSent(), Delivered: o.GetDelivered(),
			HardBounced: o.GetHardBounced(), Complained: o.GetComplained(), WarmupCap: o.GetWarmupCap(),
			Protection: protectionFromProto(o.GetProtection()), WarmupStepOn: timePtrFromProto(o.GetWarmupStepOn()),
		},
		BounceRate: o.GetBounceRate(), ComplaintRate: o.GetComplaintRate(), Status: o.GetStatus(),
	}
}

func queueDepthToProto(q ports.QueueDepth) *reputationv1.QueueDepth {
	return &reputationv1.QueueDepth{Domain: q.Domain, Queued: q.Queued, Leased: q.Leased, Outbox: q.Outbox,
		OldestQueuedAt: timePtrToProto(q.OldestQueuedAt)}
}

func queueDepthFromProto(q *reputationv1.QueueDepth) ports.QueueDepth {
	return ports.QueueDepth{Domain: q.GetDomain(), Queued: q.GetQueued(), Leased: q.GetLeased(), Outbox: q.GetOutbox(),
		OldestQueuedAt: timePtrFromProto(q.GetOldestQueuedAt())}
}
