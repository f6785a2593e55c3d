package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	deliverabilityv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1/deliverabilityv1connect"
)

func init() {
	register(
		portService(func(c *ports.Core) *ports.DeliverabilityService { return &c.Deliverability },
			deliverabilityv1connect.NewDeliverabilityServiceHandler, newDeliverabilityServer,
			deliverabilityv1connect.NewDeliverabilityServiceClient, newDeliverabilityClient).
			calledBy(deliverabilityv1connect.DeliverabilityServiceName, TierEdge),
		portService(func(c *ports.Core) *ports.FeedbackService { return &c.Feedback },
			deliverabilityv1connect.NewFeedbackServiceHandler, newFeedbackServer,
			deliverabilityv1connect.NewFeedbackServiceClient, newFeedbackClient).
			calledBy(deliverabilityv1connect.FeedbackServiceName, TierInbound),
	)
}

// deliverabilityServer serves postmill.deliverability.v1.DeliverabilityService from a
// ports.DeliverabilityService.
type deliverabilityServer struct {
	svc ports.DeliverabilityService
	log *slog.Logger
}

func newDeliverabilityServer(svc ports.DeliverabilityService, log *slog.Logger) deliverabilityv1connect.DeliverabilityServiceHandler {
	return &deliverabilityServer{svc: svc, log: log}
}

func (s *deliverabilityServer) ListSuppressions(ctx context.Context, req *connect.Request[deliverabilityv1.ListSuppressionsRequest]) (*connect.Response[deliverabilityv1.ListSuppressionsResponse], error) {
	suppressions, err := s.svc.ListSuppressions(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *deliverabilityv1.ListSuppressionsResponse {
		return &deliverabilityv1.ListSuppressionsResponse{Suppressions: suppressionsToProto(suppressions)}
	})
}

func (s *deliverabilityServer) ListSuppressionsPage(ctx context.Context, req *connect.Request[deliverabilityv1.ListSuppressionsPageRequest]) (*connect.Response[deliverabilityv1.ListSuppressionsPageResponse], error) {
	page, err := s.svc.ListSuppressionsPage(ctx, req.Msg.GetOrganizationId(), pageQueryFromProto(req.Msg.GetQuery()))
	return respond(ctx, s.log, req, err, func() *deliverabilityv1.ListSuppressionsPageResponse {
		return &deliverabilityv1.ListSuppressionsPageResponse{Suppressions: suppressionsToProto(page.Data), NextCursor: page.NextCursor}
	})
}

func (s *deliverabilityServer) CreateSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.CreateSuppressionRequest]) (*connect.Response[deliverabilityv1.CreateSuppressionResponse], error) {
	sup, err := s.svc.CreateSuppression(ctx, req.Msg.GetOrganizationId(), newSuppressionFromProto(req.Msg.GetSuppression()))
	return respond(ctx, s.log, req, err, func() *deliverabilityv1.CreateSuppressionResponse {
		return &deliverabilityv1.CreateSuppressionResponse{Suppression: suppressionToProto(sup)}
	})
}

func (s *deliverabilityServer) DeleteSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.DeleteSuppressionRequest]) (*connect.Response[deliverabilityv1.DeleteSuppressionResponse], error) {
	deleted, err := s.svc.DeleteSuppression(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *deliverabilityv1.DeleteSuppressionResponse {
		return &deliverabilityv1.DeleteSuppressionResponse{Deleted: deleted}
	})
}

func (s *deliverabilityServer) ListGlobalSuppressions(ctx context.Context, req *connect.Request[deliverabilityv1.ListGlobalSuppressionsRequest]) (*connect.Response[deliverabilityv1.ListGlobalSuppressionsResponse], error) {
	suppressions, err := s.svc.ListGlobalSuppressions(ctx)
	return respond(ctx, s.log, req, err, func() *deliverabilityv1.ListGlobalSuppressionsResponse {
		return &deliverabilityv1.ListGlobalSuppressionsResponse{Suppressions: suppressionsToProto(suppressions)}
	})
}

