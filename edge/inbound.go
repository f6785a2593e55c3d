package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagInbound is the OpenAPI tag of the inbound-domain and route routes (SPEC §4.12, Session).
const tagInbound = "Inbound"

type inboundRecordResponse struct {
	Host       string `json:"host" example:"inbound.acme.example" doc:"Name to publish the MX record at: the inbound domain itself"`
	RecordType string `json:"recordType" enum:"MX" example:"MX" doc:"Always MX"`
	Value      string `json:"value" example:"10 mx.postmill.example" doc:"\"<priority> <mx_host>\", as to publish it"`
	TTL        int    `json:"ttl" example:"3600" doc:"Seconds"`
}

type inboundDomainResponse struct {
	ID            string                `json:"id" format:"uuid" doc:"Inbound domain id"`
	Domain        string                `json:"domain" example:"inbound.acme.example" doc:"Trimmed and lower-cased"`
	Status        string                `json:"status" enum:"pending,verified,failed,suspended" doc:"pending until an MX of the domain names the MX host (verified); failed when MX records exist but none does; suspended refuses mail at RCPT"`
	MXHost        string                `json:"mxHost" example:"mx.postmill.example" doc:"Host the MX record must point at"`
	MXPriority    int                   `json:"mxPriority" example:"10" doc:"Suggested MX preference"`
	VerifiedAt    *time.Time            `json:"verifiedAt" doc:"Set the first time a check found the MX; never overwritten"`
	LastCheckedAt *time.Time            `json:"lastCheckedAt" doc:"Last MX check; null before the first verify"`
	CreatedAt     time.Time             `json:"createdAt" doc:"When the domain was added"`
	DNSRecord     inboundRecordResponse `json:"dnsRecord" doc:"The MX record to publish"`
}

type createInboundDomainRequest struct {
	_      struct{} `json:"-" additionalProperties:"true"`
	Domain string   `json:"domain" minLength:"1" example:"inbound.acme.example" doc:"Same grammar as a sending domain; trimmed and lower-cased"`
}

type inboundRouteResponse struct {
	ID              string    `json:"id" format:"uuid" doc:"Route id"`
	InboundDomainID string    `json:"inboundDomainId" format:"uuid" doc:"The inbound domain the route belongs to"`
	MatchType       string    `json:"matchType" enum:"exact,pattern,catch_all" doc:"exact address, * glob over the full address, or every address"`
	MatchValue      string    `json:"matchValue" example:"support@inbound.acme.example" doc:"Lower-cased; empty for catch_all"`
	Action          string    `json:"action" enum:"webhook,forward_email,store" doc:"What happens to a matching message"`
	Destination     string    `json:"destination" example:"https://hooks.acme.example/inbound" doc:"URL (webhook), address (forward_email) or empty (store)"`
	Enabled         bool      `json:"enabled" doc:"Disabled routes never match"`
	Priority        int       `json:"priority" example:"100" doc:"0-10000; lower wins ties of specificity"`
	CreatedAt       time.Time `json:"createdAt" doc:"When the route was created"`
	SigningSecret   string    `json:"signingSecret,omitempty" example:"whsec_3f9c1e0d2b7a48e5a9c6d1f0b2e4a7c9d8e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5" doc:"Webhook routes, in the create answer only: the secret the requests of the route are signed with (x-service-signature, as SPEC §6). Store it now; it is not shown again"`
}

type createRouteRequest struct {
	_               struct{} `json:"-" additionalProperties:"true"`
	InboundDomainID string   `json:"inboundDomainId" format:"uuid" doc:"An inbound domain of the organization (404 otherwise)"`
	MatchType       string   `json:"matchType" enum:"exact,pattern,catch_all" doc:"exact, pattern or catch_all"`
	MatchValue      string   `json:"matchValue,omitempty" maxLength:"320" doc:"Required unless catch_all (ignored and stored empty there); exact needs a full address; pattern is a * glob over the full address; lower-cased"`
	Action          string   `json:"action" enum:"webhook,forward_email,store" doc:"webhook, forward_email or store"`
	Destination     string   `json:"destination,omitempty" maxLength:"2048" doc:"http(s) URL for webhook, email address for forward_email, empty for store"`
	Enabled         *bool    `json:"enabled,omitempty" doc:"Default true"`
	Priority        *int     `json:"priority,omitempty" doc:"0-10000, default 100"`
}

