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
		inboundv1connect.NewInboundServiceClient, newInboundClient))
	register(portService(func(c *ports.Core) *ports.ReceiveService { return &c.Receiving },
		inboundv1connect.NewReceiveServiceHandler, newReceiveServer,
		inboundv1connect.NewReceiveServiceClient, newReceiveClient))
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

func (s *inboundServer) CreateInboundDomain(ctx context.Context, req *connect.Request[inboundv1.OrgName]) (*connect.Response[inboundv1.InboundDomain], error) {
	m := req.Msg
	d, err := s.svc.CreateInboundDomain(ctx, m.GetOrganizationId(), m.GetName())
	return respond(ctx, s.log, req, err, func() *inboundv1.InboundDomain { return inboundDomainToProto(d) })
}

func (c *inboundClient) CreateInboundDomain(ctx context.Context, orgID, name string) (ports.InboundDomain, error) {
	return call(ctx, inboundv1connect.InboundServiceCreateInboundDomainProcedure, c.conn.CreateInboundDomain, &inboundv1.OrgName{OrganizationId: orgID, Name: name}, inboundDomainFromProto)
}

func (s *inboundServer) ListInboundDomains(ctx context.Context, req *connect.Request[inboundv1.OrgID]) (*connect.Response[inboundv1.InboundDomainList], error) {
	m := req.Msg
	ds, err := s.svc.ListInboundDomains(ctx, m.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *inboundv1.InboundDomainList { return inboundDomainsToProto(ds) })
}

func (c *inboundClient) ListInboundDomains(ctx context.Context, orgID string) ([]ports.InboundDomain, error) {
	return call(ctx, inboundv1connect.InboundServiceListInboundDomainsProcedure, c.conn.ListInboundDomains, &inboundv1.OrgID{OrganizationId: orgID}, inboundDomainsFromProto)
}

func (s *inboundServer) GetInboundDomain(ctx context.Context, req *connect.Request[inboundv1.OrgAndID]) (*connect.Response[inboundv1.InboundDomain], error) {
	m := req.Msg
	d, err := s.svc.GetInboundDomain(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.InboundDomain { return inboundDomainToProto(d) })
}

func (c *inboundClient) GetInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	return call(ctx, inboundv1connect.InboundServiceGetInboundDomainProcedure, c.conn.GetInboundDomain, &inboundv1.OrgAndID{OrganizationId: orgID, Id: id}, inboundDomainFromProto)
}

func (s *inboundServer) VerifyInboundDomain(ctx context.Context, req *connect.Request[inboundv1.OrgAndID]) (*connect.Response[inboundv1.InboundDomain], error) {
	m := req.Msg
	d, err := s.svc.VerifyInboundDomain(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.InboundDomain { return inboundDomainToProto(d) })
}

func (c *inboundClient) VerifyInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	return call(ctx, inboundv1connect.InboundServiceVerifyInboundDomainProcedure, c.conn.VerifyInboundDomain, &inboundv1.OrgAndID{OrganizationId: orgID, Id: id}, inboundDomainFromProto)
}

func (s *inboundServer) SuspendInboundDomain(ctx context.Context, req *connect.Request[inboundv1.OrgAndID]) (*connect.Response[inboundv1.InboundDomain], error) {
	m := req.Msg
	d, err := s.svc.SuspendInboundDomain(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.InboundDomain { return inboundDomainToProto(d) })
}

func (c *inboundClient) SuspendInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	return call(ctx, inboundv1connect.InboundServiceSuspendInboundDomainProcedure, c.conn.SuspendInboundDomain, &inboundv1.OrgAndID{OrganizationId: orgID, Id: id}, inboundDomainFromProto)
}

func (s *inboundServer) DeleteInboundDomain(ctx context.Context, req *connect.Request[inboundv1.OrgAndID]) (*connect.Response[inboundv1.Empty], error) {
	m := req.Msg
	err := s.svc.DeleteInboundDomain(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.Empty { return &inboundv1.Empty{} })
}

func (c *inboundClient) DeleteInboundDomain(ctx context.Context, orgID, id string) error {
	_, err := call(ctx, inboundv1connect.InboundServiceDeleteInboundDomainProcedure, c.conn.DeleteInboundDomain, &inboundv1.OrgAndID{OrganizationId: orgID, Id: id},
		func(*inboundv1.Empty) struct{} { return struct{}{} })
	return err
}

func (s *inboundServer) CreateRoute(ctx context.Context, req *connect.Request[inboundv1.CreateRouteRequest]) (*connect.Response[inboundv1.InboundRoute], error) {
	m := req.Msg
	r, err := s.svc.CreateRoute(ctx, m.GetOrganizationId(), routeInputFromProto(m))
	return respond(ctx, s.log, req, err, func() *inboundv1.InboundRoute { return routeToProto(r) })
}

