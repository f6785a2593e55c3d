package app

import (
	"github.com/postmill/postmill/adapters/stripe"
	"github.com/postmill/postmill/core/billing"
	"github.com/postmill/postmill/ports"
)

// coreBilling builds the plan catalogue and subscriptions (SPEC §4.13). The catalogue is the JSON file named
// by POSTMILL_PLANS_FILE (docs/billing.md); the free plan, when the file does not define it, has the limits
// new organizations get (POSTMILL_DEFAULT_MONTHLY_LIMIT, POSTMILL_DEFAULT_WARMUP_CAP). Without Stripe
// (POSTMILL_STRIPE_*) there is no payment provider, so every plan is taken at once; with it, a plan with a
// priceId goes through a Stripe Checkout session and changes when Stripe's notification confirms it. A new
// plan is published on the change feed, so this process's send path meets it on the very next send; the
// store's trigger tells the other processes.
func (a *App) coreBilling(env *coreEnv) error {
	plans, err := billing.LoadCatalogue(a.cfg.PlansFile)
	if err != nil {
		return err
	}
	var payments ports.PaymentProvider
	if sc := a.cfg.Stripe; sc.Enabled() {
		p, err := stripe.New(stripe.Config{
			SecretKey: sc.SecretKey, WebhookSecret: sc.WebhookSecret,
			SuccessURL: sc.SuccessURL, CancelURL: sc.CancelURL, APIURL: sc.APIURL,
		})
		if err != nil {
			return err
		}
		payments = p
	}
	svc, err := billing.New(billing.Config{
		Plans:       plans,
		DefaultPlan: ports.Plan{MonthlyLimit: a.cfg.DefaultMonthly, WarmupCap: a.cfg.DefaultWarmupCap},
	}, billing.Deps{Organizations: env.store, Store: env.store, Payments: payments, Changes: env.changes, Clock: env.clock})
	if err != nil {
		return err
	}
	env.core.Billing = svc
	return nil
}
