package app

import (
	"github.com/postmill/postmill/analytics"
)

// coreAnalytics builds the request log and analytics services over the PostgreSQL analytics store
// (docs/analytics.md). The pipeline that fills the store runs in the analytics tier (tier_analytics.go).
func (a *App) coreAnalytics(env *coreEnv) error {
	svc := analytics.NewService(env.store.Analytics())
	env.core.Logs, env.core.Analytics = svc, svc
	return nil
}
