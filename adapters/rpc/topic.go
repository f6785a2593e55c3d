package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	topicv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/topic/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/topic/v1/topicv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.TopicService { return &c.Topics },
		topicv1connect.NewTopicServiceHandler, newTopicServer,
		topicv1connect.NewTopicServiceClient, newTopicClient).
		calledBy(topicv1connect.TopicServiceName, TierEdge))
}

func topicToProto(t ports.Topic) *topicv1.Topic {
	return &topicv1.Topic{Id: t.ID, OrganizationId: t.OrganizationID, Key: t.Key, Name: t.Name,
		Description: t.Description, DoubleOptIn: t.DoubleOptIn, ConfirmFrom: t.ConfirmFrom, CreatedAt: timeToProto(t.CreatedAt),
		UpdatedAt: timeToProto(t.UpdatedAt)}
}

func topicFromProto(t *topicv1.Topic) ports.Topic {
	return ports.Topic{ID: t.GetId(), OrganizationID: t.GetOrganizationId(), Key: t.GetKey(), Name: t.GetName(),
		Description: t.GetDescription(), DoubleOptIn: t.GetDoubleOptIn(), ConfirmFrom: t.GetConfirmFrom(),
		CreatedAt: timeFromProto(t.GetCreatedAt()), UpdatedAt: timeFromProto(t.GetUpdatedAt())}
}

func topicInputToProto(in ports.TopicInput) *topicv1.TopicInput {
	return &topicv1.TopicInput{Key: in.Key, Name: in.Name, Description: in.Description, DoubleOptIn: in.DoubleOptIn,
		ConfirmFrom: in.ConfirmFrom}
}

func topicInputFromProto(in *topicv1.TopicInput) ports.TopicInput {
	return ports.TopicInput{Key: in.GetKey(), Name: in.Name, Description: in.Description, DoubleOptIn: in.DoubleOptIn,
		ConfirmFrom: in.ConfirmFrom}
}

func subscriptionResultToProto(r ports.SubscriptionResult) *topicv1.SubscriptionResult {
	s := r.Subscription
	out := &topicv1.SubscriptionResult{ConfirmToken: r.ConfirmToken, ConfirmationEmailId: r.ConfirmationEmailID,
		Subscription: &topicv1.Subscription{
			TopicId: s.TopicID, ContactId: s.ContactID, Email: s.Email, Status: s.Status, ConsentSource: s.ConsentSource,
			ConsentIp: s.ConsentIP, CreatedAt: timeToProto(s.CreatedAt), UpdatedAt: timeToProto(s.UpdatedAt),
			ConfirmedAt: timePtrToProto(s.ConfirmedAt)}}
	if e := r.ConfirmationError; e != nil {
		out.ConfirmationErrorCode, out.ConfirmationErrorMessage = string(e.Code), e.Message
	}
	return out
}

type subscriptionMessage interface {
	GetResult() *topicv1.SubscriptionResult
}

func subscriptionResultFromProto[R subscriptionMessage](m R) ports.SubscriptionResult {
	r := m.GetResult()
	s := r.GetSubscription()
	out := ports.SubscriptionResult{ConfirmToken: r.GetConfirmToken(), ConfirmationEmailID: r.GetConfirmationEmailId(),
		Subscription: ports.TopicSubscription{
			TopicID: s.GetTopicId(), ContactID: s.GetContactId(), Email: s.GetEmail(), Status: s.GetStatus(),
			ConsentSource: s.GetConsentSource(), ConsentIP: s.GetConsentIp(), CreatedAt: timeFromProto(s.GetCreatedAt()),
			UpdatedAt: timeFromProto(s.GetUpdatedAt()), ConfirmedAt: timePtrFromProto(s.GetConfirmedAt())}}
	if code := r.GetConfirmationErrorCode(); code != "" {
		out.ConfirmationError = &ports.Error{Code: ports.Code(code), Message: r.GetConfirmationErrorMessage()}
	}
	return out
}

