package edge

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagReceived is the OpenAPI tag of the received-mail routes (SPEC §4.12, Key, inbound:read).
const tagReceived = "Received emails"

type receivedEmailResponse struct {
	ID             string    `json:"id" format:"uuid" doc:"Received email id"`
	To             string    `json:"to" example:"support@inbound.acme.example" doc:"Envelope recipient (RCPT TO)"`
	From           string    `json:"from" example:"jane@example.org" doc:"Envelope sender (MAIL FROM); empty for the null path"`
	HeaderFrom     string    `json:"headerFrom" example:"jane@example.org" doc:"Address of the From header"`
	HeaderFromName string    `json:"headerFromName" example:"Jane Doe" doc:"Display name of the From header, RFC 2047 decoded"`
	ToAddresses    []string  `json:"toAddresses" nullable:"false" doc:"Addresses of the To header"`
	CcAddresses    []string  `json:"ccAddresses" nullable:"false" doc:"Addresses of the Cc header"`
	Subject        string    `json:"subject" doc:"Subject header, RFC 2047 decoded"`
	MessageID      string    `json:"messageId" doc:"Message-ID header"`
	InReplyTo      *string   `json:"inReplyTo" doc:"In-Reply-To header; null when absent"`
	References     *string   `json:"references" doc:"References header; null when absent"`
	SizeBytes      int64     `json:"sizeBytes" doc:"Size of the raw message"`
	SpamStatus     string    `json:"spamStatus" enum:"ham,spam" doc:"Verdict of the spam check"`
	ScanStatus     string    `json:"scanStatus" enum:"clean,infected,error" doc:"Worst verdict of the attachment scans; clean without attachments"`
	Status         string    `json:"status" enum:"delivered,pending,failed,blocked,dead_lettered,quarantined" doc:"delivered: the route's action is done (store: kept; webhook: a 2xx answer); pending: the webhook or forward is not done yet; failed: the webhook's 5 attempts failed; blocked: the webhook destination resolves to a forbidden address; dead_lettered: no route matched, kept; quarantined: spam or an attachment not clean, action not carried out"`
	RouteID        *string   `json:"routeId" doc:"The route that took the message; null when dead-lettered"`
	RouteAction    *string   `json:"routeAction" doc:"That route's action; null when dead-lettered"`
	ForwardStatus  *string   `json:"forwardStatus" doc:"forward_email routes: pending, sent or failed; null otherwise"`
	ReceivedAt     time.Time `json:"receivedAt" doc:"When the MX listener accepted the message"`
}

type receivedAttachmentResponse struct {
	ID            string     `json:"id" format:"uuid" doc:"Attachment id"`
	Filename      string     `json:"filename" doc:"Decoded file name (RFC 2047, RFC 2231)"`
	ContentType   string     `json:"contentType" doc:"MIME type"`
	Size          int64      `json:"size" doc:"Decoded size in bytes"`
	Inline        bool       `json:"inline" doc:"An inline part (Content-Disposition inline, or a Content-ID in multipart/related)"`
	ContentID     string     `json:"contentId" doc:"Content-ID without angle brackets; empty when none"`
	ScanStatus    string     `json:"scanStatus" enum:"clean,infected,error" doc:"Malware scan verdict"`
	ScanSignature string     `json:"scanSignature" doc:"What the scanner found; empty when clean"`
	ScannedAt     *time.Time `json:"scannedAt" doc:"When it was scanned"`
	Downloadable  bool       `json:"downloadable" doc:"true when the scan is clean and the bytes are stored"`
}

type receivedEmailDetail struct {
	receivedEmailResponse
	Text        string                       `json:"text" doc:"text/plain body decoded to UTF-8"`
	HTML        string                       `json:"html" doc:"text/html body decoded to UTF-8"`
	Headers     map[string]any               `json:"headers" doc:"Header name to value, or to the list of values when repeated"`
	Attachments []receivedAttachmentResponse `json:"attachments" nullable:"false" doc:"Attachments and inline parts"`
}

type receivedList struct {
	Data   []receivedEmailResponse `json:"data" nullable:"false" doc:"Received emails, newest first"`
	Limit  int                     `json:"limit" doc:"The limit applied"`
	Offset int                     `json:"offset" doc:"The offset applied"`
}

type receivedListInput struct {
	Limit  int `query:"limit" minimum:"1" maximum:"100" default:"25" doc:"Page size, 1-100"`
	Offset int `query:"offset" minimum:"0" default:"0" doc:"Emails to skip"`
}

type attachmentPath struct {
	ID    string `path:"id" format:"uuid" doc:"Received email id"`
	AttID string `path:"attId" format:"uuid" doc:"Attachment id"`
}

type fileOutput struct {
	ContentType        string `header:"Content-Type" doc:"Media type"`
	ContentDisposition string `header:"Content-Disposition" doc:"Always attachment, with the file name"`
	NoSniff            string `header:"X-Content-Type-Options" doc:"Always nosniff"`
	Body               []byte
}

