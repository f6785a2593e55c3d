package app

import (
	"os"

	"github.com/postmill/postmill/core/billing"
	"github.com/postmill/postmill/ports"
)

// coreBilling builds the plan catalogue and subscriptions (SPEC §4.13). The catalogue is the JSON file named
// by POSTMILL_PLANS_FILE (docs/billing.md); the free plan, when the file does not define it, has the limits
// new organizations get (POSTMILL_DEFAULT_MONTHLY_LIMIT, POSTMILL_DEFAULT_WARMUP_CAP). No payment provider
// is configured, so every plan is taken at once. The store's trigger on organizations announces new limits
// to every process's send path.
func (a *App) coreBilling(env *coreEnv) error {
	plans, err := billing.LoadCatalogue(os.Getenv("POSTMILL_PLANS_FILE"))
	if err != nil {
		return err
	}
	svc, err := billing.New(billing.Config{
		Plans:       plans,
		DefaultPlan: ports.Plan{MonthlyLimit: a.cfg.DefaultMonthly, WarmupCap: a.cfg.DefaultWarmupCap},
	}, billing.Deps{Organizations: env.store, Store: env.store, Clock: env.clock})
	if err != nil {
		return err
	}
	env.core.Billing = svc
	return nil
}
