// Package app is Postmill's composition root: the only place that knows every tier and adapter. It turns a
// Config and a list of targets into dskit modules (one per tier plus the store they share), starts them
// under one services manager, and stops them in reverse dependency order so that SIGTERM drains.
package app

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/grafana/dskit/modules"
	"github.com/grafana/dskit/services"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/core/account"
	"github.com/postmill/postmill/core/deliverability"
	"github.com/postmill/postmill/core/domain"
	"github.com/postmill/postmill/core/ratelimit"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/core/sending"
	"github.com/postmill/postmill/core/template"
	"github.com/postmill/postmill/core/tracking"
	"github.com/postmill/postmill/core/webhook"
	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/edge/submission"
	"github.com/postmill/postmill/inbound"
	"github.com/postmill/postmill/mta"
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
	keyring *secret.Keyring

	manager *services.Manager
	shared  shared

	mu       sync.Mutex
	store    *postgres.Store
	core     ports.Core
	remote   *rpc.Client // edge-only processes reach the core through it
	httpAddr net.Addr
	rpcAddr  net.Addr
	smtpAddr net.Addr // submission listener
	mxAddr   net.Addr // inbound MX listener
}

// New validates the configuration and builds the module graph for targets; nothing starts until Start.
func New(cfg Config, targets Targets, logger *slog.Logger) (*App, error) {
	if err := cfg.Validate(targets); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	keyring, err := secret.NewKeyring(cfg.SecretKeys...)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a := &App{cfg: cfg, targets: targets, logger: logger, reg: reg, keyring: keyring}

	mm := modules.NewManager(log.NewNopLogger())
	mm.RegisterModule(moduleStore, a.initStore, modules.UserInvisibleModule)
	mm.RegisterModule(TargetCore, a.initCore)
	mm.RegisterModule(TargetEdge, a.initEdge)
	mm.RegisterModule(TargetMTA, a.initMTA)
	mm.RegisterModule(TargetInbound, a.initInbound)
	mm.RegisterModule(TargetAnalytics, a.idleTier(TargetAnalytics))
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

// RPCURL is the core's Connect base URL (useful with a :0 listener).
func (a *App) RPCURL() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rpcAddr == nil {
		return ""
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

// rpcToken is the bearer token between tiers: derived from the master secret, so every process configured
// with the same POSTMILL_SECRET_KEY (or data directory) agrees on it and nothing else knows it.
func (a *App) rpcToken() string { return hex.EncodeToString(a.keyring.Derive("rpc-token")) }

func (a *App) initStore() (services.Service, error) {
	return services.NewIdleService(func(ctx context.Context) error {
		st, err := postgres.Open(ctx, a.cfg.DatabaseURL)
		if err != nil {
			return fmt.Errorf("opening the database: %w", err)
		}
		if err := st.Ping(ctx); err != nil {
			st.Close()
			return fmt.Errorf("database does not answer: %w", err)
		}
		if a.cfg.Migrate {
			if err := postgres.Migrate(ctx, st.Pool()); err != nil {
				st.Close()
				return fmt.Errorf("migrating: %w", err)
			}
		}
		a.mu.Lock()
		a.store = st
		a.mu.Unlock()
		a.logger.Info("store ready", "migrated", a.cfg.Migrate)
		return nil
	}, func(error) error {
		if st := a.Store(); st != nil {
			st.Close()
		}
		return nil
	}).WithName(moduleStore), nil
}

func (a *App) initCore() (services.Service, error) {
	var (
		srv     *http.Server
		ln      net.Listener
		loops   []func(context.Context) error
		serveCh = make(chan error, 1)
	)
	starting := func(ctx context.Context) error {
		st := a.Store()
		host, port := a.cfg.submission()
		// The limiter comes first: the account area's per-account login throttle counts in it.
		limiter := ratelimit.New(st, ports.SystemClock{})
		acc, err := account.New(account.Config{
			AdminEmails:    a.cfg.AdminEmails,
			DefaultPlan:    ports.Plan{MonthlyLimit: a.cfg.DefaultMonthly, WarmupCap: a.cfg.DefaultWarmupCap},
			SubmissionHost: host,
			SubmissionPort: port,
		}, account.Deps{
			Accounts: st, Organizations: st, APIKeys: st, SMTPCredentials: st,
			RateLimiter: limiter, Clock: ports.SystemClock{}, Keyring: a.keyring, Logger: a.logger,
		})
		if err != nil {
			return err
		}
		domains, err := domain.New(domain.Config{
			SPFInclude: a.cfg.SpfInclude, ReturnPathHost: a.cfg.ReturnPathHost,
			TrackingHost: a.cfg.TrackingHost, DMARCRua: a.cfg.DMARCRua,
		}, domain.Deps{Domains: st, Resolver: a.dnsResolver(), RateLimiter: limiter, Keyring: a.keyring,
			Clock: ports.SystemClock{}, Logger: a.logger})
		if err != nil {
			return err
		}
		queue, err := a.queue(ctx)
		if err != nil {
			return err
		}
		blobs, err := a.blobStore(ctx)
		if err != nil {
			return err
		}
		scanner, err := a.malwareScanner()
		if err != nil {
			return err
		}
		tracker, err := tracking.NewTracker(a.keyring, a.cfg.TrackingScheme)
		if err != nil {
			return err
		}
		tracker.PublicBaseURL = a.cfg.BaseURL
		track, err := tracking.NewService(tracker, st, ports.SystemClock{}, a.logger)
		if err != nil {
			return err
		}
		reactRenderer, err := a.reactRenderer()
		if err != nil {
			return err
		}
		templates, err := template.New(template.Deps{Store: st, React: reactRenderer, Clock: ports.SystemClock{}})
		if err != nil {
			return err
		}
		send, err := sending.New(sending.Config{RetryBase: a.cfg.MTARetryBase, MaxAge: a.cfg.MTAMaxAge}, sending.Deps{
			Messages: st, Domains: st, Organizations: st, Outbox: st, Delivery: st, Queue: queue,
			Blobs: blobs, Scanner: scanner, Templates: templates, Tracker: tracker, Keyring: a.keyring, Clock: ports.SystemClock{}, Logger: a.logger,
		})
		if err != nil {
			return err
		}
		sender, err := a.webhookSender()
		if err != nil {
			return err
		}
		stream, err := a.eventStream(ctx)
		if err != nil {
			return err
		}
		hooks, err := webhook.New(webhook.Config{Schedule: a.cfg.WebhookSchedule}, webhook.Deps{
			Store: st, Sender: sender, Stream: stream, Keyring: a.keyring, Clock: ports.SystemClock{}, Logger: a.logger,
		})
		if err != nil {
			return err
		}
		deliver, err := deliverability.New(deliverability.Config{FeedbackAddress: a.cfg.FeedbackAddress}, deliverability.Deps{
			Store: st, Keyring: a.keyring, Clock: ports.SystemClock{}, Logger: a.logger,
		})
		if err != nil {
			return err
		}
		core := ports.Core{
			Accounts: acc, Auth: acc, APIKeys: acc, SMTPCredentials: acc, Organizations: acc,
			RateLimiter: limiter, Domains: domains, Emails: send, Delivery: send, Webhooks: hooks, Health: st,
			Deliverability: deliver, Feedback: deliver, Tracking: track, Templates: templates, Renderer: templates,
		}
		loops = []func(context.Context) error{acc.Run, limiter.Run, send.RunRelay, send.RunScheduler, send.RunPruner, hooks.RunFanOut, hooks.RunDispatcher}
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

func (a *App) initEdge() (services.Service, error) {
	var (
		srv     *http.Server
		sub     *submission.Server
		serveCh = make(chan error, 2)
	)
	starting := func(ctx context.Context) error {
		core := a.inProcessCore()
		if !a.targets.Has(TargetCore) {
			core = a.remoteCore().Core()
		}
		e, err := edge.New(edge.Config{
			TrustedProxies: a.cfg.TrustedProxies,
			Ready:          a.ready,
			Logger:         a.logger,
			Registerer:     a.reg,
			Gatherer:       a.reg,
			// POSTMILL_ADMIN_REQUIRE_2FA=false lets admins without 2FA use the admin routes.
			AdminWithout2FA: !a.cfg.AdminRequire2FA,
		}, core)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", a.cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("edge listener: %w", err)
		}
		a.mu.Lock()
		a.httpAddr = ln.Addr()
		a.mu.Unlock()
		srv = &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		go func() { serveCh <- srv.Serve(ln) }()
		a.logger.Info("listening", "service", "edge-http", "addr", ln.Addr().String(), "base_url", a.cfg.BaseURL)

		tlsCfg, err := a.submissionTLS()
		if err != nil {
			return err
		}
		sub, err = submission.New(submission.Config{Config: smtpd.Config{
			Addr: a.cfg.SubmissionAddr, TLSConfig: tlsCfg,
			MaxConnections: a.cfg.SubmissionMaxConnections, MaxConnectionsPerIP: a.cfg.SubmissionMaxConnectionsPerIP,
		}}, core, a.logger)
		if err != nil {
			return err
		}
		subAddr, err := sub.Listen()
		if err != nil {
			return fmt.Errorf("submission listener: %w", err)
		}
		a.mu.Lock()
		a.smtpAddr = subAddr
		a.mu.Unlock()
		go func() { serveCh <- sub.Serve() }()
		a.logger.Info("listening", "service", "smtp-submission", "addr", subAddr.String(), "starttls", tlsCfg != nil)
		return nil
	}
	running := func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return nil
		case err := <-serveCh:
			return fmt.Errorf("edge server: %w", err)
		}
	}
	stopping := func(error) error {
		ctx, cancel := context.WithTimeout(context.Background(), a.grace())
		defer cancel()
		var errs []error
		if sub != nil {
			errs = append(errs, sub.Shutdown(ctx))
		}
		if srv != nil {
			errs = append(errs, srv.Shutdown(ctx)) // stops accepting, lets in-flight requests finish
		}
		return errors.Join(errs...)
	}
	return services.NewBasicService(starting, running, stopping).WithName(TargetEdge), nil
}

// initMTA runs the delivery tier: it reads the queue and reaches the core in-process or over Connect.
func (a *App) initMTA() (services.Service, error) {
	var m *mta.MTA
	starting := func(ctx context.Context) error {
		delivery := a.inProcessCore().Delivery
		if !a.targets.Has(TargetCore) {
			delivery = a.remoteCore().Core().Delivery
		}
		queue, err := a.queue(ctx)
		if err != nil {
			return err
		}
		blobs, err := a.blobStore(ctx)
		if err != nil {
			return err
		}
		m, err = mta.New(mta.Config{
			Port: a.cfg.MTAPort, Relay: a.cfg.MTARelay, RelayUsername: a.cfg.MTARelayUsername,
			RelayPassword: a.cfg.MTARelayPassword, HELO: a.cfg.MTAHelo, Concurrency: a.cfg.MTAConcurrency,
		}, mta.Deps{Queue: queue, Delivery: delivery, Resolver: a.dnsResolver(), Blobs: blobs, Logger: a.logger, Registerer: a.reg})
		if err != nil {
			return err
		}
		a.logger.Info("tier started", "tier", TargetMTA, "queue", a.cfg.Queue, "relay", a.cfg.MTARelay != "")
		return nil
	}
	running := func(ctx context.Context) error {
		err := m.Run(ctx) // returns after draining in-flight jobs once ctx ends
		a.logger.Info("tier stopped", "tier", TargetMTA)
		return err
	}
	return services.NewBasicService(starting, running, nil).WithName(TargetMTA), nil
}

// initInbound runs the MX listener (POSTMILL_SMTP_ADDR) for bounces and feedback reports, reaching the core
// in-process or over Connect.
func (a *App) initInbound() (services.Service, error) {
	var (
		srv     *inbound.Server
		serveCh = make(chan error, 1)
	)
	starting := func(ctx context.Context) error {
		feedback := a.inProcessCore().Feedback
		if !a.targets.Has(TargetCore) {
			feedback = a.remoteCore().Core().Feedback
		}
		var err error
		srv, err = inbound.New(inbound.Config{Config: smtpd.Config{
			Addr: a.cfg.SMTPAddr, Domain: a.cfg.InboundMXHost,
			MaxConnections: a.cfg.SMTPMaxConnections, MaxConnectionsPerIP: a.cfg.SMTPMaxConnectionsPerIP,
		}}, feedback, a.logger)
		if err != nil {
			return err
		}
		addr, err := srv.Listen()
		if err != nil {
			return fmt.Errorf("inbound listener: %w", err)
		}
		a.mu.Lock()
		a.mxAddr = addr
		a.mu.Unlock()
		go func() { serveCh <- srv.Serve() }()
		a.logger.Info("listening", "service", "smtp-inbound", "addr", addr.String())
		return nil
	}
	running := func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return nil
		case err := <-serveCh:
			return fmt.Errorf("inbound server: %w", err)
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
	return services.NewBasicService(starting, running, stopping).WithName(TargetInbound), nil
}

// remoteCore is the Connect client to the core for processes that do not run it.
func (a *App) remoteCore() *rpc.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.remote == nil {
		a.remote = rpc.NewClient(a.cfg.CoreURL, a.rpcToken(), nil)
	}
	return a.remote
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
	if a.remote != nil {
		health = a.remote
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
