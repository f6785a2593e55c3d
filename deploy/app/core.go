package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/grafana/dskit/services"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/core/tracking"
	"github.com/postmill/postmill/ports"
)

// coreEnv is what the core's area builders share while the core starts: the infrastructure every area
// uses, the ports.Core they fill field by field, and the background loops they hand to the core service.
type coreEnv struct {
	ctx     context.Context
	store   *postgres.Store
	keyring *secret.Keyring
	clock   ports.Clock
	logger  *slog.Logger

	core  ports.Core
	loops []func(context.Context) error

	// tracker signs open-pixel and click links: the tracking area builds it and sending rewrites mail with
	// it. It is the one thing an area hands another that has no field in ports.Core.
	tracker *tracking.Tracker
	// changes carries news of paused organizations, new plans and suspended domains between the areas of
	// this process and from other processes (the store announces them); its listener is one of the loops.
	changes *postgres.ChangeFeed
}

// coreArea builds one area of the core into env. It reads the configuration and the process's shared
// adapters (queue, blob store, scanner, resolver) from the App.
type coreArea func(a *App, env *coreEnv) error

// coreAreas are the core's areas in build order: an area comes after those it uses (account and domain use
// the rate limiter; sending uses the tracker and the template renderer). Their loops run in the same order.
var coreAreas = []coreArea{
	(*App).coreRateLimit,
	(*App).coreAccount,
	(*App).coreDomain,
	(*App).coreTracking,
	(*App).coreTemplate,
	(*App).coreSending,
	(*App).coreWebhook,
	(*App).coreDeliverability,
	(*App).coreMarketing,
	(*App).coreInbound,
	(*App).coreBroadcast,
	(*App).coreBilling,
	(*App).coreReputation,
	(*App).coreDMARC,
	(*App).coreAnalytics,
}

// buildCore builds every area on st and returns the filled core with the loops its areas run.
func (a *App) buildCore(ctx context.Context, st *postgres.Store) (ports.Core, []func(context.Context) error, error) {
	env := &coreEnv{ctx: ctx, store: st, keyring: a.keyring, clock: ports.SystemClock{}, logger: a.logger}
	env.core.Health = st
	env.changes = postgres.NewChangeFeed(st.Pool(), a.logger)
	env.loops = append(env.loops, env.changes.Run)
	for _, build := range coreAreas {
		if err := build(a, env); err != nil {
			return ports.Core{}, nil, err
		}
	}
	return env.core, env.loops, nil
}

// initCore runs the core: its areas' background loops and the Connect listener other tiers reach it on.
func (a *App) initCore() (services.Service, error) {
	var (
		srv     *http.Server
		ln      net.Listener
		loops   []func(context.Context) error
		serveCh = make(chan error, 1)
	)
	starting := func(ctx context.Context) error {
		core, coreLoops, err := a.buildCore(ctx, a.Store())
		if err != nil {
			return err
		}
		loops = coreLoops
		a.mu.Lock()
		a.core = core
		a.mu.Unlock()

		srv, err = a.rpcServer(core)
		if err != nil {
			return err
		}
		ln, err = net.Listen("tcp", a.cfg.RPCAddr)
		if err != nil {
			return fmt.Errorf("core rpc listener: %w", err)
		}
		a.mu.Lock()
		a.rpcAddr = ln.Addr()
		a.rpcTLS = srv.TLSConfig != nil
		a.mu.Unlock()
		go func() {
			if srv.TLSConfig != nil {
				// Certificates come from srv.TLSConfig; a plaintext client gets a 400 from the TLS
				// server and never reaches a handler.
				serveCh <- srv.ServeTLS(ln, "", "")
				return
			}
			serveCh <- srv.Serve(ln)
		}()
		a.logRPCListener(ln.Addr(), srv.TLSConfig)
		return nil
	}
	running := func(ctx context.Context) error {
		errCh := make(chan error, len(loops))
		for _, loop := range loops {
			go func() { errCh <- loop(ctx) }()
		}
		select {
		case <-ctx.Done():
			for range loops {
				<-errCh // every loop flushes what it holds before returning
			}
			return nil
		case err := <-serveCh:
			return fmt.Errorf("core rpc server: %w", err)
		case err := <-errCh:
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			<-ctx.Done()
			return nil
		}
	}
	stopping := func(error) error {
		if srv == nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), a.grace())
		defer cancel()
		return srv.Shutdown(ctx)
	}
	return services.NewBasicService(starting, running, stopping).WithName(TargetCore), nil
}

// rpcServer is the core's Connect server for the other tiers: every tier's credentials admitted, each to
// its tier's procedures, and TLS (mutual TLS with POSTMILL_RPC_TLS_CA) when POSTMILL_RPC_TLS_CERT is set.
func (a *App) rpcServer(core ports.Core) (*http.Server, error) {
	cfg := rpc.ServerConfig{Credentials: a.serverCredentials(), Logger: a.logger}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           rpc.NewHandler(core, cfg),
		ReadHeaderTimeout: 10 * time.Second,
		// Refused handshakes (no client certificate, a plaintext client) land in the process's log.
		ErrorLog: slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn),
	}
	if a.cfg.RPCTLSCert != "" {
		tlsCfg, err := rpc.ServerTLS(a.cfg.rpcTLS())
		if err != nil {
			return nil, err
		}
		srv.TLSConfig = tlsCfg
	}
	return srv, nil
}

// logRPCListener announces the core's listener, warning when it carries credentials, passwords, DKIM
// keys and messages in the clear beyond this machine.
func (a *App) logRPCListener(addr net.Addr, tlsCfg *tls.Config) {
	mutual := tlsCfg != nil && tlsCfg.ClientAuth == tls.RequireAndVerifyClientCert
	a.logger.Info("listening", "service", "core-rpc", "addr", addr.String(), "tls", tlsCfg != nil, "client_certificates", mutual)
	if tcp, ok := addr.(*net.TCPAddr); ok && tlsCfg == nil && !tcp.IP.IsLoopback() {
		a.logger.Warn("the core's RPC listener is plaintext on a non-loopback address: set POSTMILL_RPC_TLS_CERT and POSTMILL_RPC_TLS_KEY (docs/operations.md, Threat model)",
			"addr", addr.String())
	}
}
