package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/grafana/dskit/services"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/analytics"
	"github.com/postmill/postmill/ports"
)

// analyticsRetention reads POSTMILL_ANALYTICS_REQUEST_DAYS (default 30) and POSTMILL_ANALYTICS_EVENT_DAYS
// (default 90): how many days request logs and events are kept.
func analyticsRetention() (ports.AnalyticsRetention, error) {
	r := ports.DefaultAnalyticsRetention
	for _, v := range []struct {
		name string
		into *time.Duration
	}{{"POSTMILL_ANALYTICS_REQUEST_DAYS", &r.Requests}, {"POSTMILL_ANALYTICS_EVENT_DAYS", &r.Events}} {
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 3650 {
			return r, fmt.Errorf("%s: %q is not a number of days between 1 and 3650", v.name, s)
		}
		*v.into = time.Duration(n) * 24 * time.Hour
	}
	return r, nil
}

// initAnalytics runs the analytics tier: the pipeline copying message events from the PostgreSQL outbox
// into the analytics store (PostgreSQL or ClickHouse, POSTMILL_ANALYTICS), and the maintenance loop creating daily partitions and applying the retention.
// Its lag is the gauge postmill_analytics_lag_seconds.
func (a *App) initAnalytics() (services.Service, error) {
	retention, err := analyticsRetention()
	if err != nil {
		return nil, err
	}
	lag := prometheus.NewGauge(prometheus.GaugeOpts{Name: "postmill_analytics_lag_seconds",
		Help: "Age of the oldest message event not yet in the analytics store."})
	copied := prometheus.NewCounter(prometheus.CounterOpts{Name: "postmill_analytics_events_total",
		Help: "Message events the analytics pipeline took from its source."})
	if err := a.reg.Register(lag); err != nil {
		return nil, err
	}
	if err := a.reg.Register(copied); err != nil {
		return nil, err
	}
	var (
		cancel    context.CancelFunc
		closeSink func()
		wg        sync.WaitGroup
	)
	starting := func(context.Context) error {
		st := a.Store()
		if st == nil {
			return errors.New("analytics: the store is not open")
		}
		store, closeStore, err := a.analyticsStore(context.Background(), st)
		if err != nil {
			return err
		}
		closeSink = closeStore
		p := analytics.NewPipeline(analytics.PipelineConfig{
			Retention: retention,
			Lag:       func(d time.Duration) { lag.Set(d.Seconds()) },
			Copied:    func(n int) { copied.Add(float64(n)) },
		}, st.Analytics(), store, a.logger)
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		for _, loop := range []func(context.Context) error{p.Run, p.RunMaintenance} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = loop(ctx)
			}()
		}
		a.logger.Info("tier started", "tier", TargetAnalytics)
		return nil
	}
	running := func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	}
	stopping := func(error) error {
		if cancel != nil {
			cancel()
		}
		wg.Wait()
		if closeSink != nil {
			closeSink()
		}
		a.logger.Info("tier stopped", "tier", TargetAnalytics)
		return nil
	}
	return services.NewBasicService(starting, running, stopping).WithName(TargetAnalytics), nil
}
