package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	webhookv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/webhook/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/webhook/v1/webhookv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.WebhookService { return &c.Webhooks },
		webhookv1connect.NewWebhookServiceHandler, newWebhookServer,
		webhookv1connect.NewWebhookServiceClient, newWebhookClient).
		calledBy(webhookv1connect.WebhookServiceName, TierEdge))
}

// webhookServer serves postmill.webhook.v1.WebhookService from a ports.WebhookService.
type webhookServer struct {
	svc ports.WebhookService
	log *slog.Logger
}

func newWebhookServer(svc ports.WebhookService, log *slog.Logger) webhookv1connect.WebhookServiceHandler {
	return &webhookServer{svc: svc, log: log}
}

func (s *webhookServer) CreateEndpoint(ctx context.Context, req *connect.Request[webhookv1.CreateEndpointRequest]) (*connect.Response[webhookv1.CreateEndpointResponse], error) {
	m := req.Msg
	e, err := s.svc.CreateEndpoint(ctx, m.GetOrganizationId(), m.GetUrl(), eventTypesFromProto(m.GetEventTypes()))
	return respond(ctx, s.log, req, err, func() *webhookv1.CreateEndpointResponse {
		return &webhookv1.CreateEndpointResponse{Endpoint: createdWebhookEndpointToProto(e)}
	})
}

func (s *webhookServer) ListEndpoints(ctx context.Context, req *connect.Request[webhookv1.ListEndpointsRequest]) (*connect.Response[webhookv1.ListEndpointsResponse], error) {
	endpoints, err := s.svc.ListEndpoints(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *webhookv1.ListEndpointsResponse {
		return &webhookv1.ListEndpointsResponse{Endpoints: webhookEndpointsToProto(endpoints)}
	})
}

func (s *webhookServer) ListEndpointsPage(ctx context.Context, req *connect.Request[webhookv1.ListEndpointsPageRequest]) (*connect.Response[webhookv1.ListEndpointsPageResponse], error) {
	m := req.Msg
	page, err := s.svc.ListEndpointsPage(ctx, m.GetOrganizationId(), ports.PageQuery{Limit: int(m.GetLimit()), Cursor: m.GetCursor()})
	return respond(ctx, s.log, req, err, func() *webhookv1.ListEndpointsPageResponse {
		return &webhookv1.ListEndpointsPageResponse{Endpoints: webhookEndpointsToProto(page.Data), NextCursor: page.NextCursor}
	})
}

func (s *webhookServer) DeleteEndpoint(ctx context.Context, req *connect.Request[webhookv1.DeleteEndpointRequest]) (*connect.Response[webhookv1.DeleteEndpointResponse], error) {
	err := s.svc.DeleteEndpoint(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, empty[webhookv1.DeleteEndpointResponse])
}

func (s *webhookServer) TestEndpoint(ctx context.Context, req *connect.Request[webhookv1.TestEndpointRequest]) (*connect.Response[webhookv1.TestEndpointResponse], error) {
	d, err := s.svc.TestEndpoint(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *webhookv1.TestEndpointResponse {
		return &webhookv1.TestEndpointResponse{Delivery: webhookDeliveryToProto(d)}
	})
}

func (s *webhookServer) RotateSecret(ctx context.Context, req *connect.Request[webhookv1.RotateSecretRequest]) (*connect.Response[webhookv1.RotateSecretResponse], error) {
	e, err := s.svc.RotateSecret(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *webhookv1.RotateSecretResponse {
		return &webhookv1.RotateSecretResponse{Endpoint: createdWebhookEndpointToProto(e)}
	})
}

func (s *webhookServer) Replay(ctx context.Context, req *connect.Request[webhookv1.ReplayRequest]) (*connect.Response[webhookv1.ReplayResponse], error) {
	m := req.Msg
	d, err := s.svc.Replay(ctx, m.GetOrganizationId(), m.GetEndpointId(), m.GetDeliveryId())
	return respond(ctx, s.log, req, err, func() *webhookv1.ReplayResponse {
		return &webhookv1.ReplayResponse{Delivery: webhookDeliveryToProto(d)}
	})
}

func (s *webhookServer) ListDeliveries(ctx context.Context, req *connect.Request[webhookv1.ListDeliveriesRequest]) (*connect.Response[webhookv1.ListDeliveriesResponse], error) {
	deliveries, err := s.svc.ListDeliveries(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *webhookv1.ListDeliveriesResponse {
		return &webhookv1.ListDeliveriesResponse{Deliveries: webhookDeliveriesToProto(deliveries)}
	})
}

