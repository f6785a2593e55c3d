package app

import (
	"context"

	"github.com/postmill/postmill/adapters/clickhouse"
	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/analytics"
	"github.com/postmill/postmill/ports"
)

// coreAnalytics builds the request log and analytics services over the analytics store
// (docs/analytics.md). The pipeline that fills the store runs in the analytics tier (tier_analytics.go).
func (a *App) coreAnalytics(env *coreEnv) error {
	store, closeStore, err := a.analyticsStore(env.ctx, env.store)
	if err != nil {
		return err
	}
	if closeStore != nil {
		env.loops = append(env.loops, func(ctx context.Context) error {
			<-ctx.Done()
			closeStore()
			return nil
		})
	}
	svc := analytics.NewService(store)
	env.core.Logs, env.core.Analytics = svc, svc
	return nil
}

// analyticsStore opens the analytics store POSTMILL_ANALYTICS names: the PostgreSQL tables of st, or
// ClickHouse at POSTMILL_CLICKHOUSE_DSN (then with a close function).
func (a *App) analyticsStore(ctx context.Context, st *postgres.Store) (ports.AnalyticsStore, func(), error) {
	if a.cfg.Analytics != "clickhouse" {
		return st.Analytics(), nil, nil
	}
	ch, err := clickhouse.OpenDSN(ctx, a.cfg.ClickHouseDSN)
	if err != nil {
		return nil, nil, err
	}
	return ch, func() { _ = ch.Close() }, nil
}
