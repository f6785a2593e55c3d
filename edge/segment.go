package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagSegments is the OpenAPI tag of the segment routes (SPEC §4.9).
const tagSegments = "Segments"

// segmentRule is a rule tree as the client writes it; the core checks and compiles it.
type segmentRule struct{ raw json.RawMessage }

// UnmarshalJSON keeps the rule as sent.
func (r *segmentRule) UnmarshalJSON(b []byte) error {
	r.raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON writes the rule back.
func (r segmentRule) MarshalJSON() ([]byte, error) {
	if len(r.raw) == 0 {
		return []byte("null"), nil
	}
	return r.raw, nil
}

// Schema documents the rule language of SPEC §4.9.
func (segmentRule) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{
		Type: huma.TypeObject, AdditionalProperties: true,
		Description: "A condition {field, cmp, value?} or a group {op: and|or, rules: [...]}, at most 5 levels and " +
			"50 nodes. field: email, firstName, lastName, locale, timezone, source, consentStatus (text: eq, neq, " +
			"contains, in, gt, gte, lt, lte, exists); bounced (eq, neq, exists); lastActiveAt, lastSentAt, createdAt " +
			"(eq, neq, gt, gte, lt, lte, exists; a date-time, or {daysAgo: n} with gt, gte, lt or lte); " +
			"properties.<key> (every comparator; ordering with a number compares numerically and a non-numeric " +
			"value does not match); topic.<key> (eq, neq, in, exists on pending, subscribed or unsubscribed, " +
			"default subscribed). eq and neq take a scalar or null; exists takes no value or false; in takes at " +
			"most 200 strings or numbers; strings are at most 1024 characters.",
		Examples: []any{map[string]any{"field": "properties.plan", "cmp": "eq", "value": "pro"}},
	}
}

type segmentResponse struct {
	ID          string      `json:"id" format:"uuid" doc:"Segment id"`
	Name        string      `json:"name" doc:"Segment name"`
	Description string      `json:"description" doc:"Segment description"`
	Rule        segmentRule `json:"rule" doc:"The rule tree"`
	CreatedAt   time.Time   `json:"createdAt" doc:"When the segment was created"`
	UpdatedAt   time.Time   `json:"updatedAt" doc:"When the segment last changed"`
}

func toSegment(s ports.Segment) segmentResponse {
	return segmentResponse{ID: s.ID, Name: s.Name, Description: s.Description, Rule: segmentRule{raw: s.Rule},
		CreatedAt: utc(s.CreatedAt), UpdatedAt: utc(s.UpdatedAt)}
}

type createSegmentRequest struct {
	_           struct{}     `json:"-" additionalProperties:"true"`
	Name        *string      `json:"name" doc:"1-200 characters"`
	Description *string      `json:"description,omitempty" doc:"At most 2000 characters"`
	Rule        *segmentRule `json:"rule" doc:"The rule tree (see the schema)"`
}

type patchSegmentRequest struct {
	_           struct{}     `json:"-" additionalProperties:"true"`
	Name        *string      `json:"name,omitempty" doc:"1-200 characters"`
	Description *string      `json:"description,omitempty" doc:"At most 2000 characters"`
	Rule        *segmentRule `json:"rule,omitempty" doc:"A new rule tree"`
}

type patchSegmentInput struct {
	ID   string `path:"id" format:"uuid" doc:"Segment id"`
	Body patchSegmentRequest
}

type previewRequest struct {
	_    struct{}     `json:"-" additionalProperties:"true"`
	Rule *segmentRule `json:"rule" doc:"The rule tree to count"`
}

type previewSavedInput struct {
	ID    string `path:"id" format:"uuid" doc:"Segment id"`
	Limit int    `query:"limit" minimum:"1" maximum:"100" default:"25" doc:"Sample size, 1-100"`
}

type previewResponse struct {
	Count  int               `json:"count" doc:"Contacts of the organization the rule matches (whatever their consent)"`
	Sample []contactResponse `json:"sample" nullable:"false" doc:"The first matches by id: at most 25, or the limit asked"`
}

func ruleOf(r *segmentRule) json.RawMessage {
	if r == nil {
		return nil
	}
	return r.raw
}

