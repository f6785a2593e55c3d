package app

import "github.com/postmill/postmill/core/deliverability"

// coreDeliverability builds suppressions and the handling of the bounces and complaints the inbound tier
// reports (one service behind two ports).
func (a *App) coreDeliverability(env *coreEnv) error {
	deliver, err := deliverability.New(deliverability.Config{FeedbackAddress: a.cfg.FeedbackAddress}, deliverability.Deps{
		Store: env.store, Keyring: env.keyring, Clock: env.clock, Logger: env.logger,
	})
	if err != nil {
		return err
	}
	env.core.Deliverability, env.core.Feedback = deliver, deliver
	return nil
}
