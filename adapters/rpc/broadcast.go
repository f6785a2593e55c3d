package rpc

import (
	"context"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	broadcastv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/broadcast/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/broadcast/v1/broadcastv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.BroadcastService { return &c.Broadcasts },
		broadcastv1connect.NewBroadcastServiceHandler, newBroadcastServer,
		broadcastv1connect.NewBroadcastServiceClient, newBroadcastClient).
		calledBy(broadcastv1connect.BroadcastServiceName, TierEdge))
	register(portService(func(c *ports.Core) *ports.PublicUnsubscribeService { return &c.Unsubscribe },
		broadcastv1connect.NewUnsubscribeServiceHandler, newUnsubscribeServer,
		broadcastv1connect.NewUnsubscribeServiceClient, newUnsubscribeClient).
		calledBy(broadcastv1connect.UnsubscribeServiceName, TierEdge))
}

func broadcastToProto(b ports.Broadcast) *broadcastv1.Broadcast {
	return &broadcastv1.Broadcast{Id: b.ID, OrganizationId: b.OrganizationID, Name: b.Name, Subject: b.Subject,
		From: b.From, ReplyTo: b.ReplyTo, Html: b.HTML, Text: b.Text, TemplateId: b.TemplateID, SegmentId: b.SegmentID,
		TopicId: b.TopicID, ScheduledAt: timePtrToProto(b.ScheduledAt), Status: string(b.Status), Cursor: b.Cursor,
		PausedUntil: timePtrToProto(b.PausedUntil), FailureReason: b.FailureReason, StartedAt: timePtrToProto(b.StartedAt),
		CompletedAt: timePtrToProto(b.CompletedAt), CreatedAt: timeToProto(b.CreatedAt), UpdatedAt: timeToProto(b.UpdatedAt)}
}

func broadcastFromProto(b *broadcastv1.Broadcast) ports.Broadcast {
	return ports.Broadcast{ID: b.GetId(), OrganizationID: b.GetOrganizationId(), Name: b.GetName(), Subject: b.GetSubject(),
		From: b.GetFrom(), ReplyTo: b.GetReplyTo(), HTML: b.GetHtml(), Text: b.GetText(), TemplateID: b.GetTemplateId(),
		SegmentID: b.GetSegmentId(), TopicID: b.GetTopicId(), ScheduledAt: timePtrFromProto(b.GetScheduledAt()),
		Status: ports.BroadcastStatus(b.GetStatus()), Cursor: b.GetCursor(), PausedUntil: timePtrFromProto(b.GetPausedUntil()),
		FailureReason: b.GetFailureReason(), StartedAt: timePtrFromProto(b.GetStartedAt()),
		CompletedAt: timePtrFromProto(b.GetCompletedAt()), CreatedAt: timeFromProto(b.GetCreatedAt()),
		UpdatedAt: timeFromProto(b.GetUpdatedAt())}
}

// withBroadcast is every response that carries one broadcast.
type withBroadcast interface{ GetBroadcast() *broadcastv1.Broadcast }

func getBroadcast[R withBroadcast](r R) ports.Broadcast { return broadcastFromProto(r.GetBroadcast()) }

func patchToProto(p ports.BroadcastPatch) *broadcastv1.BroadcastPatch {
	return &broadcastv1.BroadcastPatch{Name: p.Name, Subject: p.Subject, From: p.From, ReplyTo: p.ReplyTo, Html: p.HTML,
		Text: p.Text, TemplateId: p.TemplateID, SegmentId: p.SegmentID, TopicId: p.TopicID,
		ScheduledAt: timePtrToProto(p.ScheduledAt), ClearSegment: p.ClearSegment, ClearTopic: p.ClearTopic,
		ClearScheduledAt: p.ClearScheduledAt}
}

func patchFromProto(p *broadcastv1.BroadcastPatch) ports.BroadcastPatch {
	return ports.BroadcastPatch{Name: p.Name, Subject: p.Subject, From: p.From, ReplyTo: p.ReplyTo, HTML: p.Html,
		Text: p.Text, TemplateID: p.TemplateId, SegmentID: p.SegmentId, TopicID: p.TopicId,
		ScheduledAt: timePtrFromProto(p.GetScheduledAt()), ClearSegment: p.GetClearSegment(), ClearTopic: p.GetClearTopic(),
		ClearScheduledAt: p.GetClearScheduledAt()}
}

