package rpc

import (
	"context"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	ratelimitv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/ratelimit/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/ratelimit/v1/ratelimitv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.RateLimiter { return &c.RateLimiter },
		ratelimitv1connect.NewRateLimitServiceHandler, newRateLimitServer,
		ratelimitv1connect.NewRateLimitServiceClient, newRateLimitClient).
		calledBy(ratelimitv1connect.RateLimitServiceName, TierEdge))
}

// rateLimitServer serves postmill.ratelimit.v1.RateLimitService from a ports.RateLimiter.
type rateLimitServer struct {
	svc ports.RateLimiter
	log *slog.Logger
}

func newRateLimitServer(svc ports.RateLimiter, log *slog.Logger) ratelimitv1connect.RateLimitServiceHandler {
	return &rateLimitServer{svc: svc, log: log}
}

func (s *rateLimitServer) Allow(ctx context.Context, req *connect.Request[ratelimitv1.AllowRequest]) (*connect.Response[ratelimitv1.AllowResponse], error) {
	m := req.Msg
	d, err := s.svc.Allow(ctx, m.GetKey(), int(m.GetLimit()), durationFromProto(m.GetWindow()))
	return respond(ctx, s.log, req, err, func() *ratelimitv1.AllowResponse {
		return &ratelimitv1.AllowResponse{Decision: rateDecisionToProto(d)}
	})
}

// rateLimitClient implements ports.RateLimiter over postmill.ratelimit.v1.RateLimitService.
type rateLimitClient struct {
	conn ratelimitv1connect.RateLimitServiceClient
}

func newRateLimitClient(conn ratelimitv1connect.RateLimitServiceClient) ports.RateLimiter {
	return &rateLimitClient{conn: conn}
}

func (c *rateLimitClient) Allow(ctx context.Context, key string, limit int, window time.Duration) (ports.RateDecision, error) {
	return call(ctx, ratelimitv1connect.RateLimitServiceAllowProcedure, c.conn.Allow, &ratelimitv1.AllowRequest{
		Key:    key,
		Limit:  int64(limit),
		Window: durationToProto(window),
	}, pick((*ratelimitv1.AllowResponse).GetDecision, rateDecisionFromProto))
}

func rateDecisionToProto(d ports.RateDecision) *ratelimitv1.RateDecision {
	return &ratelimitv1.RateDecision{
		Allowed:    d.Allowed,
		Count:      int64(d.Count),
		Limit:      int64(d.Limit),
		RetryAfter: durationToProto(d.RetryAfter),
	}
}

func rateDecisionFromProto(d *ratelimitv1.RateDecision) ports.RateDecision {
	return ports.RateDecision{
		Allowed:    d.GetAllowed(),
		Count:      int(d.GetCount()),
		Limit:      int(d.GetLimit()),
		RetryAfter: durationFromProto(d.GetRetryAfter()),
	}
}
