package rpc

import (
	"context"
	"log/slog"
	"slices"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	domainv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/domain/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/domain/v1/domainv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.DomainService { return &c.Domains },
		domainv1connect.NewDomainServiceHandler, newDomainServer,
		domainv1connect.NewDomainServiceClient, newDomainClient).
		calledBy(domainv1connect.DomainServiceName, TierEdge))
}

// domainServer serves postmill.domain.v1.DomainService from a ports.DomainService.
type domainServer struct {
	svc ports.DomainService
	log *slog.Logger
}

func newDomainServer(svc ports.DomainService, log *slog.Logger) domainv1connect.DomainServiceHandler {
	return &domainServer{svc: svc, log: log}
}

func (s *domainServer) CreateDomain(ctx context.Context, req *connect.Request[domainv1.CreateDomainRequest]) (*connect.Response[domainv1.CreateDomainResponse], error) {
	d, err := s.svc.CreateDomain(ctx, req.Msg.GetOrganizationId(), req.Msg.GetName())
	return respond(ctx, s.log, req, err, func() *domainv1.CreateDomainResponse {
		return &domainv1.CreateDomainResponse{Domain: domainToProto(d)}
	})
}

func (s *domainServer) ListDomains(ctx context.Context, req *connect.Request[domainv1.ListDomainsRequest]) (*connect.Response[domainv1.ListDomainsResponse], error) {
	domains, err := s.svc.ListDomains(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *domainv1.ListDomainsResponse {
		return &domainv1.ListDomainsResponse{Domains: domainsToProto(domains)}
	})
}

func (s *domainServer) ListDomainsPage(ctx context.Context, req *connect.Request[domainv1.ListDomainsPageRequest]) (*connect.Response[domainv1.ListDomainsPageResponse], error) {
	m := req.Msg
	page, err := s.svc.ListDomainsPage(ctx, m.GetOrganizationId(), ports.PageQuery{Limit: int(m.GetLimit()), Cursor: m.GetCursor()})
	return respond(ctx, s.log, req, err, func() *domainv1.ListDomainsPageResponse {
		return &domainv1.ListDomainsPageResponse{Domains: domainsToProto(page.Data), NextCursor: page.NextCursor}
	})
}

func (s *domainServer) GetDomain(ctx context.Context, req *connect.Request[domainv1.GetDomainRequest]) (*connect.Response[domainv1.GetDomainResponse], error) {
	d, err := s.svc.GetDomain(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *domainv1.GetDomainResponse {
		return &domainv1.GetDomainResponse{Domain: domainToProto(d)}
	})
}

func (s *domainServer) VerifyDomain(ctx context.Context, req *connect.Request[domainv1.VerifyDomainRequest]) (*connect.Response[domainv1.VerifyDomainResponse], error) {
	d, err := s.svc.VerifyDomain(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *domainv1.VerifyDomainResponse {
		return &domainv1.VerifyDomainResponse{Domain: domainToProto(d)}
	})
}

func (s *domainServer) SuspendDomain(ctx context.Context, req *connect.Request[domainv1.SuspendDomainRequest]) (*connect.Response[domainv1.SuspendDomainResponse], error) {
	d, err := s.svc.SuspendDomain(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *domainv1.SuspendDomainResponse {
		return &domainv1.SuspendDomainResponse{Domain: domainToProto(d)}
	})
}

func (s *domainServer) UpdateDomainTracking(ctx context.Context, req *connect.Request[domainv1.UpdateDomainTrackingRequest]) (*connect.Response[domainv1.UpdateDomainTrackingResponse], error) {
	m := req.Msg
	d, err := s.svc.UpdateDomainTracking(ctx, m.GetOrganizationId(), m.GetId(), trackingSettingsFromProto(m.GetTracking()))
	return respond(ctx, s.log, req, err, func() *domainv1.UpdateDomainTrackingResponse {
		return &domainv1.UpdateDomainTrackingResponse{Domain: domainToProto(d)}
	})
}

