package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagDomains is the OpenAPI tag of the sending-domain routes (SPEC §4.3).
const tagDomains = "Domains"

// Domain and DNS record shapes of SPEC §2. The DKIM private key never appears: the response types simply
// have no field for it, so no code path can leak it by accident.

type dnsRecordResponse struct {
	ID         string     `json:"id" format:"uuid" doc:"Record id"`
	Type       string     `json:"type" enum:"SPF,DKIM,DMARC,RETURN_PATH,TRACKING" doc:"Which of the five records: SPF, DKIM, DMARC, RETURN_PATH or TRACKING"`
	RecordType string     `json:"recordType" enum:"TXT,CNAME,MX" example:"TXT" doc:"DNS type to publish the record as: TXT for SPF, DKIM and DMARC, CNAME for RETURN_PATH and TRACKING"`
	Host       string     `json:"host" doc:"Name to publish the record at"`
	Value      string     `json:"value" doc:"TXT text or CNAME target, exactly as to publish it"`
	TTL        int        `json:"ttl" doc:"Seconds"`
	Required   bool       `json:"required" doc:"SPF, DKIM and RETURN_PATH must all resolve for the domain to verify; DMARC and TRACKING are recommended and only reported"`
	Verified   bool       `json:"verified" doc:"Whether the last check found the record published"`
	CheckedAt  *time.Time `json:"checkedAt" doc:"Last check; null until the first verify"`
	Found      []string   `json:"found,omitempty" example:"[\"v=spf1 include:_spf.google.com ~all\"]" doc:"In the verify answer only: what DNS answered at host, the TXT records (each joined from its strings) or the CNAME target; absent when nothing was found. Bounded and with control characters replaced"`
	Problem    string     `json:"problem,omitempty" example:"the SPF record at mail.acme.example does not authorise Postmill; add include:spf.postmill.example to it (no qualifier, before the all mechanism)" doc:"In the verify answer only: why the record did not verify and what to change; absent when it verified"`
}

// domainResponse is the list variant (no records).
type domainResponse struct {
	ID            string     `json:"id" format:"uuid" doc:"Domain id"`
	Domain        string     `json:"domain" doc:"Trimmed and lower-cased"`
	Status        string     `json:"status" enum:"pending,failed,verified,suspended" doc:"pending until the required records verify; failed after a check that did not pass; suspended by an admin"`
	Region        string     `json:"region" doc:"Region the domain sends from"`
	VerifiedAt    *time.Time `json:"verifiedAt" doc:"Set the first time the domain verifies; never overwritten"`
	OpenTracking  bool       `json:"openTracking" doc:"Whether HTML sends from the domain carry an open-tracking pixel; off by default"`
	ClickTracking bool       `json:"clickTracking" doc:"Whether links in HTML sends from the domain are rewritten to record clicks; off by default"`
	CreatedAt     time.Time  `json:"createdAt" doc:"When the domain was added"`
}

// domainWithRecordsResponse repeats domainResponse's fields rather than embedding it, for the same reason
// as createdAPIKeyResponse: huma documents only exported embedded types.
type domainWithRecordsResponse struct {
	ID            string              `json:"id" format:"uuid" doc:"Domain id"`
	Domain        string              `json:"domain" doc:"Trimmed and lower-cased"`
	Status        string              `json:"status" enum:"pending,failed,verified,suspended" doc:"pending until the required records verify; failed after a check that did not pass; suspended by an admin"`
	Region        string              `json:"region" doc:"Region the domain sends from"`
	VerifiedAt    *time.Time          `json:"verifiedAt" doc:"Set the first time the domain verifies; never overwritten"`
	OpenTracking  bool                `json:"openTracking" doc:"Whether HTML sends from the domain carry an open-tracking pixel; off by default"`
	ClickTracking bool                `json:"clickTracking" doc:"Whether links in HTML sends from the domain are rewritten to record clicks; off by default"`
	CreatedAt     time.Time           `json:"createdAt" doc:"When the domain was added"`
	Records       []dnsRecordResponse `json:"records" nullable:"false" doc:"The five records to publish, with the latest check results"`
}

type createDomainRequest struct {
	_      struct{} `json:"-" additionalProperties:"true"`
	Domain string   `json:"domain" minLength:"1" doc:"Dotted name of labels of a-z, 0-9 and -, 1-63 characters each, no leading or trailing hyphen, at least one dot; trimmed and lower-cased"`
}