func (c *inboundClient) CreateRoute(ctx context.Context, orgID string, in ports.InboundRouteInput) (ports.InboundRoute, error) {
	return call(ctx, inboundv1connect.InboundServiceCreateRouteProcedure, c.conn.CreateRoute, routeInputToProto(orgID, in), routeFromProto)
}

func (s *inboundServer) UpdateRoute(ctx context.Context, req *connect.Request[inboundv1.UpdateRouteRequest]) (*connect.Response[inboundv1.InboundRoute], error) {
	m := req.Msg
	r, err := s.svc.UpdateRoute(ctx, m.GetOrganizationId(), m.GetId(), routePatchFromProto(m))
	return respond(ctx, s.log, req, err, func() *inboundv1.InboundRoute { return routeToProto(r) })
}

func (c *inboundClient) UpdateRoute(ctx context.Context, orgID, id string, p ports.InboundRoutePatch) (ports.InboundRoute, error) {
	return call(ctx, inboundv1connect.InboundServiceUpdateRouteProcedure, c.conn.UpdateRoute, routePatchToProto(orgID, id, p), routeFromProto)
}

func (s *inboundServer) DeleteRoute(ctx context.Context, req *connect.Request[inboundv1.OrgAndID]) (*connect.Response[inboundv1.Empty], error) {
	m := req.Msg
	err := s.svc.DeleteRoute(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.Empty { return &inboundv1.Empty{} })
}

func (c *inboundClient) DeleteRoute(ctx context.Context, orgID, id string) error {
	_, err := call(ctx, inboundv1connect.InboundServiceDeleteRouteProcedure, c.conn.DeleteRoute, &inboundv1.OrgAndID{OrganizationId: orgID, Id: id},
		func(*inboundv1.Empty) struct{} { return struct{}{} })
	return err
}

func (s *inboundServer) ListRoutes(ctx context.Context, req *connect.Request[inboundv1.OrgAndID]) (*connect.Response[inboundv1.InboundRouteList], error) {
	m := req.Msg
	rs, err := s.svc.ListRoutes(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.InboundRouteList { return routesToProto(rs) })
}

func (c *inboundClient) ListRoutes(ctx context.Context, orgID, domainID string) ([]ports.InboundRoute, error) {
	return call(ctx, inboundv1connect.InboundServiceListRoutesProcedure, c.conn.ListRoutes, &inboundv1.OrgAndID{OrganizationId: orgID, Id: domainID}, routesFromProto)
}

func (s *inboundServer) ResolveRoute(ctx context.Context, req *connect.Request[inboundv1.OrgName]) (*connect.Response[inboundv1.ResolveRouteResponse], error) {
	m := req.Msg
	r, err := s.svc.ResolveRoute(ctx, m.GetOrganizationId(), m.GetName())
	return respond(ctx, s.log, req, err, func() *inboundv1.ResolveRouteResponse { return resolvedToProto(r) })
}

func (c *inboundClient) ResolveRoute(ctx context.Context, orgID, address string) (*ports.InboundRoute, error) {
	return call(ctx, inboundv1connect.InboundServiceResolveRouteProcedure, c.conn.ResolveRoute, &inboundv1.OrgName{OrganizationId: orgID, Name: address}, resolvedFromProto)
}

func (s *inboundServer) ListReceived(ctx context.Context, req *connect.Request[inboundv1.ListReceivedRequest]) (*connect.Response[inboundv1.ReceivedEmailList], error) {
	m := req.Msg
	es, err := s.svc.ListReceived(ctx, m.GetOrganizationId(), int(m.GetLimit()), int(m.GetOffset()))
	return respond(ctx, s.log, req, err, func() *inboundv1.ReceivedEmailList { return receivedListToProto(es) })
}

func (c *inboundClient) ListReceived(ctx context.Context, orgID string, limit, offset int) ([]ports.ReceivedEmail, error) {
	return call(ctx, inboundv1connect.InboundServiceListReceivedProcedure, c.conn.ListReceived, &inboundv1.ListReceivedRequest{OrganizationId: orgID, Limit: int64(limit), Offset: int64(offset)}, receivedListFromProto)
}

func (s *inboundServer) GetReceived(ctx context.Context, req *connect.Request[inboundv1.OrgAndID]) (*connect.Response[inboundv1.ReceivedEmail], error) {
	m := req.Msg
	e, err := s.svc.GetReceived(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.ReceivedEmail { return receivedToProto(e) })
}

func (c *inboundClient) GetReceived(ctx context.Context, orgID, id string) (ports.ReceivedEmail, error) {
	return call(ctx, inboundv1connect.InboundServiceGetReceivedProcedure, c.conn.GetReceived, &inboundv1.OrgAndID{OrganizationId: orgID, Id: id}, receivedFromProto)
}

