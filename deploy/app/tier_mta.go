package app

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/grafana/dskit/services"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/mta/simulator"
)

// initMTA runs the delivery tier: it reads the queue and reaches the core in-process or over Connect.
func (a *App) initMTA() (services.Service, error) {
	var (
		m   *mta.MTA
		sim *simulator.Server
	)
	starting := func(ctx context.Context) error {
		delivery := a.inProcessCore().Delivery
		if !a.targets.Has(TargetCore) {
			delivery = a.remoteCore(rpc.TierMTA).Core().Delivery
		}
		queue, err := a.queue(ctx)
		if err != nil {
			return err
		}
		blobs, err := a.blobStore(ctx)
		if err != nil {
			return err
		}
		cfg := mta.Config{
			Port: a.cfg.MTAPort, Relay: a.cfg.MTARelay, RelayUsername: a.cfg.MTARelayUsername,
			RelayPassword: a.cfg.MTARelayPassword, HELO: a.cfg.MTAHelo, Concurrency: a.cfg.MTAConcurrency,
			AllowNets: a.cfg.MTAAllowNets, JournalDir: filepath.Join(a.cfg.DataDir, "mta"),
		}
		if a.cfg.Simulator {
			if sim, err = a.startSimulator(); err != nil {
				return err
			}
			cfg.SimulatorDomain, cfg.SimulatorAddr = simulator.Domain, sim.Addr()
			delivery = sim.Delivery(delivery)
		}
		m, err = mta.New(cfg, mta.Deps{Queue: queue, Delivery: delivery, Resolver: a.dnsResolver(), Blobs: blobs, Logger: a.logger, Registerer: a.reg})
		if err != nil {
			return errors.Join(err, a.stopSimulator(sim))
		}
		a.logger.Info("tier started", "tier", TargetMTA, "queue", a.cfg.Queue, "relay", a.cfg.MTARelay != "")
		return nil
	}
	running := func(ctx context.Context) error {
		err := m.Run(ctx) // returns after draining in-flight jobs once ctx ends
		a.logger.Info("tier stopped", "tier", TargetMTA)
		return err
	}
	stopping := func(error) error { return a.stopSimulator(sim) } // after Run drained the jobs
	return services.NewBasicService(starting, running, stopping).WithName(TargetMTA), nil
}