// patchRouteRequest changes enabled, priority and destination only (SPEC §4.12). The other fields of a
// route are named so that a body changing them is refused rather than answered 200 with nothing changed.
type patchRouteRequest struct {
	_               struct{} `json:"-" additionalProperties:"true"`
	Enabled         *bool    `json:"enabled,omitempty" doc:"Enable or disable the route; absent leaves it"`
	Priority        *int     `json:"priority,omitempty" doc:"0-10000; absent leaves it"`
	Destination     *string  `json:"destination,omitempty" maxLength:"2048" doc:"Must fit the route's action; absent leaves it"`
	InboundDomainID *string  `json:"inboundDomainId,omitempty" doc:"Not patchable: any value is refused with 400"`
	MatchType       *string  `json:"matchType,omitempty" doc:"Not patchable: any value is refused with 400"`
	MatchValue      *string  `json:"matchValue,omitempty" doc:"Not patchable: any value is refused with 400; delete the route and create another"`
	Action          *string  `json:"action,omitempty" doc:"Not patchable: any value is refused with 400"`
}

// fixed lists the fields of the body that a route cannot change.
func (b patchRouteRequest) fixed() []ports.FieldViolation {
	var v []ports.FieldViolation
	for _, f := range []struct {
		path string
		set  bool
	}{{"inboundDomainId", b.InboundDomainID != nil}, {"matchType", b.MatchType != nil}, {"matchValue", b.MatchValue != nil},
		{"action", b.Action != nil}} {
		if f.set {
			v = append(v, ports.FieldViolation{Path: f.path, Message: "cannot be changed: only enabled, priority and destination can"})
		}
	}
	return v
}

type patchRouteInput struct {
	ID   string `path:"id" format:"uuid" doc:"Route id"`
	Body patchRouteRequest
}

type listRoutesInput struct {
	InboundDomainID string `query:"inboundDomainId" required:"true" format:"uuid" doc:"The inbound domain whose routes to list"`
}

type resolveRouteInput struct {
	Address string `query:"address" required:"true" maxLength:"320" doc:"Address to resolve"`
}

type resolveRouteResponse struct {
	Address string                `json:"address" doc:"The address asked about, lower-cased"`
	Route   *inboundRouteResponse `json:"route" doc:"The route that would take mail for the address; null when the domain is not yours or nothing matches"`
}