// updateDomainRequest is the PATCH body: an absent field leaves its setting as it is, so {} changes nothing.
// A null field counts as absent (huma skips null optional properties), never as "off".
type updateDomainRequest struct {
	_             struct{} `json:"-" additionalProperties:"true"`
	OpenTracking  *bool    `json:"openTracking,omitempty" doc:"Add a 1x1 open-tracking pixel to HTML bodies; absent or null leaves the setting as it is"`
	ClickTracking *bool    `json:"clickTracking,omitempty" doc:"Rewrite http and https links in HTML bodies to record clicks (unsubscribe links excepted); absent or null leaves the setting as it is"`
}

type updateDomainInput struct {
	ID   string `path:"id" format:"uuid" doc:"Domain id"`
	Body updateDomainRequest
}

func (s *Server) registerDomainRoutes() {
	session := access{kind: authSession}

	register(s, huma.Operation{
		OperationID: "list-domains", Method: http.MethodGet, Path: "/v1/domains",
		Tags: []string{tagDomains}, Summary: "List sending domains",
		Description: "The organization's domains, newest first, without their records: a bare array of the " +
			"newest 1000, or with limit or cursor a page {data, nextCursor}.",
	}, session, s.listDomains, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "create-domain", Method: http.MethodPost, Path: "/v1/domains", DefaultStatus: http.StatusCreated,
		Tags: []string{tagDomains}, Summary: "Add a sending domain",
		Description: "Generates a fresh RSA-2048 DKIM keypair and a selector unique to the domain, and returns the " +
			"five DNS records to publish. The domain starts pending. Required records: SPF, DKIM and RETURN_PATH; " +
			"DMARC and TRACKING are recommended. An organization holding as many domains as the deployment allows " +
			"(100 unless the operator raised POSTMILL_MAX_DOMAINS_PER_ORG) gets 403 resource_limit_reached.",
	}, session, s.createDomain, http.StatusBadRequest, http.StatusForbidden, http.StatusConflict)

	register(s, huma.Operation{
		OperationID: "get-domain", Method: http.MethodGet, Path: "/v1/domains/{id}",
		Tags: []string{tagDomains}, Summary: "Get a sending domain",
		Description: "The domain with its records and the latest check results.",
	}, session, s.getDomain, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "update-domain", Method: http.MethodPatch, Path: "/v1/domains/{id}",
		Tags: []string{tagDomains}, Summary: "Change a domain's tracking settings",
		Description: "Turns open and click tracking on or off. Absent (or null) fields keep their setting, so {} " +
			"changes nothing. Tracked sends are delivered one copy per recipient and use the domain's TRACKING record " +
			"(track.<domain>). Answers the domain with its records.",
	}, session, s.updateDomain, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "list-domain-dns-records", Method: http.MethodGet, Path: "/v1/domains/{id}/dns-records",
		Tags: []string{tagDomains}, Summary: "List a domain's DNS records",
	}, session, s.listDomainRecords, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "verify-domain", Method: http.MethodPost, Path: "/v1/domains/{id}/verify", DefaultStatus: http.StatusCreated,
		Tags: []string{tagDomains}, Summary: "Verify a sending domain",
		Description: "Checks every record over DNS, stores each result and applies the state table of SPEC §3: every " +
			"required record → verified; some → failed; none → stays pending. A failing run leaves a verified " +
			"domain verified (with the records' results updated); a suspended domain becomes verified again only " +
			"when every required record resolves. Each record of the answer also says what DNS answered (found) " +
			"and, when it did not verify, what is wrong with it (problem). Limited to 10 per organization per hour " +
			"(429 with retryAfterSeconds).",
	}, session, s.verifyDomain, http.StatusBadRequest, http.StatusNotFound, http.StatusTooManyRequests)

	register(s, huma.Operation{
		OperationID: "suspend-domain", Method: http.MethodPost, Path: "/v1/domains/{id}/suspend", DefaultStatus: http.StatusCreated,
		Tags: []string{tagDomains}, Summary: "Suspend a sending domain",
		Description: "Refuses sends from the domain (400) until a verify finds every required record again. " +
			"Answers the domain without records.",
	}, session, s.suspendDomain, http.StatusBadRequest, http.StatusNotFound)
}

