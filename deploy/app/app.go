// Package app is Postmill's composition root: the only place that knows every tier and adapter. It turns a
// Config and a list of targets into dskit modules (one per tier plus the store they share), starts them
// under one services manager, and stops them in reverse dependency order so that SIGTERM drains.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/grafana/dskit/modules"
	"github.com/grafana/dskit/services"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// Module names in the dskit graph. moduleStore is internal: every target that needs the database
// depends on it.
const (
	moduleStore = "store"
	moduleAll   = "all"
)

// App is one running Postmill process.
type App struct {
	cfg     Config
	targets Targets
	logger  *slog.Logger
	reg     *prometheus.Registry
	// keyring holds the master secrets and what they decrypt. Only a process running the core builds it;
	// the tiers of other processes hold just their credentials for the core.
	keyring *secret.Keyring
	// credentials and clientTLS are how the tiers of a process without the core reach one.
	credentials map[rpc.Tier]string
	clientTLS   *tls.Config

	manager *services.Manager
	shared  shared
	// inFlight counts the edge's requests being served; the MTA's signatures give way while it is above
	// the number of signing threads (mta.Config.Foreground, tier_mta.go).
	inFlight atomic.Int64

	mu       sync.Mutex
	store    *postgres.Store
	core     ports.Core
	remote   map[rpc.Tier]*rpc.Client // processes without the core reach it through these, one per tier
	httpAddr net.Addr
	rpcAddr  net.Addr
	rpcTLS   bool     // the core's RPC listener serves TLS
	smtpAddr net.Addr // submission listener
	mxAddr   net.Addr // inbound MX listener
	opsAddr  net.Addr // operations listener: /metrics, /healthz
	local    localMode
}

// New validates the configuration and builds the module graph for targets; nothing starts until Start.
func New(cfg Config, targets Targets, logger *slog.Logger) (*App, error) {
	if err := cfg.Validate(targets); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a := &App{cfg: cfg, targets: targets, logger: logger, reg: reg, remote: map[rpc.Tier]*rpc.Client{}}
	if targets.Has(TargetCore) {
		keyring, err := secret.NewKeyring(cfg.SecretKeys...)
		if err != nil {
			return nil, fmt.Errorf("secret key: %w", err)
		}
		a.keyring = keyring
	} else {
		creds, err := callerCredentials(cfg, targets)
		if err != nil {
			return nil, err
		}
		a.credentials = creds
		if !cfg.rpcTLS().Empty() {
			if a.clientTLS, err = rpc.ClientTLS(cfg.rpcTLS()); err != nil {
				return nil, err
			}
		}
		// Without the core nothing here decrypts or signs: the master secret, when it was given, has
		// served to derive the credentials and is not kept.
		a.cfg.SecretKeys = nil
	}

	mm := modules.NewManager(log.NewNopLogger())
	mm.RegisterModule(moduleStore, a.initStore, modules.UserInvisibleModule)
	mm.RegisterModule(moduleOps, a.initOps, modules.UserInvisibleModule)
	mm.RegisterModule(TargetCore, a.initCore)
	mm.RegisterModule(TargetEdge, a.initEdge)
	mm.RegisterModule(TargetMTA, a.initMTA)
	mm.RegisterModule(TargetInbound, a.initInbound)
	mm.RegisterModule(TargetAnalytics, a.initAnalytics)
	mm.RegisterModule(moduleAll, nil)
	deps := map[string][]string{
		TargetCore: {moduleStore},
		moduleAll:  tiers,
	}
	if targets.Has(TargetCore) {
		// In one process the tiers call the core in-process, so the core must be up first and down last.
		deps[TargetEdge] = []string{TargetCore}
		deps[TargetMTA] = []string{TargetCore}
		deps[TargetInbound] = []string{TargetCore}
	} else if cfg.Queue == "postgres" {
		// An MTA-only process still reads the PostgreSQL queue.
		deps[TargetMTA] = []string{moduleStore}
	}
	deps[TargetAnalytics] = []string{moduleStore} // the analytics tier reads the event outbox and writes the analytics tables
	a.registerLocal(mm, deps)
	for _, t := range tiers {
		deps[t] = append(deps[t], moduleOps) // every process serves its metrics, whichever tiers it runs
	}
	for name, d := range deps {
		if err := mm.AddDependency(name, d...); err != nil {
			return nil, err
		}
	}
	svcs, err := mm.InitModuleServices(targets...)
	if err != nil {
		return nil, err
	}
	list := make([]services.Service, 0, len(svcs))
	for _, s := range svcs {
		list = append(list, s)
	}
	a.manager, err = services.NewManager(list...)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Start starts every service and waits until all run (or one fails).
func (a *App) Start(ctx context.Context) error {
	if err := a.manager.StartAsync(context.Background()); err != nil {
		return err
	}
	if err := a.manager.AwaitHealthy(ctx); err != nil {
		for _, s := range a.manager.ServicesByState()[services.Failed] {
			if f := s.FailureCase(); f != nil {
				err = f
			}
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Stop(stopCtx)
		return err
	}
	return nil
}

// Stop drains and stops every service, dependants before their dependencies.
func (a *App) Stop(ctx context.Context) error {
	a.manager.StopAsync()
	err := a.manager.AwaitStopped(ctx)
	a.closeShared()
	return err
}

// Failed is closed with the failure when any service fails after Start, so the binary can exit non-zero.
func (a *App) Failed() <-chan error {
	ch := make(chan error, 1)
	a.manager.AddListener(services.NewManagerListener(nil, nil, func(s services.Service) {
		ch <- fmt.Errorf("service failed: %w", s.FailureCase())
	}))
	return ch
}

// HTTPURL is the edge's base URL (useful with a :0 listener).
func (a *App) HTTPURL() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.httpAddr == nil {
		return ""
	}
	return "http://" + a.httpAddr.String()
}

// RPCURL is the core's Connect base URL (useful with a :0 listener): https when it serves TLS.
func (a *App) RPCURL() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rpcAddr == nil {
		return ""
	}
	if a.rpcTLS {
		return "https://" + a.rpcAddr.String()
	}
	return "http://" + a.rpcAddr.String()
}