func (s *Server) registerInboundRoutes() {
	session := access{kind: authSession}
	register(s, huma.Operation{
		OperationID: "create-inbound-domain", Method: http.MethodPost, Path: "/v1/inbound/domains", DefaultStatus: http.StatusCreated,
		Tags: []string{tagInbound}, Summary: "Add an inbound domain",
		Description: "Returns the domain with the MX record to publish. 409 when the domain is already an inbound domain of any organization.",
	}, session, s.createInboundDomain, http.StatusBadRequest, http.StatusConflict)
	register(s, huma.Operation{OperationID: "list-inbound-domains", Method: http.MethodGet, Path: "/v1/inbound/domains",
		Tags: []string{tagInbound}, Summary: "List inbound domains"}, session, s.listInboundDomains)
	register(s, huma.Operation{OperationID: "get-inbound-domain", Method: http.MethodGet, Path: "/v1/inbound/domains/{id}",
		Tags: []string{tagInbound}, Summary: "Get an inbound domain"}, session, s.getInboundDomain, http.StatusBadRequest, http.StatusNotFound)
	register(s, huma.Operation{OperationID: "verify-inbound-domain", Method: http.MethodPost, Path: "/v1/inbound/domains/{id}/verify",
		DefaultStatus: http.StatusCreated, Tags: []string{tagInbound}, Summary: "Re-check an inbound domain's MX",
		Description: "verified when an MX of the domain names mxHost; failed when MX records exist but none does; pending when none resolve. " +
			"A suspended domain stays suspended."}, session, s.verifyInboundDomain, http.StatusBadRequest, http.StatusNotFound)
	register(s, huma.Operation{OperationID: "suspend-inbound-domain", Method: http.MethodPost, Path: "/v1/inbound/domains/{id}/suspend",
		DefaultStatus: http.StatusCreated, Tags: []string{tagInbound}, Summary: "Stop accepting mail for an inbound domain",
		Description: "Mail for the domain is refused at RCPT (550)."}, session, s.suspendInboundDomain, http.StatusBadRequest, http.StatusNotFound)
	register(s, huma.Operation{OperationID: "delete-inbound-domain", Method: http.MethodDelete, Path: "/v1/inbound/domains/{id}",
		Tags: []string{tagInbound}, Summary: "Delete an inbound domain and its routes",
		Description: "Mail already received is kept."}, session, s.deleteInboundDomain, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{OperationID: "create-inbound-route", Method: http.MethodPost, Path: "/v1/inbound/routes",
		DefaultStatus: http.StatusCreated, Tags: []string{tagInbound}, Summary: "Create a route",
		Description: "Precedence, one route per message: exact > pattern (more literal characters wins) > catch_all, then lower " +
			"priority, then older createdAt, then lower id. Disabled routes never match; unmatched mail is dead-lettered."},
		session, s.createRoute, http.StatusBadRequest, http.StatusNotFound)
	register(s, huma.Operation{OperationID: "update-inbound-route", Method: http.MethodPatch, Path: "/v1/inbound/routes/{id}",
		Tags: []string{tagInbound}, Summary: "Change a route's enabled, priority or destination"},
		session, s.updateRoute, http.StatusBadRequest, http.StatusNotFound)
	register(s, huma.Operation{OperationID: "delete-inbound-route", Method: http.MethodDelete, Path: "/v1/inbound/routes/{id}",
		Tags: []string{tagInbound}, Summary: "Delete a route"}, session, s.deleteRoute, http.StatusBadRequest, http.StatusNotFound)
	register(s, huma.Operation{OperationID: "list-inbound-routes", Method: http.MethodGet, Path: "/v1/inbound/routes",
		Tags: []string{tagInbound}, Summary: "List an inbound domain's routes", Description: "Oldest first, enabled or not."},
		session, s.listRoutes, http.StatusBadRequest, http.StatusNotFound)
	register(s, huma.Operation{OperationID: "resolve-inbound-route", Method: http.MethodGet, Path: "/v1/inbound/routes/resolve",
		Tags: []string{tagInbound}, Summary: "Which route would take mail for an address"},
		session, s.resolveRoute, http.StatusBadRequest)
	s.registerReceivedRoutes()
}

func toInboundDomain(d ports.InboundDomain) inboundDomainResponse {
	return inboundDomainResponse{
		ID: d.ID, Domain: d.Name, Status: string(d.Status), MXHost: d.MXHost, MXPriority: d.MXPriority,
		VerifiedAt: utcPtr(d.VerifiedAt), LastCheckedAt: utcPtr(d.LastCheckedAt), CreatedAt: utc(d.CreatedAt),
		DNSRecord: inboundRecordResponse{Host: d.DNSRecord.Host, RecordType: ports.RRTypeMX, Value: d.DNSRecord.Value, TTL: d.DNSRecord.TTL},
	}
}

func toRoute(r ports.InboundRoute) inboundRouteResponse {
	return inboundRouteResponse{ID: r.ID, InboundDomainID: r.InboundDomainID, MatchType: r.MatchType, MatchValue: r.MatchValue,
		Action: r.Action, Destination: r.Destination, Enabled: r.Enabled, Priority: r.Priority, CreatedAt: utc(r.CreatedAt),
		SigningSecret: r.PlainSecret}
}