func (s *inboundServer) ReceivedRaw(ctx context.Context, req *connect.Request[inboundv1.OrgAndID]) (*connect.Response[inboundv1.RawMessage], error) {
	m := req.Msg
	raw, err := s.svc.ReceivedRaw(ctx, m.GetOrganizationId(), m.GetId())
	return respond(ctx, s.log, req, err, func() *inboundv1.RawMessage { return &inboundv1.RawMessage{Raw: raw} })
}

func (c *inboundClient) ReceivedRaw(ctx context.Context, orgID, id string) ([]byte, error) {
	return call(ctx, inboundv1connect.InboundServiceReceivedRawProcedure, c.conn.ReceivedRaw, &inboundv1.OrgAndID{OrganizationId: orgID, Id: id}, (*inboundv1.RawMessage).GetRaw)
}

func (s *inboundServer) ReceivedAttachment(ctx context.Context, req *connect.Request[inboundv1.AttachmentRequest]) (*connect.Response[inboundv1.AttachmentResponse], error) {
	m := req.Msg
	a, data, err := s.svc.ReceivedAttachment(ctx, m.GetOrganizationId(), m.GetId(), m.GetAttachmentId())
	return respond(ctx, s.log, req, err, func() *inboundv1.AttachmentResponse {
		return &inboundv1.AttachmentResponse{Attachment: attachmentToProto(a), Data: data}
	})
}

func (c *inboundClient) ReceivedAttachment(ctx context.Context, orgID, id, attID string) (ports.ReceivedAttachment, []byte, error) {
	var data []byte
	a, err := call(ctx, inboundv1connect.InboundServiceReceivedAttachmentProcedure, c.conn.ReceivedAttachment,
		&inboundv1.AttachmentRequest{OrganizationId: orgID, Id: id, AttachmentId: attID},
		func(r *inboundv1.AttachmentResponse) ports.ReceivedAttachment {
			data = r.GetData()
			return attachmentFromProto(r.GetAttachment())
		})
	return a, data, err
}

func (s *receiveServer) AcceptsInboundRecipient(ctx context.Context, req *connect.Request[inboundv1.Recipient]) (*connect.Response[inboundv1.Accepted], error) {
	m := req.Msg
	ok, err := s.svc.AcceptsInboundRecipient(ctx, m.GetAddress())
	return respond(ctx, s.log, req, err, func() *inboundv1.Accepted { return &inboundv1.Accepted{Accepted: ok} })
}

func (c *receiveClient) AcceptsInboundRecipient(ctx context.Context, rcpt string) (bool, error) {
	return call(ctx, inboundv1connect.ReceiveServiceAcceptsInboundRecipientProcedure, c.conn.AcceptsInboundRecipient, &inboundv1.Recipient{Address: rcpt}, (*inboundv1.Accepted).GetAccepted)
}

func (s *receiveServer) Receive(ctx context.Context, req *connect.Request[inboundv1.InboundMessage]) (*connect.Response[inboundv1.ReceiveResult], error) {
	m := req.Msg
	res, err := s.svc.Receive(ctx, inboundMessageFromProto(m))
	return respond(ctx, s.log, req, err, func() *inboundv1.ReceiveResult { return &inboundv1.ReceiveResult{Ids: res.IDs} })
}

func (c *receiveClient) Receive(ctx context.Context, msg ports.InboundMessage) (ports.ReceiveResult, error) {
	return call(ctx, inboundv1connect.ReceiveServiceReceiveProcedure, c.conn.Receive, inboundMessageToProto(msg), func(r *inboundv1.ReceiveResult) ports.ReceiveResult { return ports.ReceiveResult{IDs: r.GetIds()} })
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

func resolvedToProto(r *ports.InboundRoute) *inboundv1.ResolveRouteResponse {
	if r == nil {
		return &inboundv1.ResolveRouteResponse{}
	}
	return &inboundv1.ResolveRouteResponse{Route: routeToProto(*r)}
}

func resolvedFromProto(m *inboundv1.ResolveRouteResponse) *ports.InboundRoute {
	if m.GetRoute() == nil {
		return nil
	}
	r := routeFromProto(m.GetRoute())
	return &r
}

func receivedListToProto(es []ports.ReceivedEmail) *inboundv1.ReceivedEmailList {
	out := &inboundv1.ReceivedEmailList{}
	for _, e := range es {
		out.Items = append(out.Items, receivedToProto(e))
	}
	return out
}

func receivedListFromProto(l *inboundv1.ReceivedEmailList) []ports.ReceivedEmail {
	out := make([]ports.ReceivedEmail, 0, len(l.GetItems()))
	for _, e := range l.GetItems() {
		out = append(out, receivedFromProto(e))
	}
	return out
}
