package app

import "github.com/postmill/postmill/core/webhook"

// coreWebhook builds the webhook endpoints and event delivery, and runs the fan-out and the dispatcher.
func (a *App) coreWebhook(env *coreEnv) error {
	sender, err := a.webhookSender()
	if err != nil {
		return err
	}
	stream, err := a.eventStream(env.ctx)
	if err != nil {
		return err
	}
	hooks, err := webhook.New(webhook.Config{Schedule: a.cfg.WebhookSchedule, MaxEndpoints: a.cfg.MaxWebhooksPerOrg}, webhook.Deps{
		Store: env.store, Sender: sender, Stream: stream, Keyring: env.keyring, Clock: env.clock, Logger: env.logger,
	})
	if err != nil {
		return err
	}
	env.core.Webhooks = hooks
	env.loops = append(env.loops, hooks.RunFanOut, hooks.RunDispatcher)
	return nil
}