// broadcastServer serves postmill.broadcast.v1.BroadcastService from a ports.BroadcastService.
type broadcastServer struct {
	svc ports.BroadcastService
	log *slog.Logger
}

func newBroadcastServer(svc ports.BroadcastService, log *slog.Logger) broadcastv1connect.BroadcastServiceHandler {
	return &broadcastServer{svc: svc, log: log}
}

func (s *broadcastServer) CreateBroadcast(ctx context.Context, req *connect.Request[broadcastv1.CreateBroadcastRequest]) (*connect.Response[broadcastv1.CreateBroadcastResponse], error) {
	n := req.Msg.GetBroadcast()
	b, err := s.svc.CreateBroadcast(ctx, req.Msg.GetOrganizationId(), ports.NewBroadcast{Name: n.GetName(),
		Subject: n.GetSubject(), From: n.GetFrom(), ReplyTo: n.GetReplyTo(), HTML: n.GetHtml(), Text: n.GetText(),
		TemplateID: n.GetTemplateId(), SegmentID: n.GetSegmentId(), TopicID: n.GetTopicId(),
		ScheduledAt: timePtrFromProto(n.GetScheduledAt())})
	return respond(ctx, s.log, req, err, func() *broadcastv1.CreateBroadcastResponse {
		return &broadcastv1.CreateBroadcastResponse{Broadcast: broadcastToProto(b)}
	})
}

func (s *broadcastServer) ListBroadcasts(ctx context.Context, req *connect.Request[broadcastv1.ListBroadcastsRequest]) (*connect.Response[broadcastv1.ListBroadcastsResponse], error) {
	m := req.Msg
	list, err := s.svc.ListBroadcasts(ctx, m.GetOrganizationId(), int(m.GetLimit()), int(m.GetOffset()))
	return respond(ctx, s.log, req, err, func() *broadcastv1.ListBroadcastsResponse {
		return &broadcastv1.ListBroadcastsResponse{Broadcasts: mapItems(list, broadcastToProto)}
	})
}

func (s *broadcastServer) GetBroadcast(ctx context.Context, req *connect.Request[broadcastv1.GetBroadcastRequest]) (*connect.Response[broadcastv1.GetBroadcastResponse], error) {
	b, err := s.svc.GetBroadcast(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *broadcastv1.GetBroadcastResponse {
		return &broadcastv1.GetBroadcastResponse{Broadcast: broadcastToProto(b)}
	})
}

func (s *broadcastServer) UpdateBroadcast(ctx context.Context, req *connect.Request[broadcastv1.UpdateBroadcastRequest]) (*connect.Response[broadcastv1.UpdateBroadcastResponse], error) {
	b, err := s.svc.UpdateBroadcast(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId(), patchFromProto(req.Msg.GetPatch()))
	return respond(ctx, s.log, req, err, func() *broadcastv1.UpdateBroadcastResponse {
		return &broadcastv1.UpdateBroadcastResponse{Broadcast: broadcastToProto(b)}
	})
}

func (s *broadcastServer) DeleteBroadcast(ctx context.Context, req *connect.Request[broadcastv1.DeleteBroadcastRequest]) (*connect.Response[broadcastv1.DeleteBroadcastResponse], error) {
	err := s.svc.DeleteBroadcast(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, empty[broadcastv1.DeleteBroadcastResponse])
}

func (s *broadcastServer) SendBroadcast(ctx context.Context, req *connect.Request[broadcastv1.SendBroadcastRequest]) (*connect.Response[broadcastv1.SendBroadcastResponse], error) {
	b, err := s.svc.SendBroadcast(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *broadcastv1.SendBroadcastResponse {
		return &broadcastv1.SendBroadcastResponse{Broadcast: broadcastToProto(b)}
	})
}

