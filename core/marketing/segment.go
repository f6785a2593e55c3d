package marketing

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// checkSegment checks a segment body and compiles its rule; create requires name and rule.
func checkSegment(in *ports.SegmentInput, create bool) error {
	var v violations
	if create && in.Name == nil {
		v.add("name", msgRequired)
	}
	if in.Name != nil && (*in.Name == "" || !storable(*in.Name) || utf8.RuneCountInString(*in.Name) > ports.MaxSegmentNameLen) {
		v.add("name", "must be 1 to 200 characters")
	}
	v.checkText("description", in.Description, ports.MaxSegmentDescriptionLen)
	if create && len(in.Rule) == 0 {
		v.add("rule", msgRequired)
	}
	if err := v.err(); err != nil {
		return err
	}
	if len(in.Rule) > 0 {
		plan, err := Compile(in.Rule)
		if err != nil {
			return err
		}
		in.Plan = &plan
	}
	return nil
}

// CreateSegment stores a segment with its compiled rule.
func (s *Segments) CreateSegment(ctx context.Context, orgID string, in ports.SegmentInput) (ports.Segment, error) {
	if err := checkSegment(&in, true); err != nil {
		return ports.Segment{}, err
	}
	now := s.now()
	seg := ports.Segment{ID: newID(), OrganizationID: orgID, Name: *in.Name, Rule: compactJSON(in.Rule), Plan: in.Plan,
		CreatedAt: now, UpdatedAt: now}
	if in.Description != nil {
		seg.Description = *in.Description
	}
	return s.segments.CreateSegment(ctx, seg)
}

// compactJSON stores the rule without insignificant whitespace.
func compactJSON(raw json.RawMessage) json.RawMessage {
	var out []byte
	if b, err := json.Marshal(raw); err == nil {
		out = b
	}
	return out
}

// GetSegment returns one of the organization's segments.
func (s *Segments) GetSegment(ctx context.Context, orgID, id string) (ports.Segment, error) {
	if !validID(id) {
		return ports.Segment{}, notFound("segment")
	}
	return s.segments.GetSegment(ctx, orgID, id)
}

// ListSegments checks the page (limit 1-100, default 25; offset from 0) and returns it, newest first.
func (s *Segments) ListSegments(ctx context.Context, orgID string, limit, offset int) ([]ports.Segment, error) {
	limit, err := ports.CheckOffsetPage(limit, offset)
	if err != nil {
		return nil, err
	}
	return s.segments.ListSegments(ctx, orgID, limit, offset)
}

// UpdateSegment changes the name, description or rule.
func (s *Segments) UpdateSegment(ctx context.Context, orgID, id string, in ports.SegmentInput) (ports.Segment, error) {
	if err := checkSegment(&in, false); err != nil {
		return ports.Segment{}, err
	}
	if !validID(id) {
		return ports.Segment{}, notFound("segment")
	}
	if len(in.Rule) > 0 {
		in.Rule = compactJSON(in.Rule)
	}
	return s.segments.UpdateSegment(ctx, orgID, id, in, s.now())
}

// DeleteSegment removes a segment.
func (s *Segments) DeleteSegment(ctx context.Context, orgID, id string) error {
	if !validID(id) {
		return notFound("segment")
	}
	return s.segments.DeleteSegment(ctx, orgID, id)
}

// checkLimit checks a preview's sample size (1-100, default 25).
func checkLimit(limit int) (int, error) {
	if limit == 0 {
		return ports.MaxSegmentSample, nil
	}
	if limit < 1 || limit > ports.MaxListLimit {
		return 0, ruleError("limit", fmt.Sprintf("must be between 1 and %d", ports.MaxListLimit))
	}
	return limit, nil
}

// PreviewRule counts the contacts a rule matches and returns a sample of them.
func (s *Segments) PreviewRule(ctx context.Context, orgID string, rule json.RawMessage, limit int) (ports.SegmentPreview, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return ports.SegmentPreview{}, err
	}
	plan, err := Compile(rule)
	if err != nil {
		return ports.SegmentPreview{}, err
	}
	return s.segments.PreviewPlan(ctx, orgID, plan, limit)
}

// PreviewSegment previews a saved segment's rule.
func (s *Segments) PreviewSegment(ctx context.Context, orgID, id string, limit int) (ports.SegmentPreview, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return ports.SegmentPreview{}, err
	}
	seg, err := s.GetSegment(ctx, orgID, id)
	if err != nil {
		return ports.SegmentPreview{}, err
	}
	plan, err := Compile(seg.Rule)
	if err != nil {
		return ports.SegmentPreview{}, err
	}
	return s.segments.PreviewPlan(ctx, orgID, plan, limit)
}
