package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagDeliverability is the OpenAPI tag of the suppression, bounce and complaint routes (SPEC §4.5).
const tagDeliverability = "Deliverability"

// Suppression, bounce and complaint shapes. SPEC §2 leaves the record fields beyond the create fields open.
// Bounce and complaint fields copied from a remote report (status codes, diagnostic text, MTA names, the
// reporter's user agent, ...) are null when the report did not carry them, never "", so a client tests one
// thing for "unknown".

type suppressionResponse struct {
	ID        string    `json:"id" format:"uuid" doc:"What DELETE takes"`
	Address   string    `json:"address" doc:"Lower-cased address, or a bare domain that suppresses every address at it"`
	Scope     string    `json:"scope" enum:"global,tenant,domain,recipient" doc:"global: every organization (platform admins only); tenant: every send of the organization; domain: a whole recipient domain; recipient: one address"`
	Reason    string    `json:"reason" enum:"bounce,complaint,invalid,manual" doc:"Why the address is suppressed"`
	CreatedAt time.Time `json:"createdAt" doc:"When the suppression was added"`
}

// createSuppressionRequest bounds address at 320 characters, the bound of a contact's email (SPEC §2) and
// above the 254 an RFC 5321 §4.5.3.1.3 path leaves for an address.
type createSuppressionRequest struct {
	_       struct{} `json:"-" additionalProperties:"true"`
	Address string   `json:"address" minLength:"1" maxLength:"320" doc:"An address, or a bare domain (no @); trimmed and lower-cased. Scope domain needs a bare domain, scope recipient an address"`
	Scope   string   `json:"scope,omitempty" enum:"global,tenant,domain,recipient" default:"tenant" doc:"global is refused with 403: platform admins manage it under /v1/admin/suppressions"`
	Reason  string   `json:"reason,omitempty" enum:"bounce,complaint,invalid,manual" default:"manual" doc:"Why the address is suppressed"`
}

// createGlobalSuppressionRequest is the admin body: the route only makes global suppressions, so scope may
// be omitted and, when given, must say global rather than being silently overridden.
type createGlobalSuppressionRequest struct {
	_       struct{} `json:"-" additionalProperties:"true"`
	Address string   `json:"address" minLength:"1" maxLength:"320" doc:"An address, or a bare domain (no @); trimmed and lower-cased"`
	Scope   string   `json:"scope,omitempty" enum:"global" default:"global" doc:"Always global on this route; any other value is a 400"`
	Reason  string   `json:"reason,omitempty" enum:"bounce,complaint,invalid,manual" default:"manual" doc:"Why the address is suppressed"`
}

type pageInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"25" doc:"Page size"`
	Cursor string `query:"cursor" maxLength:"1024" doc:"nextCursor of the previous page"`
}

type bounceResponse struct {
	ID             string    `json:"id" format:"uuid" doc:"Bounce id"`
	MessageID      string    `json:"messageId" format:"uuid" doc:"The message that bounced"`
	RecipientID    string    `json:"recipientId" format:"uuid" doc:"The recipient of the message that bounced"`
	Address        string    `json:"address" doc:"The recipient address that bounced"`
	Type           string    `json:"type" enum:"hard,soft" doc:"RFC 3463 §3.1 class: hard (5.X.X, permanent; the recipient is bounced) or soft (4.X.X, retried)"`
	Class          string    `json:"class" enum:"bad_mailbox,bad_domain,inactive_mailbox,mailbox_full,message_too_large,policy_block,spam_block,authentication,rate_limited,routing,relay_denied,protocol,content,transient,unknown" doc:"What the refusal means, from the enhanced status code and the server's words. A hard bounce suppresses the address only for bad_mailbox, bad_domain and inactive_mailbox"`
	Status         *string   `json:"status" doc:"RFC 3463 enhanced status code such as 5.1.1; null when none was given or derivable"`
	Action         *string   `json:"action" doc:"RFC 3464 §2.3.3 action: failed or delayed; null when the report gave none"`
	DiagnosticCode *string   `json:"diagnosticCode" doc:"The remote server's words, e.g. smtp; 550 5.1.1 user unknown; null when none"`
	RemoteMTA      *string   `json:"remoteMta" doc:"The server that refused; null when unknown"`
	ReportingMTA   *string   `json:"reportingMta" doc:"The server that reported the bounce; null when unknown"`
	CreatedAt      time.Time `json:"createdAt" doc:"When the bounce was recorded"`
}

type bouncePageResponse struct {
	Data       []bounceResponse `json:"data" nullable:"false" doc:"Newest first"`
	NextCursor *string          `json:"nextCursor" doc:"Pass as cursor for the next page; null on the last page"`
}

type complaintResponse struct {
	ID             string     `json:"id" format:"uuid" doc:"Complaint id"`
	MessageID      string     `json:"messageId" format:"uuid" doc:"The message complained about"`
	RecipientID    *string    `json:"recipientId" format:"uuid" doc:"The recipient who complained; null when the report did not identify one"`
	Address        string     `json:"address" doc:"The complaining recipient's address"`
	FeedbackType   *string    `json:"feedbackType" doc:"RFC 5965 §7.3 feedback type: abuse, fraud, virus or other; null when none"`
	UserAgent      *string    `json:"userAgent" doc:"The reporting system; null when not given"`
	ReportedDomain *string    `json:"reportedDomain" doc:"null when not given"`
	SourceIP       *string    `json:"sourceIp" doc:"The address the reporter received the message from; null when not given"`
	ArrivalDate    *time.Time `json:"arrivalDate" doc:"When the reporter received the message; null when not given"`
	CreatedAt      time.Time  `json:"createdAt" doc:"When the complaint was recorded"`
}

type complaintPageResponse struct {
	Data       []complaintResponse `json:"data" nullable:"false" doc:"Newest first"`
	NextCursor *string             `json:"nextCursor" doc:"Pass as cursor for the next page; null on the last page"`
}

func (s *Server) registerDeliverabilityRoutes() {
	// SPEC §5 rule 9: list routes for writers accept either scope.
	read := access{kind: authKey, scopes: []string{ports.ScopeSuppressionsRead, ports.ScopeSuppressionsWrite}}
	write := access{kind: authKey, scopes: []string{ports.ScopeSuppressionsWrite}}
	emailsRead := access{kind: authKey, scopes: []string{ports.ScopeEmailsRead}}
	admin := access{kind: authAdmin}

	register(s, huma.Operation{
		OperationID: "list-suppressions", Method: http.MethodGet, Path: "/v1/suppressions",
		Tags: []string{tagDeliverability}, Summary: "List suppressions",
		Description: "The organization's suppressions, newest first: a bare array of the newest 1000, or with " +
			"limit or cursor a page {data, nextCursor}. Global suppressions are not listed.",
	}, read, s.listSuppressions, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "create-suppression", Method: http.MethodPost, Path: "/v1/suppressions", DefaultStatus: http.StatusCreated,
		Tags: []string{tagDeliverability}, Summary: "Suppress an address or domain",
		Description: "Blocks sends to an address, or with a bare domain to every address at it. Adding what " +
			"already exists (same address and scope) answers the existing suppression. Scope global is refused " +
			"with 403: platform admins manage it.",
	}, write, s.createSuppression, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "delete-suppression", Method: http.MethodDelete, Path: "/v1/suppressions/{id}",
		Tags: []string{tagDeliverability}, Summary: "Remove a suppression",
		Description: "deleted is false when the organization has no suppression with that id.",
	}, write, s.deleteSuppression, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "list-bounces", Method: http.MethodGet, Path: "/v1/bounces",
		Tags: []string{tagDeliverability}, Summary: "List bounces",
		Description: "Recorded bounces, newest first, a page at a time: from SMTP replies during delivery and from " +
			"delivery status notifications (RFC 3464) that arrived later. Fields the report did not carry are null.",
	}, emailsRead, s.listBounces, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "list-complaints", Method: http.MethodGet, Path: "/v1/complaints",
		Tags: []string{tagDeliverability}, Summary: "List complaints",
		Description: "Spam complaints from feedback reports (RFC 5965), newest first, a page at a time. Fields the " +
			"report did not carry are null.",
	}, emailsRead, s.listComplaints, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "admin-list-suppressions", Method: http.MethodGet, Path: "/v1/admin/suppressions",
		Tags: []string{tagAdmin}, Summary: "List global suppressions",
		Description: "Platform-wide suppressions, which apply to every organization's sends; newest first.",
	}, admin, s.listGlobalSuppressions)

	register(s, huma.Operation{
		OperationID: "admin-create-suppression", Method: http.MethodPost, Path: "/v1/admin/suppressions", DefaultStatus: http.StatusCreated,
		Tags: []string{tagAdmin}, Summary: "Add a global suppression",
		Description: "Suppresses an address or a bare domain for every organization. scope may be omitted; when " +
			"given it must be global.",
	}, admin, s.createGlobalSuppression, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "admin-delete-suppression", Method: http.MethodDelete, Path: "/v1/admin/suppressions/{id}",
		Tags: []string{tagAdmin}, Summary: "Remove a global suppression",
		Description: "deleted is false when no global suppression has that id.",
	}, admin, s.deleteGlobalSuppression, http.StatusBadRequest)
}

func toSuppression(sp ports.Suppression) suppressionResponse {
	return suppressionResponse{
		ID:        sp.ID,
		Address:   sp.Address,
		Scope:     sp.Scope,
		Reason:    sp.Reason,
		CreatedAt: utc(sp.CreatedAt),
	}
}

func toSuppressions(in []ports.Suppression) *body[[]suppressionResponse] {
	out := make([]suppressionResponse, 0, len(in))
	for _, sp := range in {
		out = append(out, toSuppression(sp))
	}
	return &body[[]suppressionResponse]{out}
}

func toBounce(b ports.Bounce) bounceResponse {
	return bounceResponse{
		ID:             b.ID,
		MessageID:      b.MessageID,
		RecipientID:    b.RecipientID,
		Address:        b.Address,
		Type:           b.Type,
		Class:          bounceClass(b.Class),
		Status:         nullIfEmpty(b.Status),
		Action:         nullIfEmpty(b.Action),
		DiagnosticCode: nullIfEmpty(b.DiagnosticCode),
		RemoteMTA:      nullIfEmpty(b.RemoteMTA),
		ReportingMTA:   nullIfEmpty(b.ReportingMTA),
		CreatedAt:      utc(b.CreatedAt),
	}
}

// bounceClass is a bounce's class as listed: the core classifies every bounce it returns, so "" only comes
// from a store that was not asked to, and reads as unknown.
func bounceClass(c string) string {
	if c == "" {
		return ports.BounceClassUnknown
	}
	return c
}

func toComplaint(c ports.Complaint) complaintResponse {
	return complaintResponse{
		ID:             c.ID,
		MessageID:      c.MessageID,
		RecipientID:    nullIfEmpty(c.RecipientID),
		Address:        c.Address,
		FeedbackType:   nullIfEmpty(c.FeedbackType),
		UserAgent:      nullIfEmpty(c.UserAgent),
		ReportedDomain: nullIfEmpty(c.ReportedDomain),
		SourceIP:       nullIfEmpty(c.SourceIP),
		ArrivalDate:    utcPtr(c.ArrivalDate),
		CreatedAt:      utc(c.CreatedAt),
	}
}

func (s *Server) listSuppressions(ctx context.Context, in *listQuery) (*body[listBody[suppressionResponse]], error) {
	orgID := principalFrom(ctx).OrganizationID
	if !in.paged() {
		list, err := s.core.Deliverability.ListSuppressions(ctx, orgID)
		if err != nil {
			return nil, err
		}
		return &body[listBody[suppressionResponse]]{bareList(mapItems(list, toSuppression))}, nil
	}
	page, err := s.core.Deliverability.ListSuppressionsPage(ctx, orgID, in.pageQuery())
	if err != nil {
		return nil, err
	}
	return &body[listBody[suppressionResponse]]{pageList(mapItems(page.Data, toSuppression), page.NextCursor)}, nil
}

func (s *Server) createSuppression(ctx context.Context, in *body[createSuppressionRequest]) (*body[suppressionResponse], error) {
	sp, err := s.core.Deliverability.CreateSuppression(ctx, principalFrom(ctx).OrganizationID, ports.NewSuppression{
		Address: in.Body.Address,
		Scope:   in.Body.Scope,
		Reason:  in.Body.Reason,
	})
	if err != nil {
		return nil, err
	}
	return &body[suppressionResponse]{toSuppression(sp)}, nil
}

func (s *Server) deleteSuppression(ctx context.Context, in *idPath) (*body[deletedResponse], error) {
	deleted, err := s.core.Deliverability.DeleteSuppression(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[deletedResponse]{deletedResponse{Deleted: deleted}}, nil
}

func (s *Server) listBounces(ctx context.Context, in *pageInput) (*body[bouncePageResponse], error) {
	page, err := s.core.Deliverability.ListBounces(ctx, principalFrom(ctx).OrganizationID, ports.PageQuery{Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, err
	}
	out := bouncePageResponse{Data: make([]bounceResponse, 0, len(page.Data)), NextCursor: nullIfEmpty(page.NextCursor)}
	for _, b := range page.Data {
		out.Data = append(out.Data, toBounce(b))
	}
	return &body[bouncePageResponse]{out}, nil
}

func (s *Server) listComplaints(ctx context.Context, in *pageInput) (*body[complaintPageResponse], error) {
	page, err := s.core.Deliverability.ListComplaints(ctx, principalFrom(ctx).OrganizationID, ports.PageQuery{Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, err
	}
	out := complaintPageResponse{Data: make([]complaintResponse, 0, len(page.Data)), NextCursor: nullIfEmpty(page.NextCursor)}
	for _, c := range page.Data {
		out.Data = append(out.Data, toComplaint(c))
	}
	return &body[complaintPageResponse]{out}, nil
}

func (s *Server) listGlobalSuppressions(ctx context.Context, _ *struct{}) (*body[[]suppressionResponse], error) {
	list, err := s.core.Deliverability.ListGlobalSuppressions(ctx)
	if err != nil {
		return nil, err
	}
	return toSuppressions(list), nil
}

func (s *Server) createGlobalSuppression(ctx context.Context, in *body[createGlobalSuppressionRequest]) (*body[suppressionResponse], error) {
	sp, err := s.core.Deliverability.CreateGlobalSuppression(ctx, ports.NewSuppression{
		Address: in.Body.Address,
		Scope:   ports.SuppressionScopeGlobal,
		Reason:  in.Body.Reason,
	})
	if err != nil {
		return nil, err
	}
	return &body[suppressionResponse]{toSuppression(sp)}, nil
}

func (s *Server) deleteGlobalSuppression(ctx context.Context, in *idPath) (*body[deletedResponse], error) {
	deleted, err := s.core.Deliverability.DeleteGlobalSuppression(ctx, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[deletedResponse]{deletedResponse{Deleted: deleted}}, nil
}