func (s *broadcastServer) ScheduleBroadcast(ctx context.Context, req *connect.Request[broadcastv1.ScheduleBroadcastRequest]) (*connect.Response[broadcastv1.ScheduleBroadcastResponse], error) {
	b, err := s.svc.ScheduleBroadcast(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId(), timeFromProto(req.Msg.GetScheduledAt()))
	return respond(ctx, s.log, req, err, func() *broadcastv1.ScheduleBroadcastResponse {
		return &broadcastv1.ScheduleBroadcastResponse{Broadcast: broadcastToProto(b)}
	})
}

func (s *broadcastServer) CancelBroadcast(ctx context.Context, req *connect.Request[broadcastv1.CancelBroadcastRequest]) (*connect.Response[broadcastv1.CancelBroadcastResponse], error) {
	b, err := s.svc.CancelBroadcast(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *broadcastv1.CancelBroadcastResponse {
		return &broadcastv1.CancelBroadcastResponse{Broadcast: broadcastToProto(b)}
	})
}

func (s *broadcastServer) BroadcastStats(ctx context.Context, req *connect.Request[broadcastv1.BroadcastStatsRequest]) (*connect.Response[broadcastv1.BroadcastStatsResponse], error) {
	st, err := s.svc.BroadcastStats(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *broadcastv1.BroadcastStatsResponse {
		return &broadcastv1.BroadcastStatsResponse{Recipients: st.Recipients, Sent: st.Sent, Delivered: st.Delivered,
			Bounced: st.Bounced, Complained: st.Complained, Opened: st.Opened, Clicked: st.Clicked,
			Unsubscribed: st.Unsubscribed, Failed: st.Failed}
	})
}

func (s *broadcastServer) BroadcastRecipients(ctx context.Context, req *connect.Request[broadcastv1.BroadcastRecipientsRequest]) (*connect.Response[broadcastv1.BroadcastRecipientsResponse], error) {
	rs, total, err := s.svc.BroadcastRecipients(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId(), int(req.Msg.GetLimit()), int(req.Msg.GetOffset()))
	return respond(ctx, s.log, req, err, func() *broadcastv1.BroadcastRecipientsResponse {
		return &broadcastv1.BroadcastRecipientsResponse{Total: total, Recipients: mapItems(rs, func(r ports.BroadcastRecipient) *broadcastv1.BroadcastRecipient {
			return &broadcastv1.BroadcastRecipient{ContactId: r.ContactID, Email: r.Email, MessageId: r.MessageID,
				Status: r.Status, CreatedAt: timeToProto(r.CreatedAt)}
		})}
	})
}

// broadcastClient implements ports.BroadcastService over postmill.broadcast.v1.BroadcastService.
type broadcastClient struct {
	conn broadcastv1connect.BroadcastServiceClient
}

func newBroadcastClient(conn broadcastv1connect.BroadcastServiceClient) ports.BroadcastService {
	return &broadcastClient{conn: conn}
}

func (c *broadcastClient) CreateBroadcast(ctx context.Context, orgID string, n ports.NewBroadcast) (ports.Broadcast, error) {
	return call(ctx, broadcastv1connect.BroadcastServiceCreateBroadcastProcedure, c.conn.CreateBroadcast,
		&broadcastv1.CreateBroadcastRequest{OrganizationId: orgID, Broadcast: &broadcastv1.NewBroadcast{Name: n.Name,
			Subject: n.Subject, From: n.From, ReplyTo: n.ReplyTo, Html: n.HTML, Text: n.Text, TemplateId: n.TemplateID,
			SegmentId: n.SegmentID, TopicId: n.TopicID, ScheduledAt: timePtrToProto(n.ScheduledAt)}}, getBroadcast[*broadcastv1.CreateBroadcastResponse])
}

func (c *broadcastClient) ListBroadcasts(ctx context.Context, orgID string, limit, offset int) ([]ports.Broadcast, error) {
	return call(ctx, broadcastv1connect.BroadcastServiceListBroadcastsProcedure, c.conn.ListBroadcasts,
		&broadcastv1.ListBroadcastsRequest{OrganizationId: orgID, Limit: int64(limit), Offset: int64(offset)}, func(r *broadcastv1.ListBroadcastsResponse) []ports.Broadcast {
			return mapItems(r.GetBroadcasts(), broadcastFromProto)
		})
}