func toRecords(in []ports.DNSRecord) []dnsRecordResponse {
	out := make([]dnsRecordResponse, 0, len(in))
	for _, r := range in {
		out = append(out, dnsRecordResponse{
			ID:         r.ID,
			Type:       r.Type,
			RecordType: r.RecordType,
			Host:       r.Host,
			Value:      r.Value,
			TTL:        r.TTL,
			Required:   r.Required,
			Verified:   r.Verified,
			CheckedAt:  utcPtr(r.CheckedAt),
			Found:      r.Found,
			Problem:    r.Problem,
		})
	}
	return out
}

func toDomain(d ports.Domain) domainResponse {
	return domainResponse{
		ID:            d.ID,
		Domain:        d.Name,
		Status:        string(d.Status),
		Region:        d.Region,
		VerifiedAt:    utcPtr(d.VerifiedAt),
		OpenTracking:  d.OpenTracking,
		ClickTracking: d.ClickTracking,
		CreatedAt:     utc(d.CreatedAt),
	}
}

func toDomainWithRecords(d ports.Domain) *body[domainWithRecordsResponse] {
	m := toDomain(d)
	return &body[domainWithRecordsResponse]{domainWithRecordsResponse{
		ID: m.ID, Domain: m.Domain, Status: m.Status, Region: m.Region, VerifiedAt: m.VerifiedAt,
		OpenTracking: m.OpenTracking, ClickTracking: m.ClickTracking, CreatedAt: m.CreatedAt,
		Records: toRecords(d.Records),
	}}
}

func (s *Server) listDomains(ctx context.Context, in *listQuery) (*body[listBody[domainResponse]], error) {
	orgID := principalFrom(ctx).OrganizationID
	if !in.paged() {
		domains, err := s.core.Domains.ListDomains(ctx, orgID)
		if err != nil {
			return nil, err
		}
		return &body[listBody[domainResponse]]{bareList(mapItems(domains, toDomain))}, nil
	}
	page, err := s.core.Domains.ListDomainsPage(ctx, orgID, in.pageQuery())
	if err != nil {
		return nil, err
	}
	return &body[listBody[domainResponse]]{pageList(mapItems(page.Data, toDomain), page.NextCursor)}, nil
}

func (s *Server) createDomain(ctx context.Context, in *body[createDomainRequest]) (*body[domainWithRecordsResponse], error) {
	d, err := s.core.Domains.CreateDomain(ctx, principalFrom(ctx).OrganizationID, in.Body.Domain)
	if err != nil {
		return nil, err
	}
	return toDomainWithRecords(d), nil
}

func (s *Server) getDomain(ctx context.Context, in *idPath) (*body[domainWithRecordsResponse], error) {
	d, err := s.core.Domains.GetDomain(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return toDomainWithRecords(d), nil
}

func (s *Server) listDomainRecords(ctx context.Context, in *idPath) (*body[[]dnsRecordResponse], error) {
	d, err := s.core.Domains.GetDomain(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[[]dnsRecordResponse]{toRecords(d.Records)}, nil
}

func (s *Server) verifyDomain(ctx context.Context, in *idPath) (*body[domainWithRecordsResponse], error) {
	d, err := s.core.Domains.VerifyDomain(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return toDomainWithRecords(d), nil
}

// updateDomain answers the Domain without records, like suspend: SPEC §2 reserves the with-records variant
// for create, get one and verify, and the issue asks for "the Domain, which carries both fields".
func (s *Server) updateDomain(ctx context.Context, in *updateDomainInput) (*body[domainResponse], error) {
	d, err := s.core.Domains.UpdateDomainTracking(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), ports.TrackingSettings{
		OpenTracking:  in.Body.OpenTracking,
		ClickTracking: in.Body.ClickTracking,
	})
	if err != nil {
		return nil, err
	}
	return &body[domainResponse]{toDomain(d)}, nil
}

// suspendDomain answers the Domain without records: SPEC §2 reserves the with-records variant for create,
// get one and verify.
func (s *Server) suspendDomain(ctx context.Context, in *idPath) (*body[domainResponse], error) {
	d, err := s.core.Domains.SuspendDomain(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[domainResponse]{toDomain(d)}, nil
}