// topicServer serves postmill.topic.v1.TopicService from a ports.TopicService.
type topicServer struct {
	svc ports.TopicService
	log *slog.Logger
}

func newTopicServer(svc ports.TopicService, log *slog.Logger) topicv1connect.TopicServiceHandler {
	return &topicServer{svc: svc, log: log}
}

func (s *topicServer) CreateTopic(ctx context.Context, req *connect.Request[topicv1.CreateTopicRequest]) (*connect.Response[topicv1.CreateTopicResponse], error) {
	t, err := s.svc.CreateTopic(ctx, req.Msg.GetOrganizationId(), topicInputFromProto(req.Msg.GetInput()))
	return respond(ctx, s.log, req, err, func() *topicv1.CreateTopicResponse {
		return &topicv1.CreateTopicResponse{Topic: topicToProto(t)}
	})
}

func (s *topicServer) GetTopic(ctx context.Context, req *connect.Request[topicv1.GetTopicRequest]) (*connect.Response[topicv1.GetTopicResponse], error) {
	t, err := s.svc.GetTopic(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *topicv1.GetTopicResponse {
		return &topicv1.GetTopicResponse{Topic: topicToProto(t)}
	})
}

func (s *topicServer) ListTopics(ctx context.Context, req *connect.Request[topicv1.ListTopicsRequest]) (*connect.Response[topicv1.ListTopicsResponse], error) {
	m := req.Msg
	ts, err := s.svc.ListTopics(ctx, m.GetOrganizationId(), int(m.GetLimit()), int(m.GetOffset()))
	return respond(ctx, s.log, req, err, func() *topicv1.ListTopicsResponse {
		out := &topicv1.ListTopicsResponse{}
		for _, t := range ts {
			out.Topics = append(out.Topics, topicToProto(t))
		}
		return out
	})
}

func (s *topicServer) UpdateTopic(ctx context.Context, req *connect.Request[topicv1.UpdateTopicRequest]) (*connect.Response[topicv1.UpdateTopicResponse], error) {
	t, err := s.svc.UpdateTopic(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId(), topicInputFromProto(req.Msg.GetInput()))
	return respond(ctx, s.log, req, err, func() *topicv1.UpdateTopicResponse {
		return &topicv1.UpdateTopicResponse{Topic: topicToProto(t)}
	})
}

func (s *topicServer) DeleteTopic(ctx context.Context, req *connect.Request[topicv1.DeleteTopicRequest]) (*connect.Response[topicv1.DeleteTopicResponse], error) {
	err := s.svc.DeleteTopic(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, empty[topicv1.DeleteTopicResponse])
}

func subscriptionRequestFromProto(m *topicv1.SubscriptionChange) ports.SubscriptionRequest {
	return ports.SubscriptionRequest{ContactID: m.GetContactId(), Email: m.GetEmail(), ConsentSource: m.GetConsentSource(), ConsentIP: m.GetConsentIp()}
}

func (s *topicServer) Subscribe(ctx context.Context, req *connect.Request[topicv1.SubscribeRequest]) (*connect.Response[topicv1.SubscribeResponse], error) {
	ch := req.Msg.GetChange()
	r, err := s.svc.SubscribeTopic(ctx, ch.GetOrganizationId(), ch.GetTopicId(), subscriptionRequestFromProto(ch))
	return respond(ctx, s.log, req, err, func() *topicv1.SubscribeResponse {
		return &topicv1.SubscribeResponse{Result: subscriptionResultToProto(r)}
	})
}

func (s *topicServer) Unsubscribe(ctx context.Context, req *connect.Request[topicv1.UnsubscribeRequest]) (*connect.Response[topicv1.UnsubscribeResponse], error) {
	ch := req.Msg.GetChange()
	r, err := s.svc.UnsubscribeTopic(ctx, ch.GetOrganizationId(), ch.GetTopicId(), subscriptionRequestFromProto(ch))
	return respond(ctx, s.log, req, err, func() *topicv1.UnsubscribeResponse {
		return &topicv1.UnsubscribeResponse{Result: subscriptionResultToProto(r)}
	})
}

