package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagEmails is the OpenAPI tag of the send API (SPEC §4.2).
const tagEmails = "Emails"

type sendEmailInput struct {
	IdempotencyKey string `header:"Idempotency-Key" maxLength:"256" doc:"Makes the send safe to retry: scoped to the organization and the whole message; a reused key returns the original message with deduped: true (the body is not compared)"`
	Body           sendEmailRequest
}

type sendResponse struct {
	ID      string `json:"id" format:"uuid" doc:"Message id, for GET /v1/emails/{id}"`
	Status  string `json:"status" enum:"queued,scheduled,sent,delivered,delivery_delayed,bounced,complained,opened,clicked,failed,cancelled" doc:"queued, scheduled, or on a replay the original message's current state"`
	Deduped bool   `json:"deduped,omitempty" doc:"Present, and true, only when an Idempotency-Key replay returned an existing message"`
}

// batchRequest is the body of POST /v1/emails/batch, kept as the JSON it came as: the route checks the
// batch's own schema (batchEnvelope), then each email against the schema of POST /v1/emails on its own, so
// that an email breaking it fails alone and the others are sent (SPEC §4.2: one item's failure does not
// abort the rest; a 400 is for the batch's own schema).
type batchRequest struct{ raw []byte }

// UnmarshalJSON keeps the body; the route validates it (the operation skips huma's body validation).
func (b *batchRequest) UnmarshalJSON(data []byte) error {
	b.raw = slices.Clone(data)
	return nil
}

// Schema documents the body: {emails: [...]}, 1-500 POST /v1/emails bodies.
func (batchRequest) Schema(r huma.Registry) *huma.Schema {
	least, most := 1, ports.MaxBatch
	return &huma.Schema{
		Type: huma.TypeObject, Required: []string{"emails"}, AdditionalProperties: true,
		Properties: map[string]*huma.Schema{"emails": {
			Type: huma.TypeArray, MinItems: &least, MaxItems: &most, Items: r.Schema(reflect.TypeFor[sendEmailRequest](), true, ""),
			Description: "Each item is a POST /v1/emails body; an item that breaks its schema is that item's error",
		}},
	}
}

// batchEnvelope is the batch's own schema (its Schema), checked before any email: emails is an array of
// 1-500 objects.
type batchEnvelope struct{}

// Schema makes each item an object, whatever it holds.
func (batchEnvelope) Schema(huma.Registry) *huma.Schema {
	least, most := 1, ports.MaxBatch
	return &huma.Schema{
		Type: huma.TypeObject, Required: []string{"emails"}, AdditionalProperties: true,
		Properties: map[string]*huma.Schema{"emails": {
			Type: huma.TypeArray, MinItems: &least, MaxItems: &most, Items: &huma.Schema{Type: huma.TypeObject},
		}},
	}
}

// batchSchemas are the schemas the batch route checks by hand: its envelope (in a registry of its own, out
// of the OpenAPI document) and one email (the API's, as POST /v1/emails uses it).
type batchSchemas struct {
	envelopeRegistry huma.Registry
	envelope         *huma.Schema
	emailRegistry    huma.Registry
	email            *huma.Schema
}

func newBatchSchemas(api huma.API) *batchSchemas {
	reg := huma.NewMapRegistry("#/components/schemas/", huma.DefaultSchemaNamer)
	emails := api.OpenAPI().Components.Schemas
	return &batchSchemas{
		envelopeRegistry: reg, envelope: reg.Schema(reflect.TypeFor[batchEnvelope](), true, ""),
		emailRegistry: emails, email: emails.Schema(reflect.TypeFor[sendEmailRequest](), true, ""),
	}
}

// envelopeItems checks the batch's own schema and returns its emails. The validator is shown the
// envelope's shape only, each object item standing as {}: the emails (up to 56 MiB with their
// attachments) are decoded once each, by request, not a second time here.
func (b *batchSchemas) envelopeItems(raw []byte) ([]json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, ports.ValidationError(ports.FieldViolation{Message: "body must be a JSON object"})
	}
	doc := make(map[string]any, len(top))
	for k := range top {
		doc[k] = nil // any value: the envelope allows other properties
	}
	var items []json.RawMessage
	if emails, ok := top["emails"]; ok {
		if err := json.Unmarshal(emails, &items); err != nil || items == nil {
			var v any // not an array (or null): the validator names what it is
			_ = json.Unmarshal(emails, &v)
			doc["emails"] = v
		} else {
			shape := make([]any, len(items))
			for i, item := range items {
				if t := bytes.TrimLeft(item, " \t\r\n"); len(t) > 0 && t[0] == '{' {
					shape[i] = map[string]any{}
				} else {
					_ = json.Unmarshal(item, &shape[i])
				}
			}
			doc["emails"] = shape
		}
	}
	res := &huma.ValidateResult{}
	huma.Validate(b.envelopeRegistry, b.envelope, huma.NewPathBuffer([]byte("body"), 0), huma.ModeWriteToServer, doc, res)
	if len(res.Errors) > 0 {
		return nil, ports.ValidationError(violations(res.Errors)...)
	}
	return items, nil
}

