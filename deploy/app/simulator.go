package app

import (
	"context"
	"fmt"

	"github.com/postmill/postmill/mta/simulator"
)

// startSimulator starts the mailbox simulator (POSTMILL_SIMULATOR, docs/simulator.md) on a free loopback
// port for the MTA tier of this process. Its complaint reports go to the MX listener: the inbound tier's
// bound address when it runs here, POSTMILL_SMTP_ADDR otherwise (which must then reach the inbound tier).
func (a *App) startSimulator() (*simulator.Server, error) {
	sim, err := simulator.New(simulator.Config{
		MaxConnections: max(simulator.DefaultMaxConnections, a.cfg.MTAConcurrency),
		MX: func() string {
			if addr := a.InboundAddr(); addr != "" {
				return addr
			}
			return a.cfg.SMTPAddr
		},
	}, a.logger)
	if err != nil {
		return nil, err
	}
	addr, err := sim.Listen()
	if err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	go func() {
		if err := sim.Serve(); err != nil {
			a.logger.Error("simulator stopped serving", "error", err)
		}
	}()
	a.logger.Info("listening", "service", "simulator", "addr", addr.String(), "domain", simulator.Domain)
	return sim, nil
}

// stopSimulator shuts the simulator down within the grace period; nil does nothing.
func (a *App) stopSimulator(sim *simulator.Server) error {
	if sim == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.grace())
	defer cancel()
	return sim.Shutdown(ctx)
}