// domainClient implements ports.DomainService over postmill.domain.v1.DomainService.
type domainClient struct {
	conn domainv1connect.DomainServiceClient
}

func newDomainClient(conn domainv1connect.DomainServiceClient) ports.DomainService {
	return &domainClient{conn: conn}
}

func (c *domainClient) CreateDomain(ctx context.Context, orgID, name string) (ports.Domain, error) {
	return call(ctx, domainv1connect.DomainServiceCreateDomainProcedure, c.conn.CreateDomain,
		&domainv1.CreateDomainRequest{OrganizationId: orgID, Name: name},
		pick((*domainv1.CreateDomainResponse).GetDomain, domainFromProto))
}

func (c *domainClient) ListDomains(ctx context.Context, orgID string) ([]ports.Domain, error) {
	return call(ctx, domainv1connect.DomainServiceListDomainsProcedure, c.conn.ListDomains,
		&domainv1.ListDomainsRequest{OrganizationId: orgID},
		pick((*domainv1.ListDomainsResponse).GetDomains, domainsFromProto))
}

func (c *domainClient) ListDomainsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Domain], error) {
	return call(ctx, domainv1connect.DomainServiceListDomainsPageProcedure, c.conn.ListDomainsPage,
		&domainv1.ListDomainsPageRequest{OrganizationId: orgID, Limit: int64(q.Limit), Cursor: q.Cursor},
		func(m *domainv1.ListDomainsPageResponse) ports.Page[ports.Domain] {
			return ports.Page[ports.Domain]{Data: domainsFromProto(m.GetDomains()), NextCursor: m.GetNextCursor()}
		})
}

func (c *domainClient) GetDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	return call(ctx, domainv1connect.DomainServiceGetDomainProcedure, c.conn.GetDomain,
		&domainv1.GetDomainRequest{OrganizationId: orgID, Id: id},
		pick((*domainv1.GetDomainResponse).GetDomain, domainFromProto))
}

func (c *domainClient) VerifyDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	return call(ctx, domainv1connect.DomainServiceVerifyDomainProcedure, c.conn.VerifyDomain,
		&domainv1.VerifyDomainRequest{OrganizationId: orgID, Id: id},
		pick((*domainv1.VerifyDomainResponse).GetDomain, domainFromProto))
}

func (c *domainClient) SuspendDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	return call(ctx, domainv1connect.DomainServiceSuspendDomainProcedure, c.conn.SuspendDomain,
		&domainv1.SuspendDomainRequest{OrganizationId: orgID, Id: id},
		pick((*domainv1.SuspendDomainResponse).GetDomain, domainFromProto))
}

// UpdateDomainTracking sends a nil setting as unset, and it stays nil, so the core leaves it as it is.
func (c *domainClient) UpdateDomainTracking(ctx context.Context, orgID, id string, t ports.TrackingSettings) (ports.Domain, error) {
	return call(ctx, domainv1connect.DomainServiceUpdateDomainTrackingProcedure, c.conn.UpdateDomainTracking, &domainv1.UpdateDomainTrackingRequest{
		OrganizationId: orgID,
		Id:             id,
		Tracking:       trackingSettingsToProto(t),
	}, pick((*domainv1.UpdateDomainTrackingResponse).GetDomain, domainFromProto))
}

// Domain.DKIMPrivateKey has no field in the domain schema and is dropped on the way out; the delivery
// schema carries it, because the MTA signs.

func dnsRecordToProto(r ports.DNSRecord) *domainv1.DNSRecord {
	return &domainv1.DNSRecord{
		Id:         r.ID,
		DomainId:   r.DomainID,
		Type:       r.Type,
		Host:       r.Host,
		Value:      r.Value,
		Ttl:        int64(r.TTL),
		Required:   r.Required,
		Verified:   r.Verified,
		CheckedAt:  timePtrToProto(r.CheckedAt),
		RecordType: r.RecordType,
		Found:      r.Found,
		Problem:    r.Problem,
	}
}