// request checks one email of a batch as POST /v1/emails checks its body (schema, then Resolve, then the
// conversion) and returns it, or the validation error that is this item's answer.
func (b *batchSchemas) request(raw json.RawMessage) (ports.SendRequest, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return ports.SendRequest{}, ports.ValidationError(ports.FieldViolation{Message: "must be a JSON object"})
	}
	res := &huma.ValidateResult{}
	huma.Validate(b.emailRegistry, b.email, huma.NewPathBuffer([]byte("body"), 0), huma.ModeWriteToServer, doc, res)
	var item sendEmailRequest
	decodeErr := json.Unmarshal(raw, &item)
	if decodeErr == nil || len(res.Errors) > 0 {
		// Like huma, Resolve runs on what could be read, so every problem is reported at once.
		res.Errors = append(res.Errors, item.Resolve(nil, huma.NewPathBuffer([]byte("body"), 0))...)
	}
	if len(res.Errors) > 0 {
		return ports.SendRequest{}, ports.ValidationError(violations(res.Errors)...)
	}
	if decodeErr != nil {
		return ports.SendRequest{}, ports.ValidationError(ports.FieldViolation{Message: "does not match the schema of POST /v1/emails"})
	}
	req, bad := item.toSendRequest("")
	if len(bad) > 0 {
		return ports.SendRequest{}, ports.ValidationError(bad...)
	}
	return req, nil
}

type sendBatchInput struct {
	Body batchRequest
}

// batchItemResponse is one result of a batch: accepted (id, status, deduped?) or failed (error), both with
// the index of the request item. It is written with omitempty and documented as a oneOf of the two shapes.
type batchItemResponse struct {
	Index   int    `json:"index"`
	ID      string `json:"id,omitempty"`
	Status  string `json:"status,omitempty"`
	Deduped bool   `json:"deduped,omitempty"`
	Error   string `json:"error,omitempty"`
}

type batchItemAccepted struct {
	Index   int    `json:"index" doc:"Position of the item in the request"`
	ID      string `json:"id" format:"uuid" doc:"Message id"`
	Status  string `json:"status" enum:"queued,scheduled,sent,delivered,delivery_delayed,bounced,complained,opened,clicked,failed,cancelled" doc:"queued or scheduled, or an existing message's current state"`
	Deduped bool   `json:"deduped,omitempty" doc:"Present, and true, only when an existing message was returned instead of a new one"`
}

type batchItemFailed struct {
	Index int    `json:"index" doc:"Position of the item in the request"`
	Error string `json:"error" doc:"Why this item was not sent, in the words of SPEC §7"`
}

// Schema documents the two shapes of a batch result.
func (batchItemResponse) Schema(r huma.Registry) *huma.Schema {
	return &huma.Schema{OneOf: []*huma.Schema{
		r.Schema(reflect.TypeFor[batchItemAccepted](), true, ""),
		r.Schema(reflect.TypeFor[batchItemFailed](), true, ""),
	}}
}

type batchResponse struct {
	Results []batchItemResponse `json:"results" nullable:"false" doc:"One per request item, in request order"`
}

type recipientResponse struct {
	Type    string `json:"type" enum:"to,cc,bcc" doc:"to, cc or bcc"`
	Address string `json:"address" doc:"Recipient address"`
	Status  string `json:"status" enum:"queued,scheduled,sent,delivered,delivery_delayed,bounced,complained,opened,clicked,failed,cancelled" doc:"This recipient's delivery state"`
}

type timelineEventResponse struct {
	Type             string    `json:"type" enum:"queued,scheduled,sent,delivered,delivery_delayed,bounced,complained,opened,clicked,failed,cancelled" doc:"The event type without the email. prefix"`
	OccurredAt       time.Time `json:"occurredAt" doc:"When it happened"`
	ProviderResponse *string   `json:"providerResponse" doc:"What the receiving server (or the sandbox) said; null when nothing"`
}

