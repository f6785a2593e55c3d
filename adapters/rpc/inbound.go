package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	inboundv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/inbound/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/inbound/v1/inboundv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.InboundService { return &c.Inbound },
		inboundv1connect.NewInboundServiceHandler, newInboundServer,
		inboundv1connect.NewInboundServiceClient, newInboundClient).
		calledBy(inboundv1connect.InboundServiceName, TierEdge))
	register(portService(func(c *ports.Core) *ports.ReceiveService { return &c.Receiving },
		inboundv1connect.NewReceiveServiceHandler, newReceiveServer,
		inboundv1connect.NewReceiveServiceClient, newReceiveClient).
		calledBy(inboundv1connect.ReceiveServiceName, TierInbound))
}

// inboundServer serves postmill.inbound.v1.InboundService from a ports.InboundService.
type inboundServer struct {
	svc ports.InboundService
	log *slog.Logger
}

func newInboundServer(svc ports.InboundService, log *slog.Logger) inboundv1connect.InboundServiceHandler {
	return &inboundServer{svc: svc, log: log}
}

// receiveServer serves postmill.inbound.v1.ReceiveService from a ports.ReceiveService.
type receiveServer struct {
	svc ports.ReceiveService
	log *slog.Logger
}

func newReceiveServer(svc ports.ReceiveService, log *slog.Logger) inboundv1connect.ReceiveServiceHandler {
	return &receiveServer{svc: svc, log: log}
}

// inboundClient implements ports.InboundService over postmill.inbound.v1.InboundService.
type inboundClient struct {
	conn inboundv1connect.InboundServiceClient
}

func newInboundClient(conn inboundv1connect.InboundServiceClient) ports.InboundService {
	return &inboundClient{conn: conn}
}

// receiveClient implements ports.ReceiveService over postmill.inbound.v1.ReceiveService.
type receiveClient struct {
	conn inboundv1connect.ReceiveServiceClient
}

func newReceiveClient(conn inboundv1connect.ReceiveServiceClient) ports.ReceiveService {
	return &receiveClient{conn: conn}
}

func (s *inboundServer) CreateInboundDomain(ctx context.Context, req *connect.Request[inboundv1.CreateInboundDomainRequest]) (*connect.Response[inboundv1.CreateInboundDomainResponse], error) {
	m := req.Msg
	d, err := s.svc.CreateInboundDomain(ctx, m.GetOrganizationId(), m.GetName())
	return respond(ctx, s.log, req, err, func() *inboundv1.CreateInboundDomainResponse {
		return &inboundv1.CreateInboundDomainResponse{Domain: inboundDomainToProto(d)}
	})
}

func (c *inboundClient) CreateInboundDomain(ctx context.Context, orgID, name string) (ports.InboundDomain, error) {
	return call(ctx, inboundv1connect.InboundServiceCreateInboundDomainProcedure, c.conn.CreateInboundDomain, &inboundv1.CreateInboundDomainRequest{OrganizationId: orgID, Name: name}, pick((*inboundv1.CreateInboundDomainResponse).GetDomain, inboundDomainFromProto))
}

func (s *inboundServer) ListInboundDomains(ctx context.Context, req *connect.Request[inboundv1.ListInboundDomainsRequest]) (*connect.Response[inboundv1.ListInboundDomainsResponse], error) {
	m := req.Msg
	ds, err := s.svc.ListInboundDomains(ctx, m.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *inboundv1.ListInboundDomainsResponse {
		return &inboundv1.ListInboundDomainsResponse{Domains: inboundDomainsToProto(ds)}
	})
}

func (c *inboundClient) ListInboundDomains(ctx context.Context, orgID string) ([]ports.InboundDomain, error) {
	return call(ctx, inboundv1connect.InboundServiceListInboundDomainsProcedure, c.conn.ListInboundDomains, &inboundv1.ListInboundDomainsRequest{OrganizationId: orgID}, pick((*inboundv1.ListInboundDomainsResponse).GetDomains, inboundDomainsFromProto))
}

