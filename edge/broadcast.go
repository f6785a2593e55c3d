package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagBroadcasts is the OpenAPI tag of the broadcast routes (SPEC §4.10).
const tagBroadcasts = "Broadcasts"

// Broadcast shapes. SPEC §2 fixes the request fields; the response repeats them with the id, status and
// timestamps. Optional strings are null when absent, so every broadcast has the same keys.

type broadcastResponse struct {
	ID            string     `json:"id" format:"uuid" doc:"Broadcast id"`
	Name          string     `json:"name" doc:"Up to 200 characters"`
	Subject       string     `json:"subject" doc:"Subject line; {{ contact.* }} placeholders are interpolated per contact"`
	From          string     `json:"from" doc:"Sender address on a verified sending domain"`
	ReplyTo       *string    `json:"replyTo" doc:"Reply-To address; null when none"`
	HTML          *string    `json:"html" doc:"HTML body; null when the broadcast uses text only or a template"`
	Text          *string    `json:"text" doc:"Plain-text body; null when none"`
	TemplateID    *string    `json:"templateId" format:"uuid" doc:"Template whose published version is sent; null when the body is inline"`
	SegmentID     *string    `json:"segmentId" format:"uuid" doc:"Segment audience; null when none"`
	TopicID       *string    `json:"topicId" format:"uuid" doc:"Topic audience (its subscribed contacts); null when none"`
	ScheduledAt   *time.Time `json:"scheduledAt" doc:"When a scheduled broadcast starts (UTC); null when not scheduled"`
	Status        string     `json:"status" enum:"draft,scheduled,sending,sent,canceled,failed" doc:"State (SPEC §3)"`
	FailureReason *string    `json:"failureReason" doc:"Why a failed broadcast stopped, or why a sending one is paused; null otherwise"`
	PausedUntil   *time.Time `json:"pausedUntil" doc:"A sending broadcast paused by the plan allowance or warm-up cap resumes then; null otherwise"`
	StartedAt     *time.Time `json:"startedAt" doc:"When sending started; null before"`
	CompletedAt   *time.Time `json:"completedAt" doc:"When it ended sent, failed or canceled; null before"`
	CreatedAt     time.Time  `json:"createdAt" doc:"When the broadcast was created"`
	UpdatedAt     time.Time  `json:"updatedAt" doc:"When the broadcast last changed"`
}

type createBroadcastRequest struct {
	_           struct{}   `json:"-" additionalProperties:"true"`
	Name        string     `json:"name" minLength:"1" maxLength:"200" doc:"Up to 200 characters" example:"November newsletter"`
	Subject     string     `json:"subject" minLength:"1" maxLength:"998" pattern:"^[^\\r\\n]*$" patternDescription:"a single line (no CR or LF)" doc:"1-998 characters, no CR or LF; {{ contact.firstName }} and the other contact placeholders are interpolated" example:"Hello {{ contact.firstName }}"`
	From        string     `json:"from" minLength:"3" maxLength:"998" doc:"Sender address on a verified sending domain of the organization" example:"news@acme.test"`
	ReplyTo     string     `json:"replyTo,omitempty" maxLength:"998" doc:"Reply-To address" example:"support@acme.test"`
	HTML        string     `json:"html,omitempty" doc:"HTML body; one of html, text or templateId is required" example:"<p>Hi {{ contact.firstName }}</p>"`
	Text        string     `json:"text,omitempty" doc:"Plain-text body" example:"Hi {{ contact.firstName }}"`
	TemplateID  string     `json:"templateId,omitempty" format:"uuid" doc:"A template of the organization; its published version is rendered per contact" example:"0192f1a0-0000-7000-8000-000000000001"`
	SegmentID   string     `json:"segmentId,omitempty" format:"uuid" doc:"Audience: a segment (segmentId xor topicId)" example:"0192f1a0-0000-7000-8000-000000000002"`
	TopicID     string     `json:"topicId,omitempty" format:"uuid" doc:"Audience: the subscribed contacts of a topic (segmentId xor topicId)" example:"0192f1a0-0000-7000-8000-000000000003"`
	ScheduledAt *time.Time `json:"scheduledAt,omitempty" doc:"UTC ISO-8601; stored with the draft, POST /v1/broadcasts/{id}/schedule schedules it" example:"2026-12-01T09:00:00Z"`
}