// webhookClient implements ports.WebhookService over postmill.webhook.v1.WebhookService.
type webhookClient struct {
	conn webhookv1connect.WebhookServiceClient
}

func newWebhookClient(conn webhookv1connect.WebhookServiceClient) ports.WebhookService {
	return &webhookClient{conn: conn}
}

// CreateEndpoint answers with the plaintext secret; the sealed one stays in the core, so Secret is nil.
func (c *webhookClient) CreateEndpoint(ctx context.Context, orgID, url string, eventTypes []string) (ports.CreatedWebhookEndpoint, error) {
	return call(ctx, webhookv1connect.WebhookServiceCreateEndpointProcedure, c.conn.CreateEndpoint, &webhookv1.CreateEndpointRequest{
		OrganizationId: orgID,
		Url:            url,
		EventTypes:     eventTypesToProto(eventTypes),
	}, pick((*webhookv1.CreateEndpointResponse).GetEndpoint, createdWebhookEndpointFromProto))
}

func (c *webhookClient) ListEndpoints(ctx context.Context, orgID string) ([]ports.WebhookEndpoint, error) {
	return call(ctx, webhookv1connect.WebhookServiceListEndpointsProcedure, c.conn.ListEndpoints,
		&webhookv1.ListEndpointsRequest{OrganizationId: orgID},
		pick((*webhookv1.ListEndpointsResponse).GetEndpoints, webhookEndpointsFromProto))
}

func (c *webhookClient) ListEndpointsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.WebhookEndpoint], error) {
	return call(ctx, webhookv1connect.WebhookServiceListEndpointsPageProcedure, c.conn.ListEndpointsPage,
		&webhookv1.ListEndpointsPageRequest{OrganizationId: orgID, Limit: int64(q.Limit), Cursor: q.Cursor},
		func(m *webhookv1.ListEndpointsPageResponse) ports.Page[ports.WebhookEndpoint] {
			return ports.Page[ports.WebhookEndpoint]{Data: webhookEndpointsFromProto(m.GetEndpoints()), NextCursor: m.GetNextCursor()}
		})
}

func (c *webhookClient) DeleteEndpoint(ctx context.Context, orgID, id string) error {
	return exec(ctx, webhookv1connect.WebhookServiceDeleteEndpointProcedure, c.conn.DeleteEndpoint,
		&webhookv1.DeleteEndpointRequest{OrganizationId: orgID, Id: id})
}

func (c *webhookClient) TestEndpoint(ctx context.Context, orgID, id string) (ports.WebhookDelivery, error) {
	return call(ctx, webhookv1connect.WebhookServiceTestEndpointProcedure, c.conn.TestEndpoint,
		&webhookv1.TestEndpointRequest{OrganizationId: orgID, Id: id},
		pick((*webhookv1.TestEndpointResponse).GetDelivery, webhookDeliveryFromProto))
}

func (c *webhookClient) RotateSecret(ctx context.Context, orgID, id string) (ports.CreatedWebhookEndpoint, error) {
	return call(ctx, webhookv1connect.WebhookServiceRotateSecretProcedure, c.conn.RotateSecret,
		&webhookv1.RotateSecretRequest{OrganizationId: orgID, Id: id},
		pick((*webhookv1.RotateSecretResponse).GetEndpoint, createdWebhookEndpointFromProto))
}

func (c *webhookClient) Replay(ctx context.Context, orgID, endpointID, deliveryID string) (ports.WebhookDelivery, error) {
	return call(ctx, webhookv1connect.WebhookServiceReplayProcedure, c.conn.Replay, &webhookv1.ReplayRequest{
		OrganizationId: orgID,
		EndpointId:     endpointID,
		DeliveryId:     deliveryID,
	}, pick((*webhookv1.ReplayResponse).GetDelivery, webhookDeliveryFromProto))
}

func (c *webhookClient) ListDeliveries(ctx context.Context, orgID string) ([]ports.WebhookDelivery, error) {
	return call(ctx, webhookv1connect.WebhookServiceListDeliveriesProcedure, c.conn.ListDeliveries,
		&webhookv1.ListDeliveriesRequest{OrganizationId: orgID},
		pick((*webhookv1.ListDeliveriesResponse).GetDeliveries, webhookDeliveriesFromProto))
}

// WebhookEndpoint.Secret, the sealed secret, has no wire field and is dropped on the way out; the plaintext
// travels only as CreatedWebhookEndpoint.PlainSecret. Payload keeps nil and empty apart through its
// optional field.