func (s *inboundServer) GetInboundDomain(ctx context.Context, req *connect.Request[inboundv1.GetInboundDomainRequest]) (*connect.Response[inboundv1.GetInboundDomainResponse], error) {
	m := req.Msg
	d, err := s.svc.GetInboundDomain(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.GetInboundDomainResponse {
		return &inboundv1.GetInboundDomainResponse{Domain: inboundDomainToProto(d)}
	})
}

func (c *inboundClient) GetInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	return call(ctx, inboundv1connect.InboundServiceGetInboundDomainProcedure, c.conn.GetInboundDomain, &inboundv1.GetInboundDomainRequest{OrganizationId: orgID, Id: id}, pick((*inboundv1.GetInboundDomainResponse).GetDomain, inboundDomainFromProto))
}

func (s *inboundServer) VerifyInboundDomain(ctx context.Context, req *connect.Request[inboundv1.VerifyInboundDomainRequest]) (*connect.Response[inboundv1.VerifyInboundDomainResponse], error) {
	m := req.Msg
	d, err := s.svc.VerifyInboundDomain(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.VerifyInboundDomainResponse {
		return &inboundv1.VerifyInboundDomainResponse{Domain: inboundDomainToProto(d)}
	})
}

func (c *inboundClient) VerifyInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	return call(ctx, inboundv1connect.InboundServiceVerifyInboundDomainProcedure, c.conn.VerifyInboundDomain, &inboundv1.VerifyInboundDomainRequest{OrganizationId: orgID, Id: id}, pick((*inboundv1.VerifyInboundDomainResponse).GetDomain, inboundDomainFromProto))
}

func (s *inboundServer) SuspendInboundDomain(ctx context.Context, req *connect.Request[inboundv1.SuspendInboundDomainRequest]) (*connect.Response[inboundv1.SuspendInboundDomainResponse], error) {
	m := req.Msg
	d, err := s.svc.SuspendInboundDomain(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.SuspendInboundDomainResponse {
		return &inboundv1.SuspendInboundDomainResponse{Domain: inboundDomainToProto(d)}
	})
}

func (c *inboundClient) SuspendInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	return call(ctx, inboundv1connect.InboundServiceSuspendInboundDomainProcedure, c.conn.SuspendInboundDomain, &inboundv1.SuspendInboundDomainRequest{OrganizationId: orgID, Id: id}, pick((*inboundv1.SuspendInboundDomainResponse).GetDomain, inboundDomainFromProto))
}

func (s *inboundServer) DeleteInboundDomain(ctx context.Context, req *connect.Request[inboundv1.DeleteInboundDomainRequest]) (*connect.Response[inboundv1.DeleteInboundDomainResponse], error) {
	m := req.Msg
	err := s.svc.DeleteInboundDomain(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.DeleteInboundDomainResponse { return &inboundv1.DeleteInboundDomainResponse{} })
}

func (c *inboundClient) DeleteInboundDomain(ctx context.Context, orgID, id string) error {
	_, err := call(ctx, inboundv1connect.InboundServiceDeleteInboundDomainProcedure, c.conn.DeleteInboundDomain, &inboundv1.DeleteInboundDomainRequest{OrganizationId: orgID, Id: id},
		func(*inboundv1.DeleteInboundDomainResponse) struct{} { return struct{}{} })
	return err
}

func (s *inboundServer) CreateRoute(ctx context.Context, req *connect.Request[inboundv1.CreateRouteRequest]) (*connect.Response[inboundv1.CreateRouteResponse], error) {
	m := req.Msg
	r, err := s.svc.CreateRoute(ctx, m.GetOrganizationId(), routeInputFromProto(m))
	return respond(ctx, s.log, req, err, func() *inboundv1.CreateRouteResponse { return &inboundv1.CreateRouteResponse{Route: routeToProto(r)} })
}

func (c *inboundClient) CreateRoute(ctx context.Context, orgID string, in ports.InboundRouteInput) (ports.InboundRoute, error) {
	return call(ctx, inboundv1connect.InboundServiceCreateRouteProcedure, c.conn.CreateRoute, routeInputToProto(orgID, in), pick((*inboundv1.CreateRouteResponse).GetRoute, routeFromProto))
}