type patchBroadcastRequest struct {
	_           struct{}   `json:"-" additionalProperties:"true"`
	Name        *string    `json:"name,omitempty" minLength:"1" maxLength:"200" doc:"Up to 200 characters" example:"November newsletter"`
	Subject     *string    `json:"subject,omitempty" minLength:"1" maxLength:"998" pattern:"^[^\\r\\n]*$" patternDescription:"a single line (no CR or LF)" doc:"1-998 characters, no CR or LF" example:"Hello again"`
	From        *string    `json:"from,omitempty" doc:"Sender address on a verified sending domain" example:"news@acme.test"`
	ReplyTo     *string    `json:"replyTo,omitempty" doc:"Reply-To address; empty string to remove" example:"support@acme.test"`
	HTML        *string    `json:"html,omitempty" doc:"HTML body" example:"<p>Hi</p>"`
	Text        *string    `json:"text,omitempty" doc:"Plain-text body" example:"Hi"`
	TemplateID  *string    `json:"templateId,omitempty" doc:"A template of the organization" example:"0192f1a0-0000-7000-8000-000000000001"`
	SegmentID   *string    `json:"segmentId,omitempty" nullable:"true" doc:"Segment audience; null clears it" example:"0192f1a0-0000-7000-8000-000000000002"`
	TopicID     *string    `json:"topicId,omitempty" nullable:"true" doc:"Topic audience; null clears it" example:"0192f1a0-0000-7000-8000-000000000003"`
	ScheduledAt *time.Time `json:"scheduledAt,omitempty" nullable:"true" doc:"UTC ISO-8601; null clears it (a scheduled broadcast returns to draft)" example:"2026-12-01T09:00:00Z"`

	// An explicit null clears; an absent key leaves the field alone. Both decode to a nil pointer, so
	// UnmarshalJSON notes the nulls here.
	clearSegment, clearTopic, clearScheduledAt bool
}

// UnmarshalJSON decodes the fields and notes which of the clearable ones were sent as null. It reads the
// body itself rather than through a RawBody field, which would add an application/octet-stream body to the
// OpenAPI document.
func (r *patchBroadcastRequest) UnmarshalJSON(b []byte) error {
	type fields patchBroadcastRequest // the same fields without this method
	if err := json.Unmarshal(b, (*fields)(r)); err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) == nil {
		isNull := func(k string) bool { v, ok := raw[k]; return ok && string(v) == "null" }
		r.clearSegment, r.clearTopic, r.clearScheduledAt = isNull("segmentId"), isNull("topicId"), isNull("scheduledAt")
	}
	return nil
}

type patchBroadcastInput struct {
	ID   string `path:"id" format:"uuid" doc:"Broadcast id"`
	Body patchBroadcastRequest
}

type scheduleBroadcastRequest struct {
	_           struct{}  `json:"-" additionalProperties:"true"`
	ScheduledAt time.Time `json:"scheduledAt" doc:"UTC ISO-8601, in the future" example:"2026-12-01T09:00:00Z"`
}

type scheduleBroadcastInput struct {
	ID   string `path:"id" format:"uuid" doc:"Broadcast id"`
	Body scheduleBroadcastRequest
}

type scheduleBroadcastResponse struct {
	ScheduledAt time.Time `json:"scheduledAt" doc:"When the broadcast starts (UTC)"`
}

type broadcastStatsResponse struct {
	Recipients   int64 `json:"recipients" doc:"Contacts a message was written for"`
	Sent         int64 `json:"sent" doc:"Messages handed to a receiving server"`
	Delivered    int64 `json:"delivered" doc:"Messages accepted by the receiving server"`
	Bounced      int64 `json:"bounced" doc:"Messages that bounced"`
	Complained   int64 `json:"complained" doc:"Messages reported as spam"`
	Opened       int64 `json:"opened" doc:"Messages opened (open tracking)"`
	Clicked      int64 `json:"clicked" doc:"Messages with a tracked click"`
	Unsubscribed int64 `json:"unsubscribed" doc:"Recipients who unsubscribed through this broadcast's link"`
	Failed       int64 `json:"failed" doc:"Messages that could not be delivered"`
}

