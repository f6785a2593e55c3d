package app

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/grafana/dskit/services"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/mta/simulator"
	"github.com/postmill/postmill/mta/tlspolicy"
)

// initMTA runs the delivery tier: it reads the queue and reaches the core in-process or over Connect.
func (a *App) initMTA() (services.Service, error) {
	var (
		m         *mta.MTA
		sim       *simulator.Server
		transport *tlspolicy.Engine // MTA-STS, DANE and TLS-RPT (tier_mta_tls.go); nil when turned off
		signal    txListener        // the PostgreSQL queue: transactional jobs queued by other processes
	)
	starting := func(ctx context.Context) error {
		core := a.inProcessCore()
		if !a.targets.Has(TargetCore) {
			core = a.remoteCore(rpc.TierMTA).Core()
		}
		delivery, batch := core.Delivery, core.DeliveryBatch
		queue, err := a.queue(ctx)
		if err != nil {
			return err
		}
		signal, _ = queue.(txListener)
		blobs, err := a.blobStore(ctx)
		if err != nil {
			return err
		}
		port, relay, allow := a.mtaRoute() // local mode points these at the catcher
		cfg := mta.Config{
			Port: port, Relay: relay, RelayUsername: a.cfg.MTARelayUsername,
			RelayPassword: a.cfg.MTARelayPassword, HELO: a.cfg.MTAHelo, Concurrency: a.cfg.MTAConcurrency,
			AllowNets: allow, JournalDir: filepath.Join(a.cfg.DataDir, "mta"),
		}
		cfg.Signers, cfg.SigningNice = signingThreads(), a.cfg.MTASigningNice
		cfg.NoChunking = !a.cfg.MTAChunking
		if a.targets.Has(TargetEdge) {
			// Signing gives way while the edge in this process has more requests in flight than there are
			// signing threads (the cores, unless GOMAXPROCS is set): while its answers queue for the CPU,
			// not for each request.
			busy := int64(cfg.Signers)
			cfg.Foreground = func() bool { return a.inFlight.Load() > busy }
		}
		if cfg.SigningNice == 0 {
			cfg.SigningNice = -1 // POSTMILL_MTA_SIGNING_NICE=0: the process's own priority
		}
		if a.cfg.MTAShapingFile != "" {
			if cfg.Shaping, err = mta.LoadShaping(a.cfg.MTAShapingFile); err != nil {
				return err
			}
		}
		if a.cfg.Simulator {
			if sim, err = a.startSimulator(); err != nil {
				return err
			}
			cfg.SimulatorDomain, cfg.SimulatorAddr = simulator.Domain, sim.Addr()
			delivery, batch = sim.Delivery(delivery, batch)
		}
		if transport, err = a.mtaTransport(&cfg); err != nil {
			return errors.Join(err, a.stopSimulator(sim))
		}
		deps := mta.Deps{Queue: queue, Delivery: delivery, DeliveryBatch: batch, Resolver: a.dnsResolver(), Blobs: blobs, Logger: a.logger, Registerer: a.reg}
		if transport != nil {
			deps.Transport = transport
		}
		m, err = mta.New(cfg, deps)
		if err != nil {
			return errors.Join(err, a.stopSimulator(sim))
		}
		a.logger.Info("tier started", "tier", TargetMTA, "queue", a.cfg.Queue, "relay", a.cfg.MTARelay != "")
		return nil
	}
	running := func(ctx context.Context) error {
		var reports sync.WaitGroup
		if transport != nil {
			reports.Go(func() { _ = transport.Run(ctx, time.Minute) }) // TLS-RPT files, every minute
		}
		listening, stopListening := context.WithCancel(ctx)
		if signal != nil {
			reports.Go(func() { _ = signal.ListenTransactional(listening, a.logger) })
		}
		err := m.Run(ctx) // returns after draining in-flight jobs once ctx ends
		stopListening()
		reports.Wait()
		if transport != nil {
			// The sessions of the drained jobs count too.
			err = errors.Join(err, transport.Flush(context.WithoutCancel(ctx)))
		}
		a.logger.Info("tier stopped", "tier", TargetMTA)
		return err
	}
	stopping := func(error) error { return a.stopSimulator(sim) } // after Run drained the jobs
	return services.NewBasicService(starting, running, stopping).WithName(TargetMTA), nil
}

// txListener is a queue that hears transactional jobs queued by other processes while
// ListenTransactional runs, and signals them to the MTA (ports.TransactionalSignal): with the send path in
// another process, a receipt queued during a broadcast ends the MTA's wait for a batch of free slots as it
// does in the all-in-one process.
type txListener interface {
	ListenTransactional(ctx context.Context, logger *slog.Logger) error
}

var (
	signersOnce sync.Once
	signers     int
)

// signingThreads gives the MTA's signing jobs (mta.Config.Signers) processors of their own: as many
// jobs as the process has processors, and that many processors more, so that while they sign the rest
// of the process (the API, the MTA's own sessions and reports) keeps the processors it had; the kernel
// still shares the same cores between all of them. With GOMAXPROCS set, the count is left alone and half
// of it signs. Done once per process.
func signingThreads() int {
	signersOnce.Do(func() {
		procs := runtime.GOMAXPROCS(0)
		if _, set := os.LookupEnv("GOMAXPROCS"); set {
			signers = max(1, procs/2) // the operator's count stands: half of it signs at most
			return
		}
		signers = procs
		runtime.GOMAXPROCS(2 * procs)
	})
	return signers
}