func (s *inboundServer) UpdateRoute(ctx context.Context, req *connect.Request[inboundv1.UpdateRouteRequest]) (*connect.Response[inboundv1.UpdateRouteResponse], error) {
	m := req.Msg
	r, err := s.svc.UpdateRoute(ctx, m.GetOrganizationId(), m.GetId(), routePatchFromProto(m))
	return respond(ctx, s.log, req, err, func() *inboundv1.UpdateRouteResponse { return &inboundv1.UpdateRouteResponse{Route: routeToProto(r)} })
}

func (c *inboundClient) UpdateRoute(ctx context.Context, orgID, id string, p ports.InboundRoutePatch) (ports.InboundRoute, error) {
	return call(ctx, inboundv1connect.InboundServiceUpdateRouteProcedure, c.conn.UpdateRoute, routePatchToProto(orgID, id, p), pick((*inboundv1.UpdateRouteResponse).GetRoute, routeFromProto))
}

func (s *inboundServer) DeleteRoute(ctx context.Context, req *connect.Request[inboundv1.DeleteRouteRequest]) (*connect.Response[inboundv1.DeleteRouteResponse], error) {
	m := req.Msg
	err := s.svc.DeleteRoute(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.DeleteRouteResponse { return &inboundv1.DeleteRouteResponse{} })
}

func (c *inboundClient) DeleteRoute(ctx context.Context, orgID, id string) error {
	_, err := call(ctx, inboundv1connect.InboundServiceDeleteRouteProcedure, c.conn.DeleteRoute, &inboundv1.DeleteRouteRequest{OrganizationId: orgID, Id: id},
		func(*inboundv1.DeleteRouteResponse) struct{} { return struct{}{} })
	return err
}

func (s *inboundServer) ListRoutes(ctx context.Context, req *connect.Request[inboundv1.ListRoutesRequest]) (*connect.Response[inboundv1.ListRoutesResponse], error) {
	m := req.Msg
	rs, err := s.svc.ListRoutes(ctx, m.GetOrganizationId(), m.GetInboundDomainId())
	return respond(ctx, s.log, req, err, func() *inboundv1.ListRoutesResponse { return &inboundv1.ListRoutesResponse{Routes: routesToProto(rs)} })
}

func (c *inboundClient) ListRoutes(ctx context.Context, orgID, domainID string) ([]ports.InboundRoute, error) {
	return call(ctx, inboundv1connect.InboundServiceListRoutesProcedure, c.conn.ListRoutes, &inboundv1.ListRoutesRequest{OrganizationId: orgID, InboundDomainId: domainID}, pick((*inboundv1.ListRoutesResponse).GetRoutes, routesFromProto))
}

func (s *inboundServer) ResolveRoute(ctx context.Context, req *connect.Request[inboundv1.ResolveRouteRequest]) (*connect.Response[inboundv1.ResolveRouteResponse], error) {
	m := req.Msg
	r, err := s.svc.ResolveRoute(ctx, m.GetOrganizationId(), m.GetAddress())
	return respond(ctx, s.log, req, err, func() *inboundv1.ResolveRouteResponse {
		return &inboundv1.ResolveRouteResponse{Route: resolvedToProto(r)}
	})
}

func (c *inboundClient) ResolveRoute(ctx context.Context, orgID, address string) (*ports.InboundRoute, error) {
	return call(ctx, inboundv1connect.InboundServiceResolveRouteProcedure, c.conn.ResolveRoute, &inboundv1.ResolveRouteRequest{OrganizationId: orgID, Address: address}, pick((*inboundv1.ResolveRouteResponse).GetRoute, resolvedFromProto))
}