func (s *Server) registerReceivedRoutes() {
	read := access{kind: authKey, scopes: []string{ports.ScopeInboundRead}}
	register(s, huma.Operation{OperationID: "list-received-emails", Method: http.MethodGet, Path: "/v1/received-emails",
		Tags: []string{tagReceived}, Summary: "List received emails", Description: "Newest first, {data, limit, offset}."},
		read, s.listReceived, http.StatusBadRequest)
	register(s, huma.Operation{OperationID: "get-received-email", Method: http.MethodGet, Path: "/v1/received-emails/{id}",
		Tags: []string{tagReceived}, Summary: "Get a received email with bodies, headers and attachments"},
		read, s.getReceived, http.StatusBadRequest, http.StatusNotFound)
	register(s, huma.Operation{OperationID: "get-received-email-raw", Method: http.MethodGet, Path: "/v1/received-emails/{id}/raw",
		Tags: []string{tagReceived}, Summary: "Download the message as received (message/rfc822)"},
		read, s.receivedRaw, http.StatusBadRequest, http.StatusNotFound)
	register(s, huma.Operation{OperationID: "get-received-attachment", Method: http.MethodGet, Path: "/v1/received-emails/{id}/attachments/{attId}",
		Tags: []string{tagReceived}, Summary: "Download an attachment whose scan is clean",
		Description: "403 naming the verdict when the scan is not clean; 404 for no such attachment or no stored object."},
		read, s.receivedAttachment, http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound)
}

func lower(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func toReceived(e ports.ReceivedEmail) receivedEmailResponse {
	return receivedEmailResponse{ID: e.ID, To: e.To, From: e.From, HeaderFrom: e.HeaderFrom, HeaderFromName: e.HeaderFromName,
		ToAddresses: nonNilStrings(e.ToAddresses), CcAddresses: nonNilStrings(e.CcAddresses), Subject: e.Subject,
		MessageID: e.MessageID, InReplyTo: e.InReplyTo, References: e.References, SizeBytes: e.SizeBytes,
		SpamStatus: e.SpamStatus, ScanStatus: e.ScanStatus, Status: e.Status, RouteID: e.RouteID, RouteAction: e.RouteAction,
		ForwardStatus: e.ForwardStatus, ReceivedAt: utc(e.ReceivedAt)}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) listReceived(ctx context.Context, in *receivedListInput) (*body[receivedList], error) {
	es, err := s.core.Inbound.ListReceived(ctx, principalFrom(ctx).OrganizationID, in.Limit, in.Offset)
	if err != nil {
		return nil, err
	}
	return &body[receivedList]{receivedList{Data: mapItems(es, toReceived), Limit: in.Limit, Offset: in.Offset}}, nil
}

func (s *Server) getReceived(ctx context.Context, in *idPath) (*body[receivedEmailDetail], error) {
	e, err := s.core.Inbound.GetReceived(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	d := receivedEmailDetail{receivedEmailResponse: toReceived(e), Text: e.Text, HTML: e.HTML, Headers: map[string]any{},
		Attachments: []receivedAttachmentResponse{}}
	for k, v := range e.Headers {
		if len(v) == 1 {
			d.Headers[k] = v[0]
		} else {
			d.Headers[k] = v
		}
	}
	for _, a := range e.Attachments {
		d.Attachments = append(d.Attachments, receivedAttachmentResponse{ID: a.ID, Filename: a.Filename, ContentType: a.ContentType,
			Size: a.Size, Inline: a.Inline, ContentID: a.ContentID, ScanStatus: a.ScanStatus, ScanSignature: a.ScanSignature,
			ScannedAt: utcPtr(a.ScannedAt), Downloadable: a.Downloadable()})
	}
	return &body[receivedEmailDetail]{d}, nil
}

func (s *Server) receivedRaw(ctx context.Context, in *idPath) (*fileOutput, error) {
	id := canonicalUUID(in.ID)
	raw, err := s.core.Inbound.ReceivedRaw(ctx, principalFrom(ctx).OrganizationID, id)
	if err != nil {
		return nil, err
	}
	return &fileOutput{ContentType: "message/rfc822", ContentDisposition: attachmentDisposition(id + ".eml"), NoSniff: "nosniff", Body: raw}, nil
}

func (s *Server) receivedAttachment(ctx context.Context, in *attachmentPath) (*fileOutput, error) {
	a, data, err := s.core.Inbound.ReceivedAttachment(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), canonicalUUID(in.AttID))
	if err != nil {
		return nil, err
	}
	ct := a.ContentType
	if ct == "" || strings.ContainsAny(ct, "\r\n") {
		ct = "application/octet-stream"
	}
	return &fileOutput{ContentType: ct, ContentDisposition: attachmentDisposition(a.Filename), NoSniff: "nosniff", Body: data}, nil
}

// attachmentDisposition is always an attachment: an ASCII fallback name with everything outside printable
// ASCII, quotes and backslashes stripped, and the UTF-8 name in RFC 5987's filename* form.
func attachmentDisposition(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r >= 0x20 && r < 0x7f && r != '"' && r != '\\' && r != '/' {
			b.WriteRune(r)
		}
	}
	ascii := strings.TrimSpace(b.String())
	if ascii == "" {
		ascii = "attachment"
	}
	if name == "" {
		name = ascii
	}
	return `attachment; filename="` + ascii + `"; filename*=UTF-8''` + rfc5987(name)
}

// rfc5987 percent-encodes every byte of s that is not an attr-char of RFC 5987 §3.2.1.
func rfc5987(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
