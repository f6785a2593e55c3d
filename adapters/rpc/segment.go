package rpc

import (
	"context"
	"encoding/json"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	segmentv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/segment/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/segment/v1/segmentv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.SegmentService { return &c.Segments },
		segmentv1connect.NewSegmentServiceHandler, newSegmentServer,
		segmentv1connect.NewSegmentServiceClient, newSegmentClient).
		calledBy(segmentv1connect.SegmentServiceName, TierEdge))
}

func segmentToProto(s ports.Segment) *segmentv1.Segment {
	return &segmentv1.Segment{Id: s.ID, OrganizationId: s.OrganizationID, Name: s.Name, Description: s.Description,
		Rule: s.Rule, CreatedAt: timeToProto(s.CreatedAt), UpdatedAt: timeToProto(s.UpdatedAt)}
}

func segmentFromProto(s *segmentv1.Segment) ports.Segment {
	return ports.Segment{ID: s.GetId(), OrganizationID: s.GetOrganizationId(), Name: s.GetName(),
		Description: s.GetDescription(), Rule: json.RawMessage(s.GetRule()), CreatedAt: timeFromProto(s.GetCreatedAt()),
		UpdatedAt: timeFromProto(s.GetUpdatedAt())}
}

func segmentInputToProto(in ports.SegmentInput) *segmentv1.SegmentInput {
	return &segmentv1.SegmentInput{Name: in.Name, Description: in.Description, Rule: in.Rule}
}

func segmentInputFromProto(in *segmentv1.SegmentInput) ports.SegmentInput {
	return ports.SegmentInput{Name: in.Name, Description: in.Description, Rule: json.RawMessage(in.GetRule())}
}

func previewToProto(p ports.SegmentPreview) *segmentv1.Preview {
	return &segmentv1.Preview{Count: int64(p.Count), Sample: contactsToProto(p.Sample)}
}

type previewMessage interface{ GetPreview() *segmentv1.Preview }

func previewFromProto[R previewMessage](r R) ports.SegmentPreview {
	p := r.GetPreview()
	return ports.SegmentPreview{Count: int(p.GetCount()), Sample: contactsFromProto(p.GetSample())}
}

// segmentServer serves postmill.segment.v1.SegmentService from a ports.SegmentService.
type segmentServer struct {
	svc ports.SegmentService
	log *slog.Logger
}

func newSegmentServer(svc ports.SegmentService, log *slog.Logger) segmentv1connect.SegmentServiceHandler {
	return &segmentServer{svc: svc, log: log}
}

func (s *segmentServer) CreateSegment(ctx context.Context, req *connect.Request[segmentv1.CreateSegmentRequest]) (*connect.Response[segmentv1.CreateSegmentResponse], error) {
	seg, err := s.svc.CreateSegment(ctx, req.Msg.GetOrganizationId(), segmentInputFromProto(req.Msg.GetInput()))
	return respond(ctx, s.log, req, err, func() *segmentv1.CreateSegmentResponse {
		return &segmentv1.CreateSegmentResponse{Segment: segmentToProto(seg)}
	})
}

func (s *segmentServer) GetSegment(ctx context.Context, req *connect.Request[segmentv1.GetSegmentRequest]) (*connect.Response[segmentv1.GetSegmentResponse], error) {
	seg, err := s.svc.GetSegment(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *segmentv1.GetSegmentResponse {
		return &segmentv1.GetSegmentResponse{Segment: segmentToProto(seg)}
	})
}

func (s *segmentServer) ListSegments(ctx context.Context, req *connect.Request[segmentv1.ListSegmentsRequest]) (*connect.Response[segmentv1.ListSegmentsResponse], error) {
	m := req.Msg
	segs, err := s.svc.ListSegments(ctx, m.GetOrganizationId(), int(m.GetLimit()), int(m.GetOffset()))
	return respond(ctx, s.log, req, err, func() *segmentv1.ListSegmentsResponse {
		out := &segmentv1.ListSegmentsResponse{}
		for _, seg := range segs {
			out.Segments = append(out.Segments, segmentToProto(seg))
		}
		return out
	})
}

func (s *segmentServer) UpdateSegment(ctx context.Context, req *connect.Request[segmentv1.UpdateSegmentRequest]) (*connect.Response[segmentv1.UpdateSegmentResponse], error) {
	seg, err := s.svc.UpdateSegment(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId(), segmentInputFromProto(req.Msg.GetInput()))
	return respond(ctx, s.log, req, err, func() *segmentv1.UpdateSegmentResponse {
		return &segmentv1.UpdateSegmentResponse{Segment: segmentToProto(seg)}
	})
}

func (s *segmentServer) DeleteSegment(ctx context.Context, req *connect.Request[segmentv1.DeleteSegmentRequest]) (*connect.Response[segmentv1.DeleteSegmentResponse], error) {
	err := s.svc.DeleteSegment(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, empty[segmentv1.DeleteSegmentResponse])
}

