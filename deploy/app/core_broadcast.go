package app

import (
	"github.com/postmill/postmill/core/broadcast"
	"github.com/postmill/postmill/ports"
)

// coreBroadcast builds the broadcast service (SPEC §4.10), which also answers the public unsubscribe pages,
// and hands its expander to the core's loops. Every broadcast message goes through the sending area's
// send path, so this area comes after sending and templates.
func (a *App) coreBroadcast(env *coreEnv) error {
	queue, err := a.queue(env.ctx)
	if err != nil {
		return err
	}
	// On a queue that reports how long its oldest ready bulk job has waited (PostgreSQL's), the expander
	// stays POSTMILL_BROADCAST_BACKLOG ahead of the MTA; on Kafka it writes as fast as it reads.
	backlog, _ := queue.(ports.BulkBacklog)
	svc, err := broadcast.New(broadcast.Config{
		BaseURL: a.cfg.BaseURL, Lease: a.cfg.BroadcastLease, MaxBacklog: a.cfg.BroadcastBacklog,
	}, broadcast.Deps{
		Store:    env.store,
		Audience: env.store,
		Domains:  env.store,
		Emails:   env.core.Emails,
		Renderer: env.core.Renderer,
		Keyring:  env.keyring,
		Clock:    env.clock,
		Logger:   env.logger,
		// Automatic protection's pause (core/reputation) is read from the store.
		Protection: env.store,
		Backlog:    backlog,
	})
	if err != nil {
		return err
	}
	env.core.Broadcasts, env.core.Unsubscribe = svc, svc
	env.loops = append(env.loops, svc.RunExpander)
	return nil
}
