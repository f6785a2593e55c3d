package app

import (
	"errors"

	"github.com/postmill/postmill/core/sending"
)

// coreSending builds the send path and the delivery outcomes on the queue, blob store and scanner, and runs
// the outbox relay, the scheduler, the pruner and the release of held deliveries. It needs the tracking and
// template areas built first.
func (a *App) coreSending(env *coreEnv) error {
	if env.tracker == nil || env.core.Renderer == nil {
		return errors.New("app: the sending area is built after the tracking and template areas")
	}
	queue, err := a.queue(env.ctx)
	if err != nil {
		return err
	}
	blobs, err := a.blobStore(env.ctx)
	if err != nil {
		return err
	}
	scanner, err := a.malwareScanner()
	if err != nil {
		return err
	}
	send, err := sending.New(sending.Config{
		RetryBase: a.cfg.MTARetryBase, MaxAge: a.cfg.MTAMaxAge, LookupCacheTTL: a.cfg.LookupCacheTTL,
	}, sending.Deps{
		Messages: env.store, Domains: env.store, Organizations: env.store, Outbox: env.store, Delivery: env.store,
		Queue: queue, Blobs: blobs, Scanner: scanner, Templates: env.core.Renderer, Tracker: env.tracker,
		Keyring: env.keyring, Held: env.store, Changes: env.changes, Clock: env.clock, Logger: env.logger,
	})
	if err != nil {
		return err
	}
	env.core.Emails, env.core.Delivery, env.core.DeliveryBatch = send, send, send
	env.loops = append(env.loops, send.RunRelay, send.RunScheduler, send.RunPruner, send.RunHoldRelease)
	return nil
}