func eventTypesToProto(types []string) *webhookv1.EventTypeList {
	if types == nil {
		return nil
	}
	return &webhookv1.EventTypeList{Values: types}
}

func eventTypesFromProto(l *webhookv1.EventTypeList) []string {
	if l == nil {
		return nil
	}
	return cloneStrings(l.GetValues())
}

func webhookEndpointToProto(e ports.WebhookEndpoint) *webhookv1.WebhookEndpoint {
	return &webhookv1.WebhookEndpoint{
		Id:             e.ID,
		OrganizationId: e.OrganizationID,
		Url:            e.URL,
		Enabled:        e.Enabled,
		EventTypes:     eventTypesToProto(e.EventTypes),
		CreatedAt:      timeToProto(e.CreatedAt),
	}
}

func webhookEndpointFromProto(e *webhookv1.WebhookEndpoint) ports.WebhookEndpoint {
	return ports.WebhookEndpoint{
		ID:             e.GetId(),
		OrganizationID: e.GetOrganizationId(),
		URL:            e.GetUrl(),
		Enabled:        e.GetEnabled(),
		EventTypes:     eventTypesFromProto(e.GetEventTypes()),
		CreatedAt:      timeFromProto(e.GetCreatedAt()),
	}
}

func webhookEndpointsToProto(endpoints []ports.WebhookEndpoint) *webhookv1.WebhookEndpointList {
	if endpoints == nil {
		return nil
	}
	return &webhookv1.WebhookEndpointList{Items: mapItems(endpoints, webhookEndpointToProto)}
}

func webhookEndpointsFromProto(l *webhookv1.WebhookEndpointList) []ports.WebhookEndpoint {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), webhookEndpointFromProto)
}

func createdWebhookEndpointToProto(e ports.CreatedWebhookEndpoint) *webhookv1.CreatedWebhookEndpoint {
	return &webhookv1.CreatedWebhookEndpoint{
		Endpoint:    webhookEndpointToProto(e.WebhookEndpoint),
		PlainSecret: e.PlainSecret,
	}
}

func createdWebhookEndpointFromProto(e *webhookv1.CreatedWebhookEndpoint) ports.CreatedWebhookEndpoint {
	return ports.CreatedWebhookEndpoint{
		WebhookEndpoint: webhookEndpointFromProto(e.GetEndpoint()),
		PlainSecret:     e.GetPlainSecret(),
	}
}

func webhookDeliveryToProto(d ports.WebhookDelivery) *webhookv1.WebhookDelivery {
	return &webhookv1.WebhookDelivery{
		Id:              d.ID,
		OrganizationId:  d.OrganizationID,
		EndpointId:      d.EndpointID,
		EventId:         d.EventID,
		EventType:       d.EventType,
		Status:          d.Status,
		Attempts:        int64(d.Attempts),
		ResponseCode:    int64(d.ResponseCode),
		NextRetryAt:     timePtrToProto(d.NextRetryAt),
		DeliveredAt:     timePtrToProto(d.DeliveredAt),
		CreatedAt:       timeToProto(d.CreatedAt),
		Payload:         d.Payload,
		OriginalEventId: d.OriginalEventID,
		BlockedReason:   d.BlockedReason,
	}
}

func webhookDeliveryFromProto(d *webhookv1.WebhookDelivery) ports.WebhookDelivery {
	return ports.WebhookDelivery{
		ID:              d.GetId(),
		OrganizationID:  d.GetOrganizationId(),
		EndpointID:      d.GetEndpointId(),
		EventID:         d.GetEventId(),
		EventType:       d.GetEventType(),
		Status:          d.GetStatus(),
		Attempts:        int(d.GetAttempts()),
		ResponseCode:    int(d.GetResponseCode()),
		NextRetryAt:     timePtrFromProto(d.GetNextRetryAt()),
		DeliveredAt:     timePtrFromProto(d.GetDeliveredAt()),
		CreatedAt:       timeFromProto(d.GetCreatedAt()),
		Payload:         d.GetPayload(),
		OriginalEventID: d.GetOriginalEventId(),
		BlockedReason:   d.GetBlockedReason(),
	}
}

func webhookDeliveriesToProto(deliveries []ports.WebhookDelivery) *webhookv1.WebhookDeliveryList {
	if deliveries == nil {
		return nil
	}
	return &webhookv1.WebhookDeliveryList{Items: mapItems(deliveries, webhookDeliveryToProto)}
}

func webhookDeliveriesFromProto(l *webhookv1.WebhookDeliveryList) []ports.WebhookDelivery {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), webhookDeliveryFromProto)
}
