package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	trackingv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1/trackingv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.TrackingService { return &c.Tracking },
		trackingv1connect.NewTrackingServiceHandler, newTrackingServer,
		trackingv1connect.NewTrackingServiceClient, newTrackingClient).
		calledBy(trackingv1connect.TrackingServiceName, TierEdge))
}

// trackingServer serves postmill.tracking.v1.TrackingService from a ports.TrackingService.
type trackingServer struct {
	svc ports.TrackingService
	log *slog.Logger
}

func newTrackingServer(svc ports.TrackingService, log *slog.Logger) trackingv1connect.TrackingServiceHandler {
	return &trackingServer{svc: svc, log: log}
}

func (s *trackingServer) Open(ctx context.Context, req *connect.Request[trackingv1.OpenRequest]) (*connect.Response[trackingv1.OpenResponse], error) {
	err := s.svc.Open(ctx, string(req.Msg.GetToken()))
	return respond(ctx, s.log, req, err, empty[trackingv1.OpenResponse])
}

func (s *trackingServer) Click(ctx context.Context, req *connect.Request[trackingv1.ClickRequest]) (*connect.Response[trackingv1.ClickResponse], error) {
	url, err := s.svc.Click(ctx, string(req.Msg.GetToken()))
	return respond(ctx, s.log, req, err, func() *trackingv1.ClickResponse {
		return &trackingv1.ClickResponse{Url: url}
	})
}

// trackingClient implements ports.TrackingService over postmill.tracking.v1.TrackingService. Tokens travel
// byte for byte, so a mangled one gets the core's answer (invalid_argument), as in process.
type trackingClient struct {
	conn trackingv1connect.TrackingServiceClient
}

func newTrackingClient(conn trackingv1connect.TrackingServiceClient) ports.TrackingService {
	return &trackingClient{conn: conn}
}

func (c *trackingClient) Open(ctx context.Context, token string) error {
	return exec(ctx, trackingv1connect.TrackingServiceOpenProcedure, c.conn.Open,
		&trackingv1.OpenRequest{Token: []byte(token)})
}

func (c *trackingClient) Click(ctx context.Context, token string) (string, error) {
	return call(ctx, trackingv1connect.TrackingServiceClickProcedure, c.conn.Click,
		&trackingv1.ClickRequest{Token: []byte(token)},
		(*trackingv1.ClickResponse).GetUrl)
}