type messageResponse struct {
	ID          string                  `json:"id" format:"uuid" doc:"Message id"`
	Status      string                  `json:"status" enum:"queued,scheduled,sent,delivered,delivery_delayed,bounced,complained,opened,clicked,failed,cancelled" doc:"The message's state (SPEC §3)"`
	From        string                  `json:"from" doc:"Sender address as sent"`
	Subject     string                  `json:"subject" doc:"Subject as sent (the published template's when a template was used)"`
	Sandbox     bool                    `json:"sandbox" doc:"true when sent in sandbox mode (never handed to delivery)"`
	CreatedAt   time.Time               `json:"createdAt" doc:"When the send was accepted"`
	ScheduledAt *time.Time              `json:"scheduledAt,omitempty" doc:"Present for messages sent with scheduledAt"`
	To          []string                `json:"to" nullable:"false" doc:"To addresses"`
	Cc          []string                `json:"cc,omitempty" doc:"Cc addresses; absent when none"`
	Bcc         []string                `json:"bcc,omitempty" doc:"Bcc addresses; absent when none"`
	ReplyTo     string                  `json:"replyTo,omitempty" doc:"Reply-To address; absent when none"`
	Recipients  []recipientResponse     `json:"recipients" nullable:"false" doc:"Each recipient with its own delivery state"`
	Events      []timelineEventResponse `json:"events" nullable:"false" doc:"Timeline, oldest first"`
	Tags        map[string]string       `json:"tags" nullable:"false" doc:"As sent; {} when none"`
	Metadata    jsonObject              `json:"metadata" doc:"As sent; {} when none"`
}

type cancelResponse struct {
	ID     string `json:"id" format:"uuid" doc:"Message id"`
	Status string `json:"status" enum:"cancelled" doc:"Always cancelled"`
}

type listEmailsInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"25" doc:"Page size"`
	Cursor string `query:"cursor" maxLength:"1024" doc:"nextCursor of the previous page"`
	Status string `query:"status" enum:"queued,scheduled,sent,delivered,delivery_delayed,bounced,complained,opened,clicked,failed,cancelled" doc:"Only messages in this state"`
}

type emailListItem struct {
	ID          string     `json:"id" format:"uuid" doc:"Message id"`
	Status      string     `json:"status" enum:"queued,scheduled,sent,delivered,delivery_delayed,bounced,complained,opened,clicked,failed,cancelled" doc:"The message's state (SPEC §3)"`
	From        string     `json:"from" doc:"Sender address as sent"`
	Subject     string     `json:"subject" doc:"Subject as sent"`
	To          []string   `json:"to" nullable:"false" doc:"The To addresses"`
	CreatedAt   time.Time  `json:"createdAt" doc:"When the send was accepted"`
	ScheduledAt *time.Time `json:"scheduledAt" doc:"null unless the message was scheduled"`
	Sandbox     bool       `json:"sandbox" doc:"true when sent in sandbox mode"`
}

type emailPageResponse struct {
	Data       []emailListItem `json:"data" nullable:"false" doc:"Newest first"`
	NextCursor *string         `json:"nextCursor" doc:"Pass as cursor for the next page; null on the last page"`
}

func (s *Server) registerEmailRoutes() {
	send := access{kind: authKey, scopes: []string{ports.ScopeEmailsSend}}

	register(s, huma.Operation{
		OperationID: "send-email", Method: http.MethodPost, Path: "/v1/emails", DefaultStatus: http.StatusAccepted,
		Tags: []string{tagEmails}, Summary: "Send an email",
		Description: "Accepts and queues one email (202: accepted, not delivered). The body is at most 48 MiB, " +
			"enough for 25 MiB of attachments in base64 and 5 MiB each of html and text. A larger body that " +
			"breaks an attachment or body size bound is still a 400 naming the field (sizes from the base64 " +
			"length, nothing buffered); any other is a 413. Rejections: 400 (validation, unknown or unverified " +
			"domain, suppressed recipient, rejected attachment), 402 plan_limit_exceeded, 403 org_suspended, " +
			"429 warmup_cap_reached.",
		MaxBodyBytes: SendMaxBodyBytes,
		Middlewares:  huma.Middlewares{sizeGuard(false)},
	}, send, s.sendEmail, http.StatusBadRequest, http.StatusPaymentRequired, http.StatusForbidden,
		http.StatusRequestEntityTooLarge, http.StatusTooManyRequests)

	register(s, huma.Operation{
		OperationID: "send-email-batch", Method: http.MethodPost, Path: "/v1/emails/batch", DefaultStatus: http.StatusAccepted,
		Tags: []string{tagEmails}, Summary: "Send a batch of emails",
		Description: "1-500 emails, each through the full single-send path; results are aligned to the request by " +
			"index and one item's failure never aborts the rest. An item that breaks the schema of POST /v1/emails " +
			"(a missing field, an address that is not one, an attachment over its size limit or content that is not " +
			"base64) or the send rules is that item's error, as the single send would answer it; a 400 is for the " +
			"batch's own schema (emails missing, empty, over 500 items, or an item that is not an object). The " +
			"Idempotency-Key header is ignored. The body is at most 56 MiB; a larger one that breaks an attachment " +
			"or body size bound is a 400 naming the item's field, any other a 413.",
		MaxBodyBytes:     BatchMaxBodyBytes,
		Middlewares:      huma.Middlewares{sizeGuard(true)},
		SkipValidateBody: true, // sendEmailBatch checks the envelope, then each email on its own
	}, send, s.sendEmailBatch, http.StatusBadRequest, http.StatusRequestEntityTooLarge)
	s.batch = newBatchSchemas(s.api)

	register(s, huma.Operation{
		OperationID: "get-email", Method: http.MethodGet, Path: "/v1/emails/{id}",
		Tags: []string{tagEmails}, Summary: "Get an email",
		Description: "The message with its recipients and event timeline.",
	}, access{kind: authKey, scopes: []string{ports.ScopeEmailsRead}}, s.getEmail, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "cancel-email", Method: http.MethodPost, Path: "/v1/emails/{id}/cancel", DefaultStatus: http.StatusCreated,
		Tags: []string{tagEmails}, Summary: "Cancel a scheduled email",
		Description: "Only a scheduled message can be cancelled; any other state is a 409.",
	}, send, s.cancelEmail, http.StatusBadRequest, http.StatusNotFound, http.StatusConflict)

	register(s, huma.Operation{
		OperationID: "list-emails", Method: http.MethodGet, Path: "/v1/emails",
		Tags: []string{tagEmails}, Summary: "List emails",
		Description: "The organization's messages, newest first, a page at a time: {data: [{id, status, from, " +
			"subject, to, createdAt, scheduledAt, sandbox}], nextCursor}.",
	}, access{kind: authSession}, s.listEmails, http.StatusBadRequest)
}

func (s *Server) sendEmail(ctx context.Context, in *sendEmailInput) (*body[sendResponse], error) {
	req, bad := in.Body.toSendRequest("")
	if len(bad) > 0 {
		return nil, ports.ValidationError(bad...)
	}
	req.IdempotencyKey = in.IdempotencyKey
	res, err := s.core.Emails.Send(ctx, principalFrom(ctx).OrganizationID, req)
	if err != nil {
		if in.Body.To.single {
			err = singleToPath(err)
		}
		return nil, err
	}
	return &body[sendResponse]{sendResponse{ID: res.ID, Status: string(res.Status), Deduped: res.Deduped}}, nil
}

func (s *Server) sendEmailBatch(ctx context.Context, in *sendBatchInput) (*body[batchResponse], error) {
	items, err := s.batch.envelopeItems(in.Body.raw)
	if err != nil {
		return nil, err
	}
	out := make([]batchItemResponse, 0, len(items))
	reqs := make([]ports.SendRequest, 0, len(items))
	at := make([]int, 0, len(items)) // the batch index of each request sent to the core
	for i, raw := range items {
		req, err := s.batch.request(raw)
		if err != nil {
			out = append(out, batchItemResponse{Index: i, Error: itemError(ctx, err)})
			continue
		}
		reqs = append(reqs, req)
		at = append(at, i)
	}
	if len(reqs) > 0 {
		results, err := s.core.Emails.SendBatch(ctx, principalFrom(ctx).OrganizationID, reqs)
		if err != nil {
			return nil, err
		}
		for _, r := range results {
			if r.Index < 0 || r.Index >= len(at) {
				return nil, fmt.Errorf("edge: batch result for item %d of %d", r.Index, len(at))
			}
			if r.Err != nil {
				out = append(out, batchItemResponse{Index: at[r.Index], Error: itemError(ctx, r.Err)})
				continue
			}
			out = append(out, batchItemResponse{Index: at[r.Index], ID: r.Result.ID, Status: string(r.Result.Status), Deduped: r.Result.Deduped})
		}
	}
	slices.SortStableFunc(out, func(a, b batchItemResponse) int { return a.Index - b.Index })
	return &body[batchResponse]{batchResponse{Results: out}}, nil
}

// singleToPath names `to` rather than `to.0` in the details of a validation error when `to` was sent as
// one address, not an array: the core sees a list either way (SPEC §7's details path is the field sent).
func singleToPath(err error) error {
	pe, ok := ports.AsError(err)
	if !ok || pe.Code != ports.CodeInvalidArgument || !slices.ContainsFunc(pe.Details, func(d ports.FieldViolation) bool { return d.Path == "to.0" }) {
		return err
	}
	out := *pe
	out.Details = slices.Clone(pe.Details)
	for i := range out.Details {
		if out.Details[i].Path == "to.0" {
			out.Details[i].Path = "to"
		}
	}
	return &out
}

// itemError is the human-readable error of one failed batch item: the SPEC §7 message, with the schema
// violations appended when the core reports some. Internal errors are logged with the request id and
// reported without detail, as a 500 would be.
func itemError(ctx context.Context, err error) string {
	pe, ok := ports.AsError(err)
	if !ok || pe.Code == ports.CodeInternal || statusByCode[pe.Code] == 0 {
		logInternal(ctx, "batch item failed", err)
		return http.StatusText(http.StatusInternalServerError)
	}
	return pe.Describe()
}

func (s *Server) getEmail(ctx context.Context, in *idPath) (*body[messageResponse], error) {
	m, err := s.core.Emails.GetEmail(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[messageResponse]{toMessage(m)}, nil
}

func toMessage(m ports.Message) messageResponse {
	out := messageResponse{
		ID:          m.ID,
		Status:      string(m.Status),
		From:        m.From,
		Subject:     m.Subject,
		Sandbox:     m.Sandbox,
		CreatedAt:   utc(m.CreatedAt),
		ScheduledAt: utcPtr(m.ScheduledAt),
		To:          addressesOf(m.Recipients, ports.RecipientTo),
		Cc:          addressesOf(m.Recipients, ports.RecipientCc),
		Bcc:         addressesOf(m.Recipients, ports.RecipientBcc),
		ReplyTo:     m.ReplyTo,
		Recipients:  make([]recipientResponse, 0, len(m.Recipients)),
		Events:      make([]timelineEventResponse, 0, len(m.Events)),
		Tags:        m.Tags,
		Metadata:    jsonObject(m.Metadata),
	}
	if out.Tags == nil {
		out.Tags = map[string]string{}
	}
	for _, r := range m.Recipients {
		out.Recipients = append(out.Recipients, recipientResponse{Type: r.Type, Address: r.Address, Status: string(r.Status)})
	}
	for _, e := range m.Events {
		out.Events = append(out.Events, timelineEventResponse{
			Type:             strings.TrimPrefix(e.Type, "email."),
			OccurredAt:       utc(e.OccurredAt),
			ProviderResponse: e.ProviderResponse,
		})
	}
	return out
}

// addressesOf lists the addresses of one recipient type, never nil for `to` so the field renders as [].
func addressesOf(rs []ports.Recipient, typ string) []string {
	var out []string
	for _, r := range rs {
		if r.Type == typ {
			out = append(out, r.Address)
		}
	}
	if out == nil && typ == ports.RecipientTo {
		out = []string{}
	}
	return out
}

func (s *Server) cancelEmail(ctx context.Context, in *idPath) (*body[cancelResponse], error) {
	m, err := s.core.Emails.CancelEmail(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[cancelResponse]{cancelResponse{ID: m.ID, Status: string(m.Status)}}, nil
}

func (s *Server) listEmails(ctx context.Context, in *listEmailsInput) (*body[emailPageResponse], error) {
	page, err := s.core.Emails.ListEmails(ctx, principalFrom(ctx).OrganizationID, ports.ListEmailsQuery{
		Limit:  in.Limit,
		Cursor: in.Cursor,
		Status: ports.MessageStatus(in.Status),
	})
	if err != nil {
		return nil, err
	}
	out := emailPageResponse{Data: make([]emailListItem, 0, len(page.Data))}
	for _, m := range page.Data {
		out.Data = append(out.Data, emailListItem{
			ID:          m.ID,
			Status:      string(m.Status),
			From:        m.From,
			Subject:     m.Subject,
			To:          addressesOf(m.Recipients, ports.RecipientTo),
			CreatedAt:   utc(m.CreatedAt),
			ScheduledAt: utcPtr(m.ScheduledAt),
			Sandbox:     m.Sandbox,
		})
	}
	if page.NextCursor != "" {
		out.NextCursor = &page.NextCursor
	}
	return &body[emailPageResponse]{out}, nil
}