func (s *deliverabilityServer) CreateGlobalSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.CreateGlobalSuppressionRequest]) (*connect.Response[deliverabilityv1.CreateGlobalSuppressionResponse], error) {
	sup, err := s.svc.CreateGlobalSuppression(ctx, newSuppressionFromProto(req.Msg.GetSuppression()))
	return respond(ctx, s.log, req, err, func() *deliverabilityv1.CreateGlobalSuppressionResponse {
		return &deliverabilityv1.CreateGlobalSuppressionResponse{Suppression: suppressionToProto(sup)}
	})
}

func (s *deliverabilityServer) DeleteGlobalSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.DeleteGlobalSuppressionRequest]) (*connect.Response[deliverabilityv1.DeleteGlobalSuppressionResponse], error) {
	deleted, err := s.svc.DeleteGlobalSuppression(ctx, req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *deliverabilityv1.DeleteGlobalSuppressionResponse {
		return &deliverabilityv1.DeleteGlobalSuppressionResponse{Deleted: deleted}
	})
}

func (s *deliverabilityServer) ListBounces(ctx context.Context, req *connect.Request[deliverabilityv1.ListBouncesRequest]) (*connect.Response[deliverabilityv1.ListBouncesResponse], error) {
	page, err := s.svc.ListBounces(ctx, req.Msg.GetOrganizationId(), pageQueryFromProto(req.Msg.GetQuery()))
	return respond(ctx, s.log, req, err, func() *deliverabilityv1.ListBouncesResponse {
		return &deliverabilityv1.ListBouncesResponse{Data: bouncesToProto(page.Data), NextCursor: page.NextCursor}
	})
}

func (s *deliverabilityServer) ListComplaints(ctx context.Context, req *connect.Request[deliverabilityv1.ListComplaintsRequest]) (*connect.Response[deliverabilityv1.ListComplaintsResponse], error) {
	page, err := s.svc.ListComplaints(ctx, req.Msg.GetOrganizationId(), pageQueryFromProto(req.Msg.GetQuery()))
	return respond(ctx, s.log, req, err, func() *deliverabilityv1.ListComplaintsResponse {
		return &deliverabilityv1.ListComplaintsResponse{Data: complaintsToProto(page.Data), NextCursor: page.NextCursor}
	})
}

// feedbackServer serves postmill.deliverability.v1.FeedbackService from a ports.FeedbackService.
type feedbackServer struct {
	svc ports.FeedbackService
	log *slog.Logger
}

func newFeedbackServer(svc ports.FeedbackService, log *slog.Logger) deliverabilityv1connect.FeedbackServiceHandler {
	return &feedbackServer{svc: svc, log: log}
}

func (s *feedbackServer) AcceptsRecipient(ctx context.Context, req *connect.Request[deliverabilityv1.AcceptsRecipientRequest]) (*connect.Response[deliverabilityv1.AcceptsRecipientResponse], error) {
	ok, err := s.svc.AcceptsRecipient(ctx, string(req.Msg.GetRcpt()))
	return respond(ctx, s.log, req, err, func() *deliverabilityv1.AcceptsRecipientResponse {
		return &deliverabilityv1.AcceptsRecipientResponse{Accepted: ok}
	})
}

func (s *feedbackServer) RecordBounce(ctx context.Context, req *connect.Request[deliverabilityv1.RecordBounceRequest]) (*connect.Response[deliverabilityv1.RecordBounceResponse], error) {
	err := s.svc.RecordBounce(ctx, bounceReportFromProto(req.Msg.GetReport()))
	return respond(ctx, s.log, req, err, empty[deliverabilityv1.RecordBounceResponse])
}

func (s *feedbackServer) RecordComplaint(ctx context.Context, req *connect.Request[deliverabilityv1.RecordComplaintRequest]) (*connect.Response[deliverabilityv1.RecordComplaintResponse], error) {
	err := s.svc.RecordComplaint(ctx, complaintReportFromProto(req.Msg.GetReport()))
	return respond(ctx, s.log, req, err, empty[deliverabilityv1.RecordComplaintResponse])
}

// deliverabilityClient implements ports.DeliverabilityService over
// postmill.deliverability.v1.DeliverabilityService.
type deliverabilityClient struct {
	conn deliverabilityv1connect.DeliverabilityServiceClient
}