type broadcastRecipientResponse struct {
	ContactID string    `json:"contactId" format:"uuid" doc:"The contact"`
	Email     string    `json:"email" doc:"The address the message went to"`
	MessageID *string   `json:"messageId" format:"uuid" doc:"The message (GET /v1/emails/{id}); null when none was written"`
	Status    string    `json:"status" doc:"The message's status (SPEC §3), or suppressed when the address is suppressed"`
	CreatedAt time.Time `json:"createdAt" doc:"When the recipient was written"`
}

type broadcastRecipientsInput struct {
	ID       string `path:"id" format:"uuid" doc:"Broadcast id"`
	Limit    int    `query:"limit" minimum:"1" maximum:"200" default:"100" doc:"Page size, 1-200"`
	Offset   int    `query:"offset" minimum:"0" default:"0" doc:"Recipients to skip"`
	Envelope bool   `query:"envelope" doc:"true (or 1) answers {data, total, limit, offset} instead of a bare array"`
}

// broadcastRecipientList is the answer of GET /v1/broadcasts/{id}/recipients in either shape (SPEC §4.7 envelope).
type broadcastRecipientList struct {
	items                []broadcastRecipientResponse
	envelope             bool
	total, limit, offset int64
}

type broadcastRecipientEnvelope struct {
	Data   []broadcastRecipientResponse `json:"data"`
	Total  int64                        `json:"total"`
	Limit  int64                        `json:"limit"`
	Offset int64                        `json:"offset"`
}

// MarshalJSON writes the array, or the envelope.
func (l broadcastRecipientList) MarshalJSON() ([]byte, error) {
	items := l.items
	if items == nil {
		items = []broadcastRecipientResponse{}
	}
	if !l.envelope {
		return marshalJSON(items)
	}
	return marshalJSON(broadcastRecipientEnvelope{Data: items, Total: l.total, Limit: l.limit, Offset: l.offset})
}

// Schema documents both shapes.
func (broadcastRecipientList) Schema(r huma.Registry) *huma.Schema {
	item := r.Schema(reflect.TypeFor[broadcastRecipientResponse](), true, "")
	return &huma.Schema{OneOf: []*huma.Schema{
		{Type: huma.TypeArray, Items: item, Description: "Without envelope: the page as a bare array"},
		{
			Type: huma.TypeObject, Description: "With envelope=true: the page with the total",
			Required: []string{"data", "total", "limit", "offset"},
			Properties: map[string]*huma.Schema{
				"data":   {Type: huma.TypeArray, Items: item, Description: "Recipients in the order they were written"},
				"total":  {Type: huma.TypeInteger, Description: "Recipients of the broadcast"},
				"limit":  {Type: huma.TypeInteger, Description: "The page size asked for"},
				"offset": {Type: huma.TypeInteger, Description: "The offset asked for"},
			},
		},
	}}
}