// topicClient implements ports.TopicService over postmill.topic.v1.TopicService.
type topicClient struct {
	conn topicv1connect.TopicServiceClient
}

func newTopicClient(conn topicv1connect.TopicServiceClient) ports.TopicService {
	return &topicClient{conn: conn}
}

type topicMessage interface{ GetTopic() *topicv1.Topic }

func getTopic[R topicMessage](r R) ports.Topic { return topicFromProto(r.GetTopic()) }

func (c *topicClient) CreateTopic(ctx context.Context, orgID string, in ports.TopicInput) (ports.Topic, error) {
	return call(ctx, topicv1connect.TopicServiceCreateTopicProcedure, c.conn.CreateTopic,
		&topicv1.CreateTopicRequest{OrganizationId: orgID, Input: topicInputToProto(in)}, getTopic[*topicv1.CreateTopicResponse])
}

func (c *topicClient) GetTopic(ctx context.Context, orgID, id string) (ports.Topic, error) {
	return call(ctx, topicv1connect.TopicServiceGetTopicProcedure, c.conn.GetTopic,
		&topicv1.GetTopicRequest{OrganizationId: orgID, Id: id}, getTopic[*topicv1.GetTopicResponse])
}

func (c *topicClient) ListTopics(ctx context.Context, orgID string, limit, offset int) ([]ports.Topic, error) {
	return call(ctx, topicv1connect.TopicServiceListTopicsProcedure, c.conn.ListTopics,
		&topicv1.ListTopicsRequest{OrganizationId: orgID, Limit: int64(limit), Offset: int64(offset)}, func(r *topicv1.ListTopicsResponse) []ports.Topic {
			out := make([]ports.Topic, 0, len(r.GetTopics()))
			for _, t := range r.GetTopics() {
				out = append(out, topicFromProto(t))
			}
			return out
		})
}

func (c *topicClient) UpdateTopic(ctx context.Context, orgID, id string, in ports.TopicInput) (ports.Topic, error) {
	return call(ctx, topicv1connect.TopicServiceUpdateTopicProcedure, c.conn.UpdateTopic,
		&topicv1.UpdateTopicRequest{OrganizationId: orgID, Id: id, Input: topicInputToProto(in)}, getTopic[*topicv1.UpdateTopicResponse])
}

func (c *topicClient) DeleteTopic(ctx context.Context, orgID, id string) error {
	return exec(ctx, topicv1connect.TopicServiceDeleteTopicProcedure, c.conn.DeleteTopic,
		&topicv1.DeleteTopicRequest{OrganizationId: orgID, Id: id})
}

func subscriptionRequestToProto(orgID, topicID string, r ports.SubscriptionRequest) *topicv1.SubscriptionChange {
	return &topicv1.SubscriptionChange{OrganizationId: orgID, TopicId: topicID, ContactId: r.ContactID, Email: r.Email,
		ConsentSource: r.ConsentSource, ConsentIp: r.ConsentIP}
}

func (c *topicClient) SubscribeTopic(ctx context.Context, orgID, topicID string, r ports.SubscriptionRequest) (ports.SubscriptionResult, error) {
	return call(ctx, topicv1connect.TopicServiceSubscribeProcedure, c.conn.Subscribe,
		&topicv1.SubscribeRequest{Change: subscriptionRequestToProto(orgID, topicID, r)},
		subscriptionResultFromProto[*topicv1.SubscribeResponse])
}

func (c *topicClient) UnsubscribeTopic(ctx context.Context, orgID, topicID string, r ports.SubscriptionRequest) (ports.SubscriptionResult, error) {
	return call(ctx, topicv1connect.TopicServiceUnsubscribeProcedure, c.conn.Unsubscribe,
		&topicv1.UnsubscribeRequest{Change: subscriptionRequestToProto(orgID, topicID, r)},
		subscriptionResultFromProto[*topicv1.UnsubscribeResponse])
}