func newDeliverabilityClient(conn deliverabilityv1connect.DeliverabilityServiceClient) ports.DeliverabilityService {
	return &deliverabilityClient{conn: conn}
}

func (c *deliverabilityClient) ListSuppressions(ctx context.Context, orgID string) ([]ports.Suppression, error) {
	return call(ctx, deliverabilityv1connect.DeliverabilityServiceListSuppressionsProcedure, c.conn.ListSuppressions,
		&deliverabilityv1.ListSuppressionsRequest{OrganizationId: orgID},
		pick((*deliverabilityv1.ListSuppressionsResponse).GetSuppressions, suppressionsFromProto))
}

func (c *deliverabilityClient) ListSuppressionsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Suppression], error) {
	return call(ctx, deliverabilityv1connect.DeliverabilityServiceListSuppressionsPageProcedure, c.conn.ListSuppressionsPage,
		&deliverabilityv1.ListSuppressionsPageRequest{OrganizationId: orgID, Query: pageQueryToProto(q)},
		func(m *deliverabilityv1.ListSuppressionsPageResponse) ports.Page[ports.Suppression] {
			return ports.Page[ports.Suppression]{Data: suppressionsFromProto(m.GetSuppressions()), NextCursor: m.GetNextCursor()}
		})
}

func (c *deliverabilityClient) CreateSuppression(ctx context.Context, orgID string, s ports.NewSuppression) (ports.Suppression, error) {
	return call(ctx, deliverabilityv1connect.DeliverabilityServiceCreateSuppressionProcedure, c.conn.CreateSuppression,
		&deliverabilityv1.CreateSuppressionRequest{OrganizationId: orgID, Suppression: newSuppressionToProto(s)},
		pick((*deliverabilityv1.CreateSuppressionResponse).GetSuppression, suppressionFromProto))
}

func (c *deliverabilityClient) DeleteSuppression(ctx context.Context, orgID, id string) (bool, error) {
	return call(ctx, deliverabilityv1connect.DeliverabilityServiceDeleteSuppressionProcedure, c.conn.DeleteSuppression,
		&deliverabilityv1.DeleteSuppressionRequest{OrganizationId: orgID, Id: id},
		(*deliverabilityv1.DeleteSuppressionResponse).GetDeleted)
}

func (c *deliverabilityClient) ListGlobalSuppressions(ctx context.Context) ([]ports.Suppression, error) {
	return call(ctx, deliverabilityv1connect.DeliverabilityServiceListGlobalSuppressionsProcedure, c.conn.ListGlobalSuppressions,
		&deliverabilityv1.ListGlobalSuppressionsRequest{},
		pick((*deliverabilityv1.ListGlobalSuppressionsResponse).GetSuppressions, suppressionsFromProto))
}

func (c *deliverabilityClient) CreateGlobalSuppression(ctx context.Context, s ports.NewSuppression) (ports.Suppression, error) {
	return call(ctx, deliverabilityv1connect.DeliverabilityServiceCreateGlobalSuppressionProcedure, c.conn.CreateGlobalSuppression,
		&deliverabilityv1.CreateGlobalSuppressionRequest{Suppression: newSuppressionToProto(s)},
		pick((*deliverabilityv1.CreateGlobalSuppressionResponse).GetSuppression, suppressionFromProto))
}

func (c *deliverabilityClient) DeleteGlobalSuppression(ctx context.Context, id string) (bool, error) {
	return call(ctx, deliverabilityv1connect.DeliverabilityServiceDeleteGlobalSuppressionProcedure, c.conn.DeleteGlobalSuppression,
		&deliverabilityv1.DeleteGlobalSuppressionRequest{Id: id},
		(*deliverabilityv1.DeleteGlobalSuppressionResponse).GetDeleted)
}

