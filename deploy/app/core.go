package app

import (
	"context"
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
}

// buildCore builds every area on st and returns the filled core with the loops its areas run.
func (a *App) buildCore(ctx context.Context, st *postgres.Store) (ports.Core, []func(context.Context) error, error) {
	env := &coreEnv{ctx: ctx, store: st, keyring: a.keyring, clock: ports.SystemClock{}, logger: a.logger}
	env.core.Health = st
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

		ln, err = net.Listen("tcp", a.cfg.RPCAddr)
		if err != nil {
			return fmt.Errorf("core rpc listener: %w", err)
		}
		a.mu.Lock()
		a.rpcAddr = ln.Addr()
		a.mu.Unlock()
		srv = &http.Server{Handler: rpc.NewHandler(core, rpc.ServerConfig{Token: a.rpcToken(), OlderTokens: a.olderRPCTokens()}), ReadHeaderTimeout: 10 * time.Second}
		go func() { serveCh <- srv.Serve(ln) }()
		a.logger.Info("listening", "service", "core-rpc", "addr", ln.Addr().String())
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