// SubmissionAddr is the SMTP submission listener's address (useful with a :0 listener).
func (a *App) SubmissionAddr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.smtpAddr == nil {
		return ""
	}
	return a.smtpAddr.String()
}

// InboundAddr is the inbound MX listener's address (useful with a :0 listener).
func (a *App) InboundAddr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mxAddr == nil {
		return ""
	}
	return a.mxAddr.String()
}

// Store is the PostgreSQL store of a process that runs the core (nil otherwise).
func (a *App) Store() *postgres.Store {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.store
}

// idleTier is a tier that has no work yet: it starts, reports running, and stops cleanly.
func (a *App) idleTier(name string) func() (services.Service, error) {
	return func() (services.Service, error) {
		return services.NewIdleService(func(context.Context) error {
			a.logger.Info("tier started", "tier", name)
			return nil
		}, func(error) error {
			a.logger.Info("tier stopped", "tier", name)
			return nil
		}).WithName(name), nil
	}
}

func (a *App) inProcessCore() ports.Core {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.core
}

// ready backs /readyz: every target running and the database answering (through the core, wherever it is).
func (a *App) ready(ctx context.Context) error {
	if !a.manager.IsHealthy() {
		return errors.New("not every target is running")
	}
	a.mu.Lock()
	var health ports.Pinger = a.core.Health
	if remote := a.remoteHealth(); remote != nil {
		health = remote
	}
	a.mu.Unlock()
	if health == nil {
		return errors.New("no core to ask")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return health.Ping(ctx)
}

func (a *App) grace() time.Duration {
	if a.cfg.ShutdownGraceSecs <= 0 {
		return 20 * time.Second
	}
	return time.Duration(a.cfg.ShutdownGraceSecs) * time.Second
}