func (c *deliverabilityClient) ListBounces(ctx context.Context, orgID string, q ports.PageQuery) (ports.BouncePage, error) {
	return call(ctx, deliverabilityv1connect.DeliverabilityServiceListBouncesProcedure, c.conn.ListBounces,
		&deliverabilityv1.ListBouncesRequest{OrganizationId: orgID, Query: pageQueryToProto(q)},
		func(m *deliverabilityv1.ListBouncesResponse) ports.BouncePage {
			return ports.BouncePage{Data: bouncesFromProto(m.GetData()), NextCursor: m.GetNextCursor()}
		})
}

func (c *deliverabilityClient) ListComplaints(ctx context.Context, orgID string, q ports.PageQuery) (ports.ComplaintPage, error) {
	return call(ctx, deliverabilityv1connect.DeliverabilityServiceListComplaintsProcedure, c.conn.ListComplaints,
		&deliverabilityv1.ListComplaintsRequest{OrganizationId: orgID, Query: pageQueryToProto(q)},
		func(m *deliverabilityv1.ListComplaintsResponse) ports.ComplaintPage {
			return ports.ComplaintPage{Data: complaintsFromProto(m.GetData()), NextCursor: m.GetNextCursor()}
		})
}

// feedbackClient implements ports.FeedbackService over postmill.deliverability.v1.FeedbackService.
type feedbackClient struct {
	conn deliverabilityv1connect.FeedbackServiceClient
}

func newFeedbackClient(conn deliverabilityv1connect.FeedbackServiceClient) ports.FeedbackService {
	return &feedbackClient{conn: conn}
}

// AcceptsRecipient sends rcpt byte for byte, so an address that is not UTF-8 gets the core's answer, as
// in process.
func (c *feedbackClient) AcceptsRecipient(ctx context.Context, rcpt string) (bool, error) {
	return call(ctx, deliverabilityv1connect.FeedbackServiceAcceptsRecipientProcedure, c.conn.AcceptsRecipient,
		&deliverabilityv1.AcceptsRecipientRequest{Rcpt: []byte(rcpt)},
		(*deliverabilityv1.AcceptsRecipientResponse).GetAccepted)
}

// RecordBounce sends a report whose strings come from mail a stranger sent; like every string on the hop
// they must be valid UTF-8, or the call fails as an internal error naming the field before it reaches
// the core.
func (c *feedbackClient) RecordBounce(ctx context.Context, r ports.BounceReport) error {
	return exec(ctx, deliverabilityv1connect.FeedbackServiceRecordBounceProcedure, c.conn.RecordBounce,
		&deliverabilityv1.RecordBounceRequest{Report: bounceReportToProto(r)})
}

// RecordComplaint has RecordBounce's proviso on UTF-8.
func (c *feedbackClient) RecordComplaint(ctx context.Context, r ports.ComplaintReport) error {
	return exec(ctx, deliverabilityv1connect.FeedbackServiceRecordComplaintProcedure, c.conn.RecordComplaint,
		&deliverabilityv1.RecordComplaintRequest{Report: complaintReportToProto(r)})
}

// Complaint.ArrivalDate and ComplaintReport.ArrivalDate travel as unset Timestamps when nil, so "the
// report did not say" survives the hop.

func suppressionToProto(s ports.Suppression) *deliverabilityv1.Suppression {
	return &deliverabilityv1.Suppression{
		Id:             s.ID,
		OrganizationId: s.OrganizationID,
		Address:        s.Address,
		Scope:          s.Scope,
		Reason:         s.Reason,
		CreatedAt:      timeToProto(s.CreatedAt),
	}
}

func suppressionFromProto(s *deliverabilityv1.Suppression) ports.Suppression {
	return ports.Suppression{
		ID:             s.GetId(),
		OrganizationID: s.GetOrganizationId(),
		Address:        s.GetAddress(),
		Scope:          s.GetScope(),
		Reason:         s.GetReason(),
		CreatedAt:      timeFromProto(s.GetCreatedAt()),
	}
}

func suppressionsToProto(suppressions []ports.Suppression) *deliverabilityv1.SuppressionList {
	if suppressions == nil {
		return nil
	}
	return &deliverabilityv1.SuppressionList{Items: mapItems(suppressions, suppressionToProto)}
}

func suppressionsFromProto(l *deliverabilityv1.SuppressionList) []ports.Suppression {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), suppressionFromProto)
}

