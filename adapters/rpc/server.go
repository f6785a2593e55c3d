package rpc

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"
)

// MaxMessageBytes bounds every message either side of the hop reads or sends. A send carries up to
// 25 MiB of decoded attachments (SPEC §8) besides its bodies, so the bound sits well above that; it still
// keeps a single call from exhausting a process's memory.
const MaxMessageBytes = 64 << 20

// ServerConfig configures the core's side of the hop.
type ServerConfig struct {
	// Token is the shared secret every caller must present as `Authorization: Bearer <Token>`. The
	// handler refuses every call while it is empty, so a forgotten setting fails closed.
	Token string
	// OlderTokens are also admitted: the tokens derived from the older masters of POSTMILL_SECRET_KEY, so
	// that during a key rotation a caller whose primary is still the old master (or already the new one)
	// keeps reaching this server. Callers always present Token.
	OlderTokens []string
	// Logger receives panics and errors that are not *ports.Error, which callers only see as
	// "internal error". Nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports a configuration that would refuse every call, so that a deployment fails at start
// rather than on its first request.
func (c ServerConfig) Validate() error {
	if c.Token == "" {
		return errors.New("rpc: server token is required")
	}
	return nil
}

// NewHandler serves core's services on one mux, behind the interceptors of serverInterceptors. It mounts
// every service of the table in service.go; a nil field of core leaves its service unmounted, so a
// process serves only what it has, and calls to it fail as Unimplemented, which clients report as
// internal errors.
func NewHandler(core ports.Core, cfg ServerConfig) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	env := handlerEnv{
		log: log,
		opts: []connect.HandlerOption{
			connect.WithInterceptors(serverInterceptors(cfg, log)...),
			connect.WithReadMaxBytes(MaxMessageBytes),
			connect.WithSendMaxBytes(MaxMessageBytes),
		},
	}
	mux := http.NewServeMux()
	for _, s := range services {
		if path, h, ok := s.mount(core, env); ok {
			mux.Handle(path, h)
		}
	}
	return mux
}

// fail turns an implementation's error into its wire form, logging what the caller will not see.
func fail(ctx context.Context, log *slog.Logger, spec connect.Spec, err error) error {
	if ports.ErrorCode(err) == ports.CodeInternal {
		log.ErrorContext(ctx, "rpc: internal error", "procedure", spec.Procedure, "err", err)
	}
	return toConnectError(err)
}

// respond finishes a handler method: it answers with the wire form of err when the implementation
// failed, and otherwise with the message msg builds from the implementation's result.
func respond[Req, Res any](ctx context.Context, log *slog.Logger, req *connect.Request[Req], err error, msg func() *Res) (*connect.Response[Res], error) {
	if err != nil {
		return nil, fail(ctx, log, req.Spec(), err)
	}
	return connect.NewResponse(msg()), nil
}

// empty is respond's msg for a call whose answer carries nothing.
func empty[Res any]() *Res { return new(Res) }