func (s *inboundServer) ListReceived(ctx context.Context, req *connect.Request[inboundv1.ListReceivedRequest]) (*connect.Response[inboundv1.ListReceivedResponse], error) {
	m := req.Msg
	es, err := s.svc.ListReceived(ctx, m.GetOrganizationId(), int(m.GetLimit()), int(m.GetOffset()))
	return respond(ctx, s.log, req, err, func() *inboundv1.ListReceivedResponse {
		return &inboundv1.ListReceivedResponse{Emails: receivedListToProto(es)}
	})
}

func (c *inboundClient) ListReceived(ctx context.Context, orgID string, limit, offset int) ([]ports.ReceivedEmail, error) {
	return call(ctx, inboundv1connect.InboundServiceListReceivedProcedure, c.conn.ListReceived, &inboundv1.ListReceivedRequest{OrganizationId: orgID, Limit: int64(limit), Offset: int64(offset)}, pick((*inboundv1.ListReceivedResponse).GetEmails, receivedListFromProto))
}

func (s *inboundServer) GetReceived(ctx context.Context, req *connect.Request[inboundv1.GetReceivedRequest]) (*connect.Response[inboundv1.GetReceivedResponse], error) {
	m := req.Msg
	e, err := s.svc.GetReceived(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.GetReceivedResponse {
		return &inboundv1.GetReceivedResponse{Email: receivedToProto(e)}
	})
}

func (c *inboundClient) GetReceived(ctx context.Context, orgID, id string) (ports.ReceivedEmail, error) {
	return call(ctx, inboundv1connect.InboundServiceGetReceivedProcedure, c.conn.GetReceived, &inboundv1.GetReceivedRequest{OrganizationId: orgID, Id: id}, pick((*inboundv1.GetReceivedResponse).GetEmail, receivedFromProto))
}

func (s *inboundServer) ReceivedRaw(ctx context.Context, req *connect.Request[inboundv1.ReceivedRawRequest]) (*connect.Response[inboundv1.ReceivedRawResponse], error) {
	m := req.Msg
	raw, err := s.svc.ReceivedRaw(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.ReceivedRawResponse { return &inboundv1.ReceivedRawResponse{Raw: raw} })
}

func (c *inboundClient) ReceivedRaw(ctx context.Context, orgID, id string) ([]byte, error) {
	return call(ctx, inboundv1connect.InboundServiceReceivedRawProcedure, c.conn.ReceivedRaw, &inboundv1.ReceivedRawRequest{OrganizationId: orgID, Id: id}, (*inboundv1.ReceivedRawResponse).GetRaw)
}

func (s *inboundServer) ReceivedAttachment(ctx context.Context, req *connect.Request[inboundv1.ReceivedAttachmentRequest]) (*connect.Response[inboundv1.ReceivedAttachmentResponse], error) {
	m := req.Msg
	a, data, err := s.svc.ReceivedAttachment(ctx, m.GetOrganizationId(), m.GetId(), m.GetAttachmentId())
	return respond(ctx, s.log, req, err, func() *inboundv1.ReceivedAttachmentResponse {
		return &inboundv1.ReceivedAttachmentResponse{Attachment: attachmentToProto(a), Data: data}
	})
}

func (c *inboundClient) ReceivedAttachment(ctx context.Context, orgID, id, attID string) (ports.ReceivedAttachment, []byte, error) {
	var data []byte
	a, err := call(ctx, inboundv1connect.InboundServiceReceivedAttachmentProcedure, c.conn.ReceivedAttachment,
		&inboundv1.ReceivedAttachmentRequest{OrganizationId: orgID, Id: id, AttachmentId: attID},
		func(r *inboundv1.ReceivedAttachmentResponse) ports.ReceivedAttachment {
			data = r.GetData()
			return attachmentFromProto(r.GetAttachment())
		})
	return a, data, err
}

func (s *receiveServer) AcceptsInboundRecipient(ctx context.Context, req *connect.Request[inboundv1.AcceptsInboundRecipientRequest]) (*connect.Response[inboundv1.AcceptsInboundRecipientResponse], error) {
	m := req.Msg
	ok, err := s.svc.AcceptsInboundRecipient(ctx, m.GetAddress())
	return respond(ctx, s.log, req, err, func() *inboundv1.AcceptsInboundRecipientResponse {
		return &inboundv1.AcceptsInboundRecipientResponse{Accepted: ok}
	})
}

