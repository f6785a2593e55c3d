package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	healthv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/health/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/health/v1/healthv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.Pinger { return &c.Health },
		healthv1connect.NewHealthServiceHandler, newHealthServer,
		healthv1connect.NewHealthServiceClient, newHealthClient).
		calledBy(healthv1connect.HealthServiceName, TierEdge, TierMTA, TierInbound))
}

// healthServer serves postmill.health.v1.HealthService from a ports.Pinger.
type healthServer struct {
	svc ports.Pinger
	log *slog.Logger
}

func newHealthServer(svc ports.Pinger, log *slog.Logger) healthv1connect.HealthServiceHandler {
	return &healthServer{svc: svc, log: log}
}

func (s *healthServer) Check(ctx context.Context, req *connect.Request[healthv1.CheckRequest]) (*connect.Response[healthv1.CheckResponse], error) {
	return respond(ctx, s.log, req, s.svc.Ping(ctx), empty[healthv1.CheckResponse])
}

// healthClient implements ports.Pinger over postmill.health.v1.HealthService: it succeeds when the core
// and its database answer.
type healthClient struct {
	conn healthv1connect.HealthServiceClient
}

func newHealthClient(conn healthv1connect.HealthServiceClient) ports.Pinger {
	return &healthClient{conn: conn}
}

func (c *healthClient) Ping(ctx context.Context) error {
	return exec(ctx, healthv1connect.HealthServiceCheckProcedure, c.conn.Check, &healthv1.CheckRequest{})
}