func (s *Server) registerBroadcastRoutes() {
	if s.core.Broadcasts == nil {
		return
	}
	write := access{kind: authKey, scopes: []string{ports.ScopeBroadcastsWrite}}
	read := access{kind: authKey, scopes: []string{ports.ScopeBroadcastsRead}}
	// SPEC §5 rule 9: list routes accept the write scope too.
	list := access{kind: authKey, scopes: []string{ports.ScopeBroadcastsRead, ports.ScopeBroadcastsWrite}}
	op := func(id, method, path string, status int, summary, desc string) huma.Operation {
		return huma.Operation{OperationID: id, Method: method, Path: path, DefaultStatus: status,
			Tags: []string{tagBroadcasts}, Summary: summary, Description: desc}
	}
	register(s, op("create-broadcast", http.MethodPost, "/v1/broadcasts", http.StatusCreated, "Create a broadcast",
		"Creates a draft. from must be on a verified sending domain; one of html, text or templateId; at most one "+
			"of segmentId and topicId."), write, s.createBroadcast, http.StatusBadRequest)
	register(s, op("list-broadcasts", http.MethodGet, "/v1/broadcasts", http.StatusOK, "List broadcasts",
		"One page of the organization's broadcasts, newest first, as a bare array: limit 1-100 (default 25) from offset."),
		list, s.listBroadcasts, http.StatusBadRequest)
	register(s, op("get-broadcast", http.MethodGet, "/v1/broadcasts/{id}", http.StatusOK, "Get a broadcast", "One broadcast."),
		read, s.getBroadcast, http.StatusNotFound)
	register(s, op("update-broadcast", http.MethodPatch, "/v1/broadcasts/{id}", http.StatusOK, "Update a broadcast",
		"Changes a draft or scheduled broadcast (409 otherwise); segmentId, topicId and scheduledAt accept null to clear."),
		write, s.updateBroadcast, http.StatusBadRequest, http.StatusNotFound, http.StatusConflict)
	register(s, op("delete-broadcast", http.MethodDelete, "/v1/broadcasts/{id}", http.StatusOK, "Delete a broadcast",
		"Deletes the broadcast and its recipient list (its messages stay); a sending broadcast cannot be deleted (409)."),
		write, s.deleteBroadcast, http.StatusNotFound, http.StatusConflict)
	register(s, op("send-broadcast", http.MethodPost, "/v1/broadcasts/{id}/send", http.StatusOK, "Send a broadcast now",
		"Moves a draft or scheduled broadcast to sending and answers it; the audience is resolved as sending starts."),
		write, s.sendBroadcast, http.StatusBadRequest, http.StatusNotFound, http.StatusConflict)
	register(s, op("schedule-broadcast", http.MethodPost, "/v1/broadcasts/{id}/schedule", http.StatusOK, "Schedule a broadcast",
		"Schedules a draft (or reschedules a scheduled broadcast) to start at scheduledAt."),
		write, s.scheduleBroadcast, http.StatusBadRequest, http.StatusNotFound, http.StatusConflict)
	register(s, op("cancel-broadcast", http.MethodPost, "/v1/broadcasts/{id}/cancel", http.StatusOK, "Cancel a broadcast",
		"Cancels a scheduled broadcast; any other state is 409."), write, s.cancelBroadcast, http.StatusNotFound, http.StatusConflict)
	register(s, op("broadcast-stats", http.MethodGet, "/v1/broadcasts/{id}/stats", http.StatusOK, "Broadcast results",
		"Aggregate results of the broadcast's messages."), read, s.broadcastStats, http.StatusNotFound)
	register(s, op("broadcast-recipients", http.MethodGet, "/v1/broadcasts/{id}/recipients", http.StatusOK, "Broadcast recipients",
		"The recipients written so far with their message's status, in the order written."),
		list, s.broadcastRecipients, http.StatusBadRequest, http.StatusNotFound)
}

func toBroadcast(b ports.Broadcast) broadcastResponse {
	r := broadcastResponse{
		ID: b.ID, Name: b.Name, Subject: b.Subject, From: b.From, ReplyTo: nullIfEmpty(b.ReplyTo),
		HTML: nullIfEmpty(b.HTML), Text: nullIfEmpty(b.Text), TemplateID: nullIfEmpty(b.TemplateID),
		SegmentID: nullIfEmpty(b.SegmentID), TopicID: nullIfEmpty(b.TopicID), ScheduledAt: utcPtr(b.ScheduledAt),
		Status: string(b.Status), FailureReason: nullIfEmpty(b.FailureReason), StartedAt: utcPtr(b.StartedAt),
		CompletedAt: utcPtr(b.CompletedAt), CreatedAt: utc(b.CreatedAt), UpdatedAt: utc(b.UpdatedAt),
	}
	if b.Status == ports.BroadcastSending {
		r.PausedUntil = utcPtr(b.PausedUntil)
	}
	return r
}

func (s *Server) createBroadcast(ctx context.Context, in *body[createBroadcastRequest]) (*body[broadcastResponse], error) {
	r := in.Body
	b, err := s.core.Broadcasts.CreateBroadcast(ctx, principalFrom(ctx).OrganizationID, ports.NewBroadcast{
		Name: r.Name, Subject: r.Subject, From: r.From, ReplyTo: r.ReplyTo, HTML: r.HTML, Text: r.Text,
		TemplateID: canonicalUUID(r.TemplateID), SegmentID: canonicalUUID(r.SegmentID), TopicID: canonicalUUID(r.TopicID),
		ScheduledAt: r.ScheduledAt,
	})
	if err != nil {
		return nil, err
	}
	return &body[broadcastResponse]{toBroadcast(b)}, nil
}

