package rpc

import (
	"context"
	"errors"
	"fmt"
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
	// Credentials are the tier credentials (Credential) a caller may present as
	// `Authorization: Bearer <credential>`. Each admits its caller to the procedures its tier may call
	// (each service's row in service.go's table says which) and to nothing else. A tier may have
	// several: during a rotation of POSTMILL_SECRET_KEY the core admits the credentials derived from
	// every listed key. The handler refuses every call while none is well formed, so a forgotten setting
	// fails closed.
	Credentials []string
	// Logger receives panics, errors that are not *ports.Error, which callers only see as
	// "internal error", and calls refused to a tier. Nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports a configuration that would refuse every call, or a credential that would admit
// nothing, so that a deployment fails at start rather than on its first request. It never repeats a
// credential.
func (c ServerConfig) Validate() error {
	if len(c.Credentials) == 0 {
		return errors.New("rpc: the server needs at least one tier credential")
	}
	for i, cred := range c.Credentials {
		if _, err := CredentialTier(cred); err != nil {
			return fmt.Errorf("rpc: server credential %d: %w", i+1, err)
		}
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