func newSuppressionToProto(s ports.NewSuppression) *deliverabilityv1.NewSuppression {
	return &deliverabilityv1.NewSuppression{Address: s.Address, Scope: s.Scope, Reason: s.Reason}
}

func newSuppressionFromProto(s *deliverabilityv1.NewSuppression) ports.NewSuppression {
	return ports.NewSuppression{Address: s.GetAddress(), Scope: s.GetScope(), Reason: s.GetReason()}
}

func pageQueryToProto(q ports.PageQuery) *deliverabilityv1.PageQuery {
	return &deliverabilityv1.PageQuery{Limit: int64(q.Limit), Cursor: q.Cursor}
}

func pageQueryFromProto(q *deliverabilityv1.PageQuery) ports.PageQuery {
	return ports.PageQuery{Limit: int(q.GetLimit()), Cursor: q.GetCursor()}
}

func bounceToProto(b ports.Bounce) *deliverabilityv1.Bounce {
	return &deliverabilityv1.Bounce{
		Id:             b.ID,
		OrganizationId: b.OrganizationID,
		MessageId:      b.MessageID,
		RecipientId:    b.RecipientID,
		Address:        b.Address,
		Type:           b.Type,
		Class:          b.Class,
		Status:         b.Status,
		Action:         b.Action,
		DiagnosticCode: b.DiagnosticCode,
		RemoteMta:      b.RemoteMTA,
		ReportingMta:   b.ReportingMTA,
		CreatedAt:      timeToProto(b.CreatedAt),
	}
}

func bounceFromProto(b *deliverabilityv1.Bounce) ports.Bounce {
	return ports.Bounce{
		ID:             b.GetId(),
		OrganizationID: b.GetOrganizationId(),
		MessageID:      b.GetMessageId(),
		RecipientID:    b.GetRecipientId(),
		Address:        b.GetAddress(),
		Type:           b.GetType(),
		Class:          b.GetClass(),
		Status:         b.GetStatus(),
		Action:         b.GetAction(),
		DiagnosticCode: b.GetDiagnosticCode(),
		RemoteMTA:      b.GetRemoteMta(),
		ReportingMTA:   b.GetReportingMta(),
		CreatedAt:      timeFromProto(b.GetCreatedAt()),
	}
}

func bouncesToProto(bounces []ports.Bounce) *deliverabilityv1.BounceList {
	if bounces == nil {
		return nil
	}
	return &deliverabilityv1.BounceList{Items: mapItems(bounces, bounceToProto)}
}

func bouncesFromProto(l *deliverabilityv1.BounceList) []ports.Bounce {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), bounceFromProto)
}

func complaintToProto(c ports.Complaint) *deliverabilityv1.Complaint {
	return &deliverabilityv1.Complaint{
		Id:             c.ID,
		OrganizationId: c.OrganizationID,
		MessageId:      c.MessageID,
		RecipientId:    c.RecipientID,
		Address:        c.Address,
		FeedbackType:   c.FeedbackType,
		UserAgent:      c.UserAgent,
		ReportedDomain: c.ReportedDomain,
		SourceIp:       c.SourceIP,
		ArrivalDate:    timePtrToProto(c.ArrivalDate),
		CreatedAt:      timeToProto(c.CreatedAt),
	}
}

func complaintFromProto(c *deliverabilityv1.Complaint) ports.Complaint {
	return ports.Complaint{
		ID:             c.GetId(),
		OrganizationID: c.GetOrganizationId(),
		MessageID:      c.GetMessageId(),
		RecipientID:    c.GetRecipientId(),
		Address:        c.GetAddress(),
		FeedbackType:   c.GetFeedbackType(),
		UserAgent:      c.GetUserAgent(),
		ReportedDomain: c.GetReportedDomain(),
		SourceIP:       c.GetSourceIp(),
		ArrivalDate:    timePtrFromProto(c.GetArrivalDate()),
		CreatedAt:      timeFromProto(c.GetCreatedAt()),
	}
}