func inboundResult(d ports.InboundDomain, err error) (*body[inboundDomainResponse], error) {
	if err != nil {
		return nil, err
	}
	return &body[inboundDomainResponse]{toInboundDomain(d)}, nil
}

func (s *Server) createInboundDomain(ctx context.Context, in *body[createInboundDomainRequest]) (*body[inboundDomainResponse], error) {
	return inboundResult(s.core.Inbound.CreateInboundDomain(ctx, principalFrom(ctx).OrganizationID, in.Body.Domain))
}

func (s *Server) listInboundDomains(ctx context.Context, _ *struct{}) (*body[[]inboundDomainResponse], error) {
	ds, err := s.core.Inbound.ListInboundDomains(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	return &body[[]inboundDomainResponse]{mapItems(ds, toInboundDomain)}, nil
}

func (s *Server) getInboundDomain(ctx context.Context, in *idPath) (*body[inboundDomainResponse], error) {
	return inboundResult(s.core.Inbound.GetInboundDomain(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)))
}

func (s *Server) verifyInboundDomain(ctx context.Context, in *idPath) (*body[inboundDomainResponse], error) {
	return inboundResult(s.core.Inbound.VerifyInboundDomain(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)))
}

func (s *Server) suspendInboundDomain(ctx context.Context, in *idPath) (*body[inboundDomainResponse], error) {
	return inboundResult(s.core.Inbound.SuspendInboundDomain(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)))
}

func (s *Server) deleteInboundDomain(ctx context.Context, in *idPath) (*body[deletedResponse], error) {
	if err := s.core.Inbound.DeleteInboundDomain(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)); err != nil {
		return nil, err
	}
	return &body[deletedResponse]{deletedResponse{Deleted: true}}, nil
}

func (s *Server) createRoute(ctx context.Context, in *body[createRouteRequest]) (*body[inboundRouteResponse], error) {
	b := in.Body
	r, err := s.core.Inbound.CreateRoute(ctx, principalFrom(ctx).OrganizationID, ports.InboundRouteInput{
		InboundDomainID: canonicalUUID(b.InboundDomainID), MatchType: b.MatchType, MatchValue: b.MatchValue,
		Action: b.Action, Destination: b.Destination, Enabled: b.Enabled, Priority: b.Priority,
	})
	if err != nil {
		return nil, err
	}
	return &body[inboundRouteResponse]{toRoute(r)}, nil
}

func (s *Server) updateRoute(ctx context.Context, in *patchRouteInput) (*body[inboundRouteResponse], error) {
	if v := in.Body.fixed(); len(v) > 0 {
		return nil, ports.ValidationError(v...)
	}
	r, err := s.core.Inbound.UpdateRoute(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), ports.InboundRoutePatch{
		Enabled: in.Body.Enabled, Priority: in.Body.Priority, Destination: in.Body.Destination,
	})
	if err != nil {
		return nil, err
	}
	return &body[inboundRouteResponse]{toRoute(r)}, nil
}

func (s *Server) deleteRoute(ctx context.Context, in *idPath) (*body[deletedResponse], error) {
	if err := s.core.Inbound.DeleteRoute(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)); err != nil {
		return nil, err
	}
	return &body[deletedResponse]{deletedResponse{Deleted: true}}, nil
}

func (s *Server) listRoutes(ctx context.Context, in *listRoutesInput) (*body[[]inboundRouteResponse], error) {
	rs, err := s.core.Inbound.ListRoutes(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.InboundDomainID))
	if err != nil {
		return nil, err
	}
	return &body[[]inboundRouteResponse]{mapItems(rs, toRoute)}, nil
}

func (s *Server) resolveRoute(ctx context.Context, in *resolveRouteInput) (*body[resolveRouteResponse], error) {
	r, err := s.core.Inbound.ResolveRoute(ctx, principalFrom(ctx).OrganizationID, in.Address)
	if err != nil {
		return nil, err
	}
	out := resolveRouteResponse{Address: lower(in.Address)}
	if r != nil {
		rr := toRoute(*r)
		out.Route = &rr
	}
	return &body[resolveRouteResponse]{out}, nil
}