func (s *Server) registerSegmentRoutes() {
	if s.core.Segments == nil {
		return
	}
	read := access{kind: authKey, scopes: []string{ports.ScopeSegmentsRead}}
	list := access{kind: authKey, scopes: []string{ports.ScopeSegmentsRead, ports.ScopeSegmentsWrite}}
	write := access{kind: authKey, scopes: []string{ports.ScopeSegmentsWrite}}
	op := func(id, method, path string, status int, summary, desc string) huma.Operation {
		return huma.Operation{OperationID: id, Method: method, Path: path, DefaultStatus: status,
			Tags: []string{tagSegments}, Summary: summary, Description: desc}
	}
	register(s, op("create-segment", http.MethodPost, "/v1/segments", http.StatusCreated, "Create a segment",
		"A saved rule over the organization's contacts. A rule outside the language is 400 with details under rule."),
		write, s.createSegment, http.StatusBadRequest)
	register(s, op("list-segments", http.MethodGet, "/v1/segments", http.StatusOK, "List segments",
		"One page of the organization's segments, newest first, as a bare array: limit 1-100 (default 25) from offset."),
		list, s.listSegments, http.StatusBadRequest)
	register(s, op("preview-segment-rule", http.MethodPost, "/v1/segments/preview", http.StatusOK, "Preview a rule",
		"Counts the contacts a rule matches and returns the first 25 of them by id, without saving anything."),
		read, s.previewRule, http.StatusBadRequest)
	register(s, op("get-segment", http.MethodGet, "/v1/segments/{id}", http.StatusOK, "Get a segment", "One segment."),
		read, s.getSegment, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("update-segment", http.MethodPatch, "/v1/segments/{id}", http.StatusOK, "Update a segment",
		"Changes the name, description or rule."), write, s.updateSegment, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("delete-segment", http.MethodDelete, "/v1/segments/{id}", http.StatusOK, "Delete a segment",
		"Deletes the segment."), write, s.deleteSegment, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("preview-segment", http.MethodGet, "/v1/segments/{id}/preview", http.StatusOK, "Preview a segment",
		"Counts the contacts the segment's rule matches now and returns the first limit of them by id."),
		read, s.previewSegment, http.StatusBadRequest, http.StatusNotFound)
}

func (s *Server) createSegment(ctx context.Context, in *body[createSegmentRequest]) (*body[segmentResponse], error) {
	r := in.Body
	seg, err := s.core.Segments.CreateSegment(ctx, principalFrom(ctx).OrganizationID,
		ports.SegmentInput{Name: r.Name, Description: r.Description, Rule: ruleOf(r.Rule)})
	if err != nil {
		return nil, err
	}
	return &body[segmentResponse]{toSegment(seg)}, nil
}

func (s *Server) listSegments(ctx context.Context, in *offsetQuery) (*body[[]segmentResponse], error) {
	segs, err := s.core.Segments.ListSegments(ctx, principalFrom(ctx).OrganizationID, in.Limit, in.Offset)
	if err != nil {
		return nil, err
	}
	return &body[[]segmentResponse]{mapItems(segs, toSegment)}, nil
}

func (s *Server) getSegment(ctx context.Context, in *idPath) (*body[segmentResponse], error) {
	seg, err := s.core.Segments.GetSegment(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[segmentResponse]{toSegment(seg)}, nil
}

func (s *Server) updateSegment(ctx context.Context, in *patchSegmentInput) (*body[segmentResponse], error) {
	r := in.Body
	seg, err := s.core.Segments.UpdateSegment(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID),
		ports.SegmentInput{Name: r.Name, Description: r.Description, Rule: ruleOf(r.Rule)})
	if err != nil {
		return nil, err
	}
	return &body[segmentResponse]{toSegment(seg)}, nil
}

func (s *Server) deleteSegment(ctx context.Context, in *idPath) (*body[deletedResponse], error) {
	if err := s.core.Segments.DeleteSegment(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)); err != nil {
		return nil, err
	}
	return &body[deletedResponse]{deletedResponse{Deleted: true}}, nil
}

func toPreview(p ports.SegmentPreview) *body[previewResponse] {
	sample := mapItems(p.Sample, toContact)
	if sample == nil {
		sample = []contactResponse{}
	}
	return &body[previewResponse]{previewResponse{Count: p.Count, Sample: sample}}
}

func (s *Server) previewRule(ctx context.Context, in *body[previewRequest]) (*body[previewResponse], error) {
	p, err := s.core.Segments.PreviewRule(ctx, principalFrom(ctx).OrganizationID, ruleOf(in.Body.Rule), ports.MaxSegmentSample)
	if err != nil {
		return nil, err
	}
	return toPreview(p), nil
}

func (s *Server) previewSegment(ctx context.Context, in *previewSavedInput) (*body[previewResponse], error) {
	p, err := s.core.Segments.PreviewSegment(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), in.Limit)
	if err != nil {
		return nil, err
	}
	return toPreview(p), nil
}