func (c *receiveClient) AcceptsInboundRecipient(ctx context.Context, rcpt string) (bool, error) {
	return call(ctx, inboundv1connect.ReceiveServiceAcceptsInboundRecipientProcedure, c.conn.AcceptsInboundRecipient, &inboundv1.AcceptsInboundRecipientRequest{Address: rcpt}, (*inboundv1.AcceptsInboundRecipientResponse).GetAccepted)
}

func (s *receiveServer) Receive(ctx context.Context, req *connect.Request[inboundv1.ReceiveRequest]) (*connect.Response[inboundv1.ReceiveResponse], error) {
	m := req.Msg
	res, err := s.svc.Receive(ctx, inboundMessageFromProto(m.GetMessage()))
	return respond(ctx, s.log, req, err, func() *inboundv1.ReceiveResponse { return &inboundv1.ReceiveResponse{Ids: res.IDs} })
}

func (c *receiveClient) Receive(ctx context.Context, msg ports.InboundMessage) (ports.ReceiveResult, error) {
	return call(ctx, inboundv1connect.ReceiveServiceReceiveProcedure, c.conn.Receive, &inboundv1.ReceiveRequest{Message: inboundMessageToProto(msg)}, func(r *inboundv1.ReceiveResponse) ports.ReceiveResult { return ports.ReceiveResult{IDs: r.GetIds()} })
}

func routeInputToProto(orgID string, in ports.InboundRouteInput) *inboundv1.CreateRouteRequest {
	r := &inboundv1.CreateRouteRequest{OrganizationId: orgID, InboundDomainId: in.InboundDomainID, MatchType: in.MatchType,
		MatchValue: in.MatchValue, Action: in.Action, Destination: in.Destination, Enabled: in.Enabled}
	if in.Priority != nil {
		p := int64(*in.Priority)
		r.Priority = &p
	}
	return r
}

func routeInputFromProto(m *inboundv1.CreateRouteRequest) ports.InboundRouteInput {
	in := ports.InboundRouteInput{InboundDomainID: m.GetInboundDomainId(), MatchType: m.GetMatchType(),
		MatchValue: m.GetMatchValue(), Action: m.GetAction(), Destination: m.GetDestination(), Enabled: m.Enabled}
	if m.Priority != nil {
		p := int(*m.Priority)
		in.Priority = &p
	}
	return in
}

func routePatchToProto(orgID, id string, p ports.InboundRoutePatch) *inboundv1.UpdateRouteRequest {
	r := &inboundv1.UpdateRouteRequest{OrganizationId: orgID, Id: id, Enabled: p.Enabled, Destination: p.Destination}
	if p.Priority != nil {
		v := int64(*p.Priority)
		r.Priority = &v
	}
	return r
}

func routePatchFromProto(m *inboundv1.UpdateRouteRequest) ports.InboundRoutePatch {
	p := ports.InboundRoutePatch{Enabled: m.Enabled, Destination: m.Destination}
	if m.Priority != nil {
		v := int(*m.Priority)
		p.Priority = &v
	}
	return p
}

func resolvedToProto(r *ports.InboundRoute) *inboundv1.InboundRoute {
	if r == nil {
		return nil
	}
	return routeToProto(*r)
}

func resolvedFromProto(m *inboundv1.InboundRoute) *ports.InboundRoute {
	if m == nil {
		return nil
	}
	r := routeFromProto(m)
	return &r
}

func receivedListToProto(es []ports.ReceivedEmail) []*inboundv1.ReceivedEmail {
	out := make([]*inboundv1.ReceivedEmail, 0, len(es))
	for _, e := range es {
		out = append(out, receivedToProto(e))
	}
	return out
}

func receivedListFromProto(l []*inboundv1.ReceivedEmail) []ports.ReceivedEmail {
	out := make([]ports.ReceivedEmail, 0, len(l))
	for _, e := range l {
		out = append(out, receivedFromProto(e))
	}
	return out
}