func dnsRecordFromProto(r *domainv1.DNSRecord) ports.DNSRecord {
	return ports.DNSRecord{
		ID:         r.GetId(),
		DomainID:   r.GetDomainId(),
		Type:       r.GetType(),
		Host:       r.GetHost(),
		Value:      r.GetValue(),
		TTL:        int(r.GetTtl()),
		Required:   r.GetRequired(),
		Verified:   r.GetVerified(),
		CheckedAt:  timePtrFromProto(r.GetCheckedAt()),
		RecordType: r.GetRecordType(),
		Found:      slices.Clone(r.GetFound()), // nil when nothing was found, as the core leaves it
		Problem:    r.GetProblem(),
	}
}

func dnsRecordsToProto(records []ports.DNSRecord) *domainv1.DNSRecordList {
	if records == nil {
		return nil
	}
	return &domainv1.DNSRecordList{Items: mapItems(records, dnsRecordToProto)}
}

func dnsRecordsFromProto(l *domainv1.DNSRecordList) []ports.DNSRecord {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), dnsRecordFromProto)
}

// domainToProto leaves DKIMPrivateKey behind: the schema has no field for it.
func domainToProto(d ports.Domain) *domainv1.Domain {
	return &domainv1.Domain{
		Id:             d.ID,
		OrganizationId: d.OrganizationID,
		Name:           d.Name,
		Status:         string(d.Status),
		Region:         d.Region,
		DkimSelector:   d.DKIMSelector,
		DkimPublicKey:  d.DKIMPublicKey,
		VerifiedAt:     timePtrToProto(d.VerifiedAt),
		CreatedAt:      timeToProto(d.CreatedAt),
		Records:        dnsRecordsToProto(d.Records),
		OpenTracking:   d.OpenTracking,
		ClickTracking:  d.ClickTracking,
	}
}

func domainFromProto(d *domainv1.Domain) ports.Domain {
	return ports.Domain{
		ID:             d.GetId(),
		OrganizationID: d.GetOrganizationId(),
		Name:           d.GetName(),
		Status:         ports.DomainStatus(d.GetStatus()),
		Region:         d.GetRegion(),
		DKIMSelector:   d.GetDkimSelector(),
		DKIMPublicKey:  d.GetDkimPublicKey(),
		VerifiedAt:     timePtrFromProto(d.GetVerifiedAt()),
		CreatedAt:      timeFromProto(d.GetCreatedAt()),
		Records:        dnsRecordsFromProto(d.GetRecords()),
		OpenTracking:   d.GetOpenTracking(),
		ClickTracking:  d.GetClickTracking(),
	}
}

// boolPtrCopy copies an optional bool, so that a ports value never points into a wire message or the
// other way round.
func boolPtrCopy(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

// trackingSettingsToProto keeps each setting's presence: unset means "leave as it is", false "turn off".
func trackingSettingsToProto(t ports.TrackingSettings) *domainv1.TrackingSettings {
	return &domainv1.TrackingSettings{OpenTracking: boolPtrCopy(t.OpenTracking), ClickTracking: boolPtrCopy(t.ClickTracking)}
}

func trackingSettingsFromProto(t *domainv1.TrackingSettings) ports.TrackingSettings {
	if t == nil {
		return ports.TrackingSettings{}
	}
	return ports.TrackingSettings{OpenTracking: boolPtrCopy(t.OpenTracking), ClickTracking: boolPtrCopy(t.ClickTracking)}
}

func domainsToProto(domains []ports.Domain) *domainv1.DomainList {
	if domains == nil {
		return nil
	}
	return &domainv1.DomainList{Items: mapItems(domains, domainToProto)}
}

func domainsFromProto(l *domainv1.DomainList) []ports.Domain {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), domainFromProto)
}