func (s *Server) listBroadcasts(ctx context.Context, in *offsetQuery) (*body[[]broadcastResponse], error) {
	list, err := s.core.Broadcasts.ListBroadcasts(ctx, principalFrom(ctx).OrganizationID, in.Limit, in.Offset)
	if err != nil {
		return nil, err
	}
	return &body[[]broadcastResponse]{mapItems(list, toBroadcast)}, nil
}

func (s *Server) getBroadcast(ctx context.Context, in *idPath) (*body[broadcastResponse], error) {
	b, err := s.core.Broadcasts.GetBroadcast(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[broadcastResponse]{toBroadcast(b)}, nil
}

func (s *Server) updateBroadcast(ctx context.Context, in *patchBroadcastInput) (*body[broadcastResponse], error) {
	r := in.Body
	p := ports.BroadcastPatch{Name: r.Name, Subject: r.Subject, From: r.From, ReplyTo: r.ReplyTo, HTML: r.HTML,
		Text: r.Text, TemplateID: canonicalPtr(r.TemplateID), SegmentID: canonicalPtr(r.SegmentID),
		TopicID: canonicalPtr(r.TopicID), ScheduledAt: r.ScheduledAt,
		ClearSegment: r.clearSegment, ClearTopic: r.clearTopic, ClearScheduledAt: r.clearScheduledAt}
	b, err := s.core.Broadcasts.UpdateBroadcast(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), p)
	if err != nil {
		return nil, err
	}
	return &body[broadcastResponse]{toBroadcast(b)}, nil
}

func canonicalPtr(s *string) *string {
	if s == nil {
		return nil
	}
	v := canonicalUUID(*s)
	return &v
}

func (s *Server) deleteBroadcast(ctx context.Context, in *idPath) (*body[deletedResponse], error) {
	if err := s.core.Broadcasts.DeleteBroadcast(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)); err != nil {
		return nil, err
	}
	return &body[deletedResponse]{deletedResponse{Deleted: true}}, nil
}

func (s *Server) sendBroadcast(ctx context.Context, in *idPath) (*body[broadcastResponse], error) {
	b, err := s.core.Broadcasts.SendBroadcast(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[broadcastResponse]{toBroadcast(b)}, nil
}

func (s *Server) scheduleBroadcast(ctx context.Context, in *scheduleBroadcastInput) (*body[scheduleBroadcastResponse], error) {
	b, err := s.core.Broadcasts.ScheduleBroadcast(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), in.Body.ScheduledAt)
	if err != nil {
		return nil, err
	}
	return &body[scheduleBroadcastResponse]{scheduleBroadcastResponse{ScheduledAt: utc(*b.ScheduledAt)}}, nil
}

func (s *Server) cancelBroadcast(ctx context.Context, in *idPath) (*body[broadcastResponse], error) {
	b, err := s.core.Broadcasts.CancelBroadcast(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[broadcastResponse]{toBroadcast(b)}, nil
}

func (s *Server) broadcastStats(ctx context.Context, in *idPath) (*body[broadcastStatsResponse], error) {
	st, err := s.core.Broadcasts.BroadcastStats(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[broadcastStatsResponse]{broadcastStatsResponse(st)}, nil
}

func (s *Server) broadcastRecipients(ctx context.Context, in *broadcastRecipientsInput) (*body[broadcastRecipientList], error) {
	rs, total, err := s.core.Broadcasts.BroadcastRecipients(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), in.Limit, in.Offset)
	if err != nil {
		return nil, err
	}
	items := mapItems(rs, func(r ports.BroadcastRecipient) broadcastRecipientResponse {
		return broadcastRecipientResponse{ContactID: r.ContactID, Email: r.Email, MessageID: nullIfEmpty(r.MessageID),
			Status: r.Status, CreatedAt: utc(r.CreatedAt)}
	})
	return &body[broadcastRecipientList]{broadcastRecipientList{items: items, envelope: in.Envelope, total: total,
		limit: int64(in.Limit), offset: int64(in.Offset)}}, nil
}