func (c *broadcastClient) GetBroadcast(ctx context.Context, orgID, id string) (ports.Broadcast, error) {
	return call(ctx, broadcastv1connect.BroadcastServiceGetBroadcastProcedure, c.conn.GetBroadcast,
		&broadcastv1.GetBroadcastRequest{OrganizationId: orgID, Id: id}, getBroadcast[*broadcastv1.GetBroadcastResponse])
}

func (c *broadcastClient) UpdateBroadcast(ctx context.Context, orgID, id string, p ports.BroadcastPatch) (ports.Broadcast, error) {
	return call(ctx, broadcastv1connect.BroadcastServiceUpdateBroadcastProcedure, c.conn.UpdateBroadcast,
		&broadcastv1.UpdateBroadcastRequest{OrganizationId: orgID, Id: id, Patch: patchToProto(p)}, getBroadcast[*broadcastv1.UpdateBroadcastResponse])
}

func (c *broadcastClient) DeleteBroadcast(ctx context.Context, orgID, id string) error {
	return exec(ctx, broadcastv1connect.BroadcastServiceDeleteBroadcastProcedure, c.conn.DeleteBroadcast,
		&broadcastv1.DeleteBroadcastRequest{OrganizationId: orgID, Id: id})
}

func (c *broadcastClient) SendBroadcast(ctx context.Context, orgID, id string) (ports.Broadcast, error) {
	return call(ctx, broadcastv1connect.BroadcastServiceSendBroadcastProcedure, c.conn.SendBroadcast,
		&broadcastv1.SendBroadcastRequest{OrganizationId: orgID, Id: id}, getBroadcast[*broadcastv1.SendBroadcastResponse])
}

func (c *broadcastClient) ScheduleBroadcast(ctx context.Context, orgID, id string, at time.Time) (ports.Broadcast, error) {
	return call(ctx, broadcastv1connect.BroadcastServiceScheduleBroadcastProcedure, c.conn.ScheduleBroadcast,
		&broadcastv1.ScheduleBroadcastRequest{OrganizationId: orgID, Id: id, ScheduledAt: timeToProto(at)}, getBroadcast[*broadcastv1.ScheduleBroadcastResponse])
}

func (c *broadcastClient) CancelBroadcast(ctx context.Context, orgID, id string) (ports.Broadcast, error) {
	return call(ctx, broadcastv1connect.BroadcastServiceCancelBroadcastProcedure, c.conn.CancelBroadcast,
		&broadcastv1.CancelBroadcastRequest{OrganizationId: orgID, Id: id}, getBroadcast[*broadcastv1.CancelBroadcastResponse])
}

func (c *broadcastClient) BroadcastStats(ctx context.Context, orgID, id string) (ports.BroadcastStats, error) {
	return call(ctx, broadcastv1connect.BroadcastServiceBroadcastStatsProcedure, c.conn.BroadcastStats,
		&broadcastv1.BroadcastStatsRequest{OrganizationId: orgID, Id: id}, func(r *broadcastv1.BroadcastStatsResponse) ports.BroadcastStats {
			return ports.BroadcastStats{Recipients: r.GetRecipients(), Sent: r.GetSent(), Delivered: r.GetDelivered(),
				Bounced: r.GetBounced(), Complained: r.GetComplained(), Opened: r.GetOpened(), Clicked: r.GetClicked(),
				Unsubscribed: r.GetUnsubscribed(), Failed: r.GetFailed()}
		})
}

// recipientsPage is what BroadcastRecipients answers, carried through call as one value.
type recipientsPage struct {
	items []ports.BroadcastRecipient
	total int64
}

