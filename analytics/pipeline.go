package analytics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
)

// PipelineConfig tunes the pipeline; zero fields take the defaults.
type PipelineConfig struct {
	Batch int           // events per batch, default 1000
	Idle  time.Duration // wait when the source is empty, default 500ms
	// Fill is the wait after a batch that took fewer than Batch events, default 200ms: the source keeps
	// filling meanwhile, so under a steady flow batches grow instead of each taking the few events written
	// since the last one, and the per-batch costs (the source's transaction, the lag reading, the store's
	// statements) are shared by more events. A full batch goes again at once.
	Fill      time.Duration
	Retry     time.Duration // wait after a failed batch, default 2s
	Retention ports.AnalyticsRetention
	// Maintain is how often partitions are prepared and retention applied, default an hour.
	Maintain time.Duration
	// Lag, when set, is told the source's lag after every batch (a gauge in seconds).
	Lag func(time.Duration)
	// Copied, when set, is told how many events each batch took.
	Copied func(int)
	// Enrich, when set, completes each batch before the store takes it (the Kafka events topic carries no
	// sending domain or tags; Enricher.Enrich adds them). An error fails the batch like a store error.
	Enrich func(context.Context, []ports.AnalyticsEvent) error
	// Workers is how many batches Run copies at once, default 1. More than one only for a source whose
	// ReadEvents may be called concurrently, each call taking events no other call holds (the PostgreSQL
	// outbox claims its rows with SKIP LOCKED), and a store that takes concurrent inserts.
	Workers int
	// Copy, when set, takes the place of the source's ReadEvents and the store's InsertEvents: it copies up
	// to max events from the source into the store in one transaction and returns how many it took (the
	// PostgreSQL outbox into the PostgreSQL rollups, when both are one database). Counting then happens
	// exactly once, without the store keeping event ids to skip repeats. Lag still asks the source.
	Copy func(ctx context.Context, max int) (int, error)
}

func (c PipelineConfig) withDefaults() PipelineConfig {
	if c.Batch <= 0 {
		c.Batch = 1000
	}
	if c.Idle <= 0 {
		c.Idle = 500 * time.Millisecond
	}
	if c.Retry <= 0 {
		c.Retry = 2 * time.Second
	}
	if c.Fill <= 0 {
		c.Fill = 200 * time.Millisecond
	}
	if c.Maintain <= 0 {
		c.Maintain = time.Hour
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	return c
}

// Pipeline copies message events from their source into the analytics store: at least once (a batch is
// acknowledged after the store took it) and idempotently (the store skips event ids it holds); with
// PipelineConfig.Copy, exactly once.
type Pipeline struct {
	cfg    PipelineConfig
	source ports.AnalyticsEventSource
	store  ports.AnalyticsStore
	logger *slog.Logger
}

// NewPipeline returns a pipeline from source into store.
func NewPipeline(cfg PipelineConfig, source ports.AnalyticsEventSource, store ports.AnalyticsStore, logger *slog.Logger) *Pipeline {
	if logger == nil {
		logger = slog.Default()
	}
	return &Pipeline{cfg: cfg.withDefaults(), source: source, store: store, logger: logger}
}

// Step copies one batch and returns how many events it took from the source.
func (p *Pipeline) Step(ctx context.Context) (int, error) {
	var n int
	var err error
	if p.cfg.Copy != nil {
		n, err = p.cfg.Copy(ctx, p.cfg.Batch)
	} else {
		n, err = p.source.ReadEvents(ctx, p.cfg.Batch, p.insert)
	}
	if err == nil && p.cfg.Copied != nil {
		p.cfg.Copied(n)
	}
	if p.cfg.Lag != nil {
		if lag, lerr := p.source.Lag(ctx, time.Now()); lerr == nil {
			p.cfg.Lag(lag)
		}
	}
	return n, err
}

// insert hands one batch to the store, enriched first when the pipeline enriches. Events of types the
// analytics does not count (ports.AnalyticsEventTypes) are left out: the PostgreSQL outbox never takes them,
// the Kafka events topic carries every event.
func (p *Pipeline) insert(ctx context.Context, events []ports.AnalyticsEvent) error {
	counted := make([]ports.AnalyticsEvent, 0, len(events))
	for _, e := range events {
		if ports.IsAnalyticsEventType(e.Type) {
			counted = append(counted, e)
		}
	}
	events = counted
	if len(events) == 0 {
		return nil
	}
	if p.cfg.Enrich != nil {
		if err := p.cfg.Enrich(ctx, events); err != nil {
			return err
		}
	}
	return p.store.InsertEvents(ctx, events)
}

// Run copies batches until ctx ends, waiting Idle when the source is empty, Fill after a partial batch and
// Retry after a failure, in Workers loops at once.
func (p *Pipeline) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range p.cfg.Workers {
		wg.Go(func() { p.loop(ctx) })
	}
	wg.Wait()
	return nil
}

// loop is one of Run's workers.
func (p *Pipeline) loop(ctx context.Context) {
	for {
		n, err := p.Step(ctx)
		wait := time.Duration(0)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			p.logger.Warn("analytics pipeline batch failed", slog.String("error", err.Error()))
			wait = p.cfg.Retry
		case n == 0:
			wait = p.cfg.Idle
		case n < p.cfg.Batch:
			wait = p.cfg.Fill
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// RunMaintenance prepares partitions and applies the retention now and every Maintain until ctx ends.
func (p *Pipeline) RunMaintenance(ctx context.Context) error {
	t := time.NewTicker(p.cfg.Maintain)
	defer t.Stop()
	for {
		if err := p.store.Maintain(ctx, time.Now(), p.cfg.Retention); err != nil && ctx.Err() == nil {
			p.logger.Warn("analytics maintenance failed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Discard acknowledges every event of source without storing any, batch after batch, waiting idle when it
// is empty, until ctx ends. With the Kafka events topic as the pipeline's source, the PostgreSQL outbox
// (which the events trigger fills whatever the queue) is emptied this way so it does not grow;
// discarded, when set, is told how many events each round took.
func Discard(ctx context.Context, source ports.AnalyticsEventSource, batch int, idle time.Duration, discarded func(int), logger *slog.Logger) error {
	if batch < 1 {
		batch = 1000
	}
	if idle <= 0 {
		idle = 5 * time.Second
	}
	if logger == nil {
		logger = slog.Default()
	}
	drop := func(context.Context, []ports.AnalyticsEvent) error { return nil }
	for {
		n, err := source.ReadEvents(ctx, batch, drop)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			logger.Warn("analytics outbox discard failed", slog.String("error", err.Error()))
		} else if discarded != nil && n > 0 {
			discarded(n)
		}
		if err == nil && n >= batch {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(idle):
		}
	}
}
