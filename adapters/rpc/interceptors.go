package rpc

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
)

// Every interceptor of the hop is built here, so the order in which they run is visible in one place.

// errInvalidCredentials is the only answer a caller without the inter-tier token gets: it says nothing
// about what was wrong with what it sent.
var errInvalidCredentials = errors.New("rpc: invalid credentials")

// serverInterceptors wrap every handler, outermost first: tracing sees every call, refused ones
// included; recovery turns a panic anywhere below it into Internal; authentication runs before the
// implementation is reached.
func serverInterceptors(cfg ServerConfig, log *slog.Logger) []connect.Interceptor {
	// The tiers trust each other once the token matches, so the caller's span is the parent of ours and
	// the hop shows as one trace.
	return nonNil(
		newOtelInterceptor(log, otelconnect.WithTrustRemote()),
		&recoverInterceptor{log: log},
		newServerAuth(cfg.Token),
	)
}

// clientInterceptors wrap every call, outermost first: tracing starts the client span and injects its
// context into the headers; authentication adds the inter-tier token.
func clientInterceptors(token string) []connect.Interceptor {
	return nonNil(
		newOtelInterceptor(slog.Default()),
		&clientAuth{header: "Bearer " + token},
	)
}

func nonNil(in ...connect.Interceptor) []connect.Interceptor {
	out := in[:0]
	for _, i := range in {
		if i != nil {
			out = append(out, i)
		}
	}
	return out
}

// newOtelInterceptor traces and measures the hop with the global OpenTelemetry providers. Creating the
// metric instruments fails only with a broken meter provider; losing metrics must not take inter-tier
// calls down, so it then falls back to tracing alone.
func newOtelInterceptor(log *slog.Logger, opts ...otelconnect.Option) connect.Interceptor {
	i, err := otelconnect.NewInterceptor(opts...)
	if err == nil {
		return i
	}
	log.Warn("rpc: OpenTelemetry metrics unavailable, tracing only", "err", err)
	i, err = otelconnect.NewInterceptor(append(opts, otelconnect.WithoutMetrics())...)
	if err != nil {
		log.Warn("rpc: OpenTelemetry tracing unavailable", "err", err)
		return nil
	}
	return i
}

// serverAuth admits a call only when it presents `Authorization: Bearer <token>`. Digests of both sides
// are compared in constant time, so neither the token's bytes nor its length leak through timing. An
// empty configured token admits nothing: a server someone forgot to configure must not be open.
type serverAuth struct {
	want    [sha256.Size]byte
	enabled bool
}

func newServerAuth(token string) *serverAuth {
	return &serverAuth{want: sha256.Sum256([]byte(token)), enabled: token != ""}
}

func (a *serverAuth) check(h http.Header) error {
	scheme, credentials, ok := strings.Cut(h.Get("Authorization"), " ")
	// Evaluate everything before deciding, so that a missing header costs the same as a wrong one.
	got := sha256.Sum256([]byte(credentials))
	match := subtle.ConstantTimeCompare(got[:], a.want[:]) == 1
	if !a.enabled || !ok || !strings.EqualFold(scheme, "Bearer") || !match {
		return connect.NewError(connect.CodeUnauthenticated, errInvalidCredentials)
	}
	return nil
}

func (a *serverAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := a.check(req.Header()); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (a *serverAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a *serverAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := a.check(conn.RequestHeader()); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// clientAuth presents the inter-tier token on every call.
type clientAuth struct {
	header string
}

func (a *clientAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", a.header)
		return next(ctx, req)
	}
}

func (a *clientAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", a.header)
		return conn
	}
}

func (a *clientAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// recoverInterceptor keeps one bad request from killing a process that serves every tier's calls: a
// panic is logged with its stack and answered as Internal with no detail. http.ErrAbortHandler is
// re-raised because net/http uses it to abort a response on purpose.
type recoverInterceptor struct {
	log *slog.Logger
}

func (r *recoverInterceptor) recovered(ctx context.Context, procedure string, v any) error {
	if v == http.ErrAbortHandler {
		panic(v)
	}
	r.log.ErrorContext(ctx, "rpc: panic in handler",
		"procedure", procedure, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return connect.NewError(connect.CodeInternal, errors.New(internalMessage))
}

func (r *recoverInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (res connect.AnyResponse, err error) {
		defer func() {
			if v := recover(); v != nil {
				res, err = nil, r.recovered(ctx, req.Spec().Procedure, v)
			}
		}()
		return next(ctx, req)
	}
}

func (r *recoverInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (r *recoverInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = r.recovered(ctx, conn.Spec().Procedure, v)
			}
		}()
		return next(ctx, conn)
	}
}