func (c *broadcastClient) BroadcastRecipients(ctx context.Context, orgID, id string, limit, offset int) ([]ports.BroadcastRecipient, int64, error) {
	p, err := call(ctx, broadcastv1connect.BroadcastServiceBroadcastRecipientsProcedure, c.conn.BroadcastRecipients,
		&broadcastv1.BroadcastRecipientsRequest{OrganizationId: orgID, Id: id, Limit: int32(limit), Offset: int32(offset)},
		func(r *broadcastv1.BroadcastRecipientsResponse) recipientsPage {
			return recipientsPage{total: r.GetTotal(), items: mapItems(r.GetRecipients(), func(x *broadcastv1.BroadcastRecipient) ports.BroadcastRecipient {
				return ports.BroadcastRecipient{ContactID: x.GetContactId(), Email: x.GetEmail(), MessageID: x.GetMessageId(),
					Status: x.GetStatus(), CreatedAt: timeFromProto(x.GetCreatedAt())}
			})}
		})
	return p.items, p.total, err
}

// unsubscribeServer serves postmill.broadcast.v1.UnsubscribeService from a ports.PublicUnsubscribeService.
type unsubscribeServer struct {
	svc ports.PublicUnsubscribeService
	log *slog.Logger
}

func newUnsubscribeServer(svc ports.PublicUnsubscribeService, log *slog.Logger) broadcastv1connect.UnsubscribeServiceHandler {
	return &unsubscribeServer{svc: svc, log: log}
}

func (s *unsubscribeServer) PreviewUnsubscribe(ctx context.Context, req *connect.Request[broadcastv1.PreviewUnsubscribeRequest]) (*connect.Response[broadcastv1.PreviewUnsubscribeResponse], error) {
	v, err := s.svc.PreviewUnsubscribe(ctx, string(req.Msg.GetToken()))
	return respond(ctx, s.log, req, err, func() *broadcastv1.PreviewUnsubscribeResponse {
		return &broadcastv1.PreviewUnsubscribeResponse{MaskedEmail: v.MaskedEmail, TopicName: v.TopicName, PreferencesToken: v.PreferencesToken}
	})
}

func (s *unsubscribeServer) Unsubscribe(ctx context.Context, req *connect.Request[broadcastv1.UnsubscribeRequest]) (*connect.Response[broadcastv1.UnsubscribeResponse], error) {
	v, err := s.svc.Unsubscribe(ctx, string(req.Msg.GetToken()))
	return respond(ctx, s.log, req, err, func() *broadcastv1.UnsubscribeResponse {
		return &broadcastv1.UnsubscribeResponse{MaskedEmail: v.MaskedEmail, TopicName: v.TopicName, PreferencesToken: v.PreferencesToken}
	})
}

// unsubscribeClient implements ports.PublicUnsubscribeService; tokens travel byte for byte.
type unsubscribeClient struct {
	conn broadcastv1connect.UnsubscribeServiceClient
}

func newUnsubscribeClient(conn broadcastv1connect.UnsubscribeServiceClient) ports.PublicUnsubscribeService {
	return &unsubscribeClient{conn: conn}
}

// withView is both unsubscribe responses.
type withView interface {
	GetMaskedEmail() string
	GetTopicName() string
	GetPreferencesToken() string
}

func viewFromProto[R withView](r R) ports.UnsubscribeView {
	return ports.UnsubscribeView{MaskedEmail: r.GetMaskedEmail(), TopicName: r.GetTopicName(), PreferencesToken: r.GetPreferencesToken()}
}

func (c *unsubscribeClient) PreviewUnsubscribe(ctx context.Context, token string) (ports.UnsubscribeView, error) {
	return call(ctx, broadcastv1connect.UnsubscribeServicePreviewUnsubscribeProcedure, c.conn.PreviewUnsubscribe,
		&broadcastv1.PreviewUnsubscribeRequest{Token: []byte(token)}, viewFromProto[*broadcastv1.PreviewUnsubscribeResponse])
}

func (c *unsubscribeClient) Unsubscribe(ctx context.Context, token string) (ports.UnsubscribeView, error) {
	return call(ctx, broadcastv1connect.UnsubscribeServiceUnsubscribeProcedure, c.conn.Unsubscribe,
		&broadcastv1.UnsubscribeRequest{Token: []byte(token)}, viewFromProto[*broadcastv1.UnsubscribeResponse])
}