func (s *segmentServer) PreviewRule(ctx context.Context, req *connect.Request[segmentv1.PreviewRuleRequest]) (*connect.Response[segmentv1.PreviewRuleResponse], error) {
	p, err := s.svc.PreviewRule(ctx, req.Msg.GetOrganizationId(), json.RawMessage(req.Msg.GetRule()), int(req.Msg.GetLimit()))
	return respond(ctx, s.log, req, err, func() *segmentv1.PreviewRuleResponse {
		return &segmentv1.PreviewRuleResponse{Preview: previewToProto(p)}
	})
}

func (s *segmentServer) PreviewSegment(ctx context.Context, req *connect.Request[segmentv1.PreviewSegmentRequest]) (*connect.Response[segmentv1.PreviewSegmentResponse], error) {
	p, err := s.svc.PreviewSegment(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId(), int(req.Msg.GetLimit()))
	return respond(ctx, s.log, req, err, func() *segmentv1.PreviewSegmentResponse {
		return &segmentv1.PreviewSegmentResponse{Preview: previewToProto(p)}
	})
}

// segmentClient implements ports.SegmentService over postmill.segment.v1.SegmentService.
type segmentClient struct {
	conn segmentv1connect.SegmentServiceClient
}

func newSegmentClient(conn segmentv1connect.SegmentServiceClient) ports.SegmentService {
	return &segmentClient{conn: conn}
}

type segmentMessage interface{ GetSegment() *segmentv1.Segment }

func getSegment[R segmentMessage](r R) ports.Segment { return segmentFromProto(r.GetSegment()) }

func (c *segmentClient) CreateSegment(ctx context.Context, orgID string, in ports.SegmentInput) (ports.Segment, error) {
	return call(ctx, segmentv1connect.SegmentServiceCreateSegmentProcedure, c.conn.CreateSegment,
		&segmentv1.CreateSegmentRequest{OrganizationId: orgID, Input: segmentInputToProto(in)}, getSegment[*segmentv1.CreateSegmentResponse])
}

func (c *segmentClient) GetSegment(ctx context.Context, orgID, id string) (ports.Segment, error) {
	return call(ctx, segmentv1connect.SegmentServiceGetSegmentProcedure, c.conn.GetSegment,
		&segmentv1.GetSegmentRequest{OrganizationId: orgID, Id: id}, getSegment[*segmentv1.GetSegmentResponse])
}

func (c *segmentClient) ListSegments(ctx context.Context, orgID string, limit, offset int) ([]ports.Segment, error) {
	return call(ctx, segmentv1connect.SegmentServiceListSegmentsProcedure, c.conn.ListSegments,
		&segmentv1.ListSegmentsRequest{OrganizationId: orgID, Limit: int64(limit), Offset: int64(offset)}, func(r *segmentv1.ListSegmentsResponse) []ports.Segment {
			out := make([]ports.Segment, 0, len(r.GetSegments()))
			for _, s := range r.GetSegments() {
				out = append(out, segmentFromProto(s))
			}
			return out
		})
}

func (c *segmentClient) UpdateSegment(ctx context.Context, orgID, id string, in ports.SegmentInput) (ports.Segment, error) {
	return call(ctx, segmentv1connect.SegmentServiceUpdateSegmentProcedure, c.conn.UpdateSegment,
		&segmentv1.UpdateSegmentRequest{OrganizationId: orgID, Id: id, Input: segmentInputToProto(in)}, getSegment[*segmentv1.UpdateSegmentResponse])
}

func (c *segmentClient) DeleteSegment(ctx context.Context, orgID, id string) error {
	return exec(ctx, segmentv1connect.SegmentServiceDeleteSegmentProcedure, c.conn.DeleteSegment,
		&segmentv1.DeleteSegmentRequest{OrganizationId: orgID, Id: id})
}

func (c *segmentClient) PreviewRule(ctx context.Context, orgID string, rule json.RawMessage, limit int) (ports.SegmentPreview, error) {
	return call(ctx, segmentv1connect.SegmentServicePreviewRuleProcedure, c.conn.PreviewRule,
		&segmentv1.PreviewRuleRequest{OrganizationId: orgID, Rule: rule, Limit: int64(limit)}, previewFromProto[*segmentv1.PreviewRuleResponse])
}

func (c *segmentClient) PreviewSegment(ctx context.Context, orgID, id string, limit int) (ports.SegmentPreview, error) {
	return call(ctx, segmentv1connect.SegmentServicePreviewSegmentProcedure, c.conn.PreviewSegment,
		&segmentv1.PreviewSegmentRequest{OrganizationId: orgID, Id: id, Limit: int64(limit)}, previewFromProto[*segmentv1.PreviewSegmentResponse])
}