func complaintsToProto(complaints []ports.Complaint) *deliverabilityv1.ComplaintList {
	if complaints == nil {
		return nil
	}
	return &deliverabilityv1.ComplaintList{Items: mapItems(complaints, complaintToProto)}
}

func complaintsFromProto(l *deliverabilityv1.ComplaintList) []ports.Complaint {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), complaintFromProto)
}

func dsnRecipientsToProto(recipients []ports.DSNRecipient) *deliverabilityv1.DSNRecipientList {
	if recipients == nil {
		return nil
	}
	l := &deliverabilityv1.DSNRecipientList{Items: make([]*deliverabilityv1.DSNRecipient, 0, len(recipients))}
	for _, r := range recipients {
		l.Items = append(l.Items, &deliverabilityv1.DSNRecipient{
			FinalRecipient:    r.FinalRecipient,
			OriginalRecipient: r.OriginalRecipient,
			Action:            r.Action,
			Status:            r.Status,
			DiagnosticCode:    r.DiagnosticCode,
			RemoteMta:         r.RemoteMTA,
		})
	}
	return l
}

func dsnRecipientsFromProto(l *deliverabilityv1.DSNRecipientList) []ports.DSNRecipient {
	if l == nil {
		return nil
	}
	recipients := make([]ports.DSNRecipient, 0, len(l.GetItems()))
	for _, r := range l.GetItems() {
		recipients = append(recipients, ports.DSNRecipient{
			FinalRecipient:    r.GetFinalRecipient(),
			OriginalRecipient: r.GetOriginalRecipient(),
			Action:            r.GetAction(),
			Status:            r.GetStatus(),
			DiagnosticCode:    r.GetDiagnosticCode(),
			RemoteMTA:         r.GetRemoteMta(),
		})
	}
	return recipients
}

func bounceReportToProto(r ports.BounceReport) *deliverabilityv1.BounceReport {
	return &deliverabilityv1.BounceReport{
		Rcpt:              r.Rcpt,
		ReportingMta:      r.ReportingMTA,
		OriginalMessageId: r.OriginalMessageID,
		Recipients:        dsnRecipientsToProto(r.Recipients),
		ArrivedAt:         timeToProto(r.ArrivedAt),
	}
}

func bounceReportFromProto(r *deliverabilityv1.BounceReport) ports.BounceReport {
	return ports.BounceReport{
		Rcpt:              r.GetRcpt(),
		ReportingMTA:      r.GetReportingMta(),
		OriginalMessageID: r.GetOriginalMessageId(),
		Recipients:        dsnRecipientsFromProto(r.GetRecipients()),
		ArrivedAt:         timeFromProto(r.GetArrivedAt()),
	}
}

func complaintReportToProto(r ports.ComplaintReport) *deliverabilityv1.ComplaintReport {
	return &deliverabilityv1.ComplaintReport{
		Rcpt:              r.Rcpt,
		FeedbackType:      r.FeedbackType,
		UserAgent:         r.UserAgent,
		OriginalMailFrom:  r.OriginalMailFrom,
		OriginalRcptTo:    stringListToProto(r.OriginalRcptTo),
		OriginalMessageId: r.OriginalMessageID,
		ReportedDomain:    r.ReportedDomain,
		SourceIp:          r.SourceIP,
		ArrivalDate:       timePtrToProto(r.ArrivalDate),
		ArrivedAt:         timeToProto(r.ArrivedAt),
	}
}

func complaintReportFromProto(r *deliverabilityv1.ComplaintReport) ports.ComplaintReport {
	return ports.ComplaintReport{
		Rcpt:              r.GetRcpt(),
		FeedbackType:      r.GetFeedbackType(),
		UserAgent:         r.GetUserAgent(),
		OriginalMailFrom:  r.GetOriginalMailFrom(),
		OriginalRcptTo:    stringListFromProto(r.GetOriginalRcptTo()),
		OriginalMessageID: r.GetOriginalMessageId(),
		ReportedDomain:    r.GetReportedDomain(),
		SourceIP:          r.GetSourceIp(),
		ArrivalDate:       timePtrFromProto(r.GetArrivalDate()),
		ArrivedAt:         timeFromProto(r.GetArrivedAt()),
	}
}
