package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/grafana/dskit/services"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/adapters/kafka"
	"github.com/postmill/postmill/analytics"
	"github.com/postmill/postmill/ports"
)

// ClickHouseBatch is the analytics pipeline's batch with the ClickHouse store.
const ClickHouseBatch = 5000

// initAnalytics runs the analytics tier: the pipeline copying message events into the analytics store
// (PostgreSQL or ClickHouse, POSTMILL_ANALYTICS), and the maintenance loop creating daily partitions and
// applying the retention. The events come from the PostgreSQL outbox, or, when POSTMILL_QUEUE=kafka, from
// the Kafka events topic (the sending domains and tags of a batch's messages read from the store in one
// query, and the outbox the events trigger still fills emptied without being counted). Its lag is the
// gauge postmill_analytics_lag_seconds; with Kafka also postmill_analytics_lag_records.
func (a *App) initAnalytics() (services.Service, error) {
	retention, err := a.cfg.AnalyticsTier.retention()
	if err != nil {
		return nil, err
	}
	useKafka := a.cfg.Queue == "kafka"
	lag := prometheus.NewGauge(prometheus.GaugeOpts{Name: "postmill_analytics_lag_seconds",
		Help: "Age of the oldest message event not yet in the analytics store."})
	copied := prometheus.NewCounter(prometheus.CounterOpts{Name: "postmill_analytics_events_total",
		Help: "Message events the analytics pipeline took from its source."})
	collectors := []prometheus.Collector{lag, copied}
	behind := prometheus.NewGauge(prometheus.GaugeOpts{Name: "postmill_analytics_lag_records",
		Help: "Records of the Kafka events topic waiting after the last one the analytics tier read."})
	malformed := prometheus.NewCounter(prometheus.CounterOpts{Name: "postmill_analytics_malformed_total",
		Help: "Records of the Kafka events topic that were not events, skipped."})
	discarded := prometheus.NewCounter(prometheus.CounterOpts{Name: "postmill_analytics_outbox_discarded_total",
		Help: "Events removed from the PostgreSQL analytics outbox uncounted, because the Kafka events topic is the source."})
	if useKafka {
		collectors = append(collectors, behind, malformed, discarded)
	}
	for _, c := range collectors {
		if err := a.reg.Register(c); err != nil {
			return nil, err
		}
	}
	var (
		cancel  context.CancelFunc
		closers []func()
		wg      sync.WaitGroup
	)
	starting := func(ctx context.Context) error {
		st := a.Store()
		if st == nil {
			return errors.New("analytics: the store is not open")
		}
		store, closeStore, err := a.analyticsStore(context.Background(), st)
		if err != nil {
			return err
		}
		if closeStore != nil {
			closers = append(closers, closeStore)
		}
		cfg := analytics.PipelineConfig{
			Retention: retention,
			Lag:       func(d time.Duration) { lag.Set(d.Seconds()) },
			Copied:    func(n int) { copied.Add(float64(n)) },
		}
		if a.cfg.Analytics == "clickhouse" {
			// ClickHouse wants few large inserts (each makes a part to merge; its documentation asks for at
			// least a thousand rows and suggests ten to a hundred thousand); PostgreSQL keeps the
			// pipeline's default of 1,000, which bounds one transaction.
			cfg.Batch = ClickHouseBatch
		}
		if !useKafka {
			cfg.Workers = AnalyticsOutboxWorkers(a.cfg.Analytics)
			if a.cfg.Analytics != "clickhouse" {
				// The outbox and the rollups are one database: each batch is counted in the transaction
				// that removes it from the outbox, exactly once, with no event rows kept to skip repeats.
				cfg.Copy = st.Analytics().CopyOutbox
			}
		}
		var source ports.AnalyticsEventSource = st.Analytics()
		loops := []func(context.Context) error{}
		if useKafka {
			src, err := kafka.NewAnalyticsSource(ctx, kafka.AnalyticsSourceConfig{
				Brokers:   a.cfg.KafkaBrokers,
				Group:     a.cfg.AnalyticsTier.kafkaGroup(),
				Malformed: func(n int) { malformed.Add(float64(n)) },
				Logger:    a.logger,
			})
			if err != nil {
				for _, c := range closers {
					c()
				}
				closers = nil
				return fmt.Errorf("kafka analytics source: %w", err)
			}
			closers = append([]func(){src.Close}, closers...)
			source = src
			cfg.Enrich = analytics.NewEnricher(st.Analytics(), 0).Enrich
			cfg.Lag = func(d time.Duration) {
				lag.Set(d.Seconds())
				behind.Set(float64(src.Behind()))
			}
			outbox := st.Analytics()
			loops = append(loops, func(ctx context.Context) error {
				return analytics.Discard(ctx, outbox, 1000, 0, func(n int) { discarded.Add(float64(n)) }, a.logger)
			})
		}
		p := analytics.NewPipeline(cfg, source, store, a.logger)
		loops = append(loops, p.Run, p.RunMaintenance)
		var runCtx context.Context
		runCtx, cancel = context.WithCancel(context.Background())
		for _, loop := range loops {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = loop(runCtx)
			}()
		}
		a.logger.Info("tier started", "tier", TargetAnalytics, "source", a.cfg.Queue)
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
		for _, c := range closers {
			c()
		}
		a.logger.Info("tier stopped", "tier", TargetAnalytics)
		return nil
	}
	return services.NewBasicService(starting, running, stopping).WithName(TargetAnalytics), nil
}

// AnalyticsOutboxWorkers is how many batches the pipeline copies at once from the PostgreSQL outbox into the
// store of the kind. Each batch claims its own outbox rows (FOR UPDATE SKIP LOCKED), so with ClickHouse two
// batches overlap: one is read and deleted in PostgreSQL while the other is inserted into ClickHouse. The
// PostgreSQL store writes its rollups in the same database, so a second batch there would only queue behind
// the first on the same rows.
func AnalyticsOutboxWorkers(store string) int {
	if store == "clickhouse" {
		return 2
	}
	return 1
}
