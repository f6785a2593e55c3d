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
	"unicode/utf8"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Every interceptor of the hop is built here, so the order in which they run is visible in one place.

// errInvalidCredentials is the only answer a caller without a tier credential gets: it says nothing
// about what was wrong with what it sent.
var errInvalidCredentials = errors.New("rpc: invalid credentials")

// serverInterceptors wrap every handler, outermost first: tracing sees every call, refused ones
// included; recovery turns a panic anywhere below it into Internal; authentication and the tier's
// allow-list run before the implementation is reached.
func serverInterceptors(cfg ServerConfig, log *slog.Logger) []connect.Interceptor {
	// The tiers trust each other once a credential matches, so the caller's span is the parent of ours
	// and the hop shows as one trace.
	return nonNil(
		newOtelInterceptor(log, otelconnect.WithTrustRemote()),
		&recoverInterceptor{log: log},
		newServerAuth(log, cfg.Credentials...),
	)
}

// clientInterceptors wrap every call, outermost first: tracing starts the client span and injects its
// context into the headers; authentication adds the tier's credential; the send guard refuses a request
// that could not be put on the wire before Connect tries.
func clientInterceptors(credential string) []connect.Interceptor {
	return nonNil(
		newOtelInterceptor(slog.Default()),
		&clientAuth{header: "Bearer " + credential},
		&sendGuard{maxBytes: MaxMessageBytes},
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

// serverAuth admits a call only when it presents `Authorization: Bearer <credential>` with one of the
// configured tier credentials, and then only to the procedures that credential's tier may call (mayCall).
// Digests of both sides are compared in constant time, each of them, so neither the credential's bytes,
// its length nor which one matched leak through timing. A configured credential that is not well formed
// (an empty one included) admits nothing: a server someone forgot to configure must not be open.
type serverAuth struct {
	admitted []admittedCredential
	log      *slog.Logger
}

// admittedCredential is one credential the server accepts and the tier it was made for.
type admittedCredential struct {
	digest [sha256.Size]byte
	tier   Tier
}

func newServerAuth(log *slog.Logger, credentials ...string) *serverAuth {
	a := &serverAuth{log: log}
	for _, c := range credentials {
		if tier, err := CredentialTier(c); err == nil {
			a.admitted = append(a.admitted, admittedCredential{digest: sha256.Sum256([]byte(c)), tier: tier})
		}
	}
	return a
}

func (a *serverAuth) check(ctx context.Context, h http.Header, procedure string) error {
	scheme, credentials, ok := strings.Cut(h.Get("Authorization"), " ")
	// Evaluate everything before deciding, so that a missing header costs the same as a wrong one.
	got := sha256.Sum256([]byte(credentials))
	match := -1
	for i, want := range a.admitted {
		match = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(got[:], want.digest[:]), i, match)
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || match < 0 {
		return connect.NewError(connect.CodeUnauthenticated, errInvalidCredentials)
	}
	tier := a.admitted[match].tier
	if !mayCall(tier, procedure) {
		// A genuine credential asking for what its tier never needs is a misconfiguration or a process
		// that was broken into: worth an operator's attention, and the credential itself stays out.
		a.log.WarnContext(ctx, "rpc: call refused to the tier", "tier", string(tier), "procedure", procedure)
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("rpc: the %s tier may not call %s", tier, procedure))
	}
	return nil
}

func (a *serverAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := a.check(ctx, req.Header(), req.Spec().Procedure); err != nil {
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
		if err := a.check(ctx, conn.RequestHeader(), conn.Spec().Procedure); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// clientAuth presents the tier's credential on every call.
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

// sendGuard refuses, before Connect sees it, a unary request that Connect would fail to send: one larger
// than maxBytes, or one with a string that is not valid UTF-8 (proto3 strings must be, and marshalling
// fails otherwise). Connect's unary client (v1.19.1) answers such a failure by still issuing the HTTP
// request, with an empty body, so the core would run the method on an empty message: a Send with no
// fields, a ReportDelivery for job "". Refusing here means the core never sees the call; the caller gets
// an internal error naming the cause, as for any failure of the hop.
type sendGuard struct {
	maxBytes int
}

func (g *sendGuard) check(msg any) error {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil
	}
	if size := proto.Size(m); size > g.maxBytes {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("rpc: message size %d exceeds %d bytes", size, g.maxBytes))
	}
	if err := checkUTF8(m.ProtoReflect()); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	return nil
}

func (g *sendGuard) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := g.check(req.Any()); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (g *sendGuard) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (g *sendGuard) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// checkUTF8 reports the first string field, list element, map key or map value of m (nested messages
// included) that is not valid UTF-8. It reads only the fields that are set, and never bytes fields, so
// it costs little next to marshalling.
func checkUTF8(m protoreflect.Message) error {
	var err error
	value := func(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.ValidString(v.String()) {
				return fmt.Errorf("rpc: field %s is not valid UTF-8", fd.FullName())
			}
		case protoreflect.MessageKind, protoreflect.GroupKind:
			return checkUTF8(v.Message())
		}
		return nil
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = value(fd, l.Get(i))
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if err = value(fd.MapKey(), k.Value()); err == nil {
					err = value(fd.MapValue(), mv)
				}
				return err == nil
			})
		default:
			err = value(fd, v)
		}
		return err == nil
	})
	return err
}
