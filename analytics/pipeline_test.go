package analytics_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/analytics"
	"github.com/postmill/postmill/ports"
)

// scriptedSource hands out batches of the sizes in sizes, one per ReadEvents, then none, recording when
// each read happened.
type scriptedSource struct {
	mu    sync.Mutex
	sizes []int
	reads []time.Time
	done  chan struct{}
}

func (s *scriptedSource) ReadEvents(ctx context.Context, max int, handle func(context.Context, []ports.AnalyticsEvent) error) (int, error) {
	s.mu.Lock()
	s.reads = append(s.reads, time.Now())
	n := 0
	if len(s.sizes) > 0 {
		n, s.sizes = min(s.sizes[0], max), s.sizes[1:]
		if len(s.sizes) == 0 {
			close(s.done)
		}
	}
	s.mu.Unlock()
	if n == 0 {
		return 0, nil
	}
	events := make([]ports.AnalyticsEvent, n)
	for i := range events {
		events[i] = ports.AnalyticsEvent{ID: "e", OrganizationID: "o", Type: "email.sent", MessageID: "m", OccurredAt: time.Now()}
	}
	return n, handle(ctx, events)
}

func (s *scriptedSource) Lag(context.Context, time.Time) (time.Duration, error) { return 0, nil }

// countingStore is an analytics store that only counts the events it takes.
type countingStore struct {
	ports.AnalyticsStore
	mu     sync.Mutex
	events int
}

func (s *countingStore) InsertEvents(_ context.Context, rows []ports.AnalyticsEvent) error {
	s.mu.Lock()
	s.events += len(rows)
	s.mu.Unlock()
	return nil
}

// TestPipelineWaitsForBatchesToFill: a full batch is followed by the next read at once, a partial one by a
// wait of at least Fill, so that under a steady flow batches grow instead of taking a few events each.
func TestPipelineWaitsForBatchesToFill(t *testing.T) {
	const (
		batch = 10
		fill  = 2 * time.Second
		idle  = time.Hour // the test ends before the source runs dry
	)
	src := &scriptedSource{sizes: []int{batch, batch, 3, batch, 4}, done: make(chan struct{})}
	store := &countingStore{}
	p := analytics.NewPipeline(analytics.PipelineConfig{Batch: batch, Fill: fill, Idle: idle}, src, store, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = p.Run(ctx); close(ran) }()
	select {
	case <-src.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the pipeline did not read the scripted batches")
	}
	cancel()
	<-ran

	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.reads) != 5 {
		t.Fatalf("%d reads, want 5", len(src.reads))
	}
	// Reads 1→2 and 2→3 follow full batches, 3→4 a partial one, 4→5 a full one.
	if gap := src.reads[3].Sub(src.reads[2]); gap < fill {
		t.Errorf("the read after a partial batch came %s later, before the %s fill wait", gap, fill)
	}
	for _, i := range []int{1, 2, 4} {
		if gap := src.reads[i].Sub(src.reads[i-1]); gap >= fill {
			t.Errorf("read %d came %s after a full batch: it should go again at once", i+1, gap)
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.events != 3*batch+3+4 {
		t.Errorf("store took %d events, want %d", store.events, 3*batch+3+4)
	}
}

// overlapSource's ReadEvents holds each call until want calls are in flight at once (or a timeout), and
// records the most it saw.
type overlapSource struct {
	want    int
	mu      sync.Mutex
	now     int
	most    int
	arrived chan struct{}
}

func (s *overlapSource) ReadEvents(ctx context.Context, _ int, _ func(context.Context, []ports.AnalyticsEvent) error) (int, error) {
	s.mu.Lock()
	s.now++
	s.most = max(s.most, s.now)
	if s.now == s.want {
		close(s.arrived)
	}
	s.mu.Unlock()
	select {
	case <-s.arrived:
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
	}
	s.mu.Lock()
	s.now--
	s.mu.Unlock()
	return 0, nil
}

func (s *overlapSource) Lag(context.Context, time.Time) (time.Duration, error) { return 0, nil }

// TestPipelineWorkers: with Workers 2 two batches are read at once; with the default, one at a time.
func TestPipelineWorkers(t *testing.T) {
	for _, workers := range []int{0, 2} {
		src := &overlapSource{want: max(workers, 2), arrived: make(chan struct{})}
		p := analytics.NewPipeline(analytics.PipelineConfig{Workers: workers, Idle: time.Millisecond}, src, &countingStore{}, nil)
		// One worker can never meet a second read: a second is enough to see it does not.
		limit := time.Second
		if workers > 0 {
			limit = 30 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		if workers > 0 {
			go func() {
				<-src.arrived
				cancel()
			}()
		}
		_ = p.Run(ctx)
		cancel()
		src.mu.Lock()
		most := src.most
		src.mu.Unlock()
		if want := max(workers, 1); most != want {
			t.Errorf("Workers %d: %d reads in flight at most, want %d", workers, most, want)
		}
	}
}

// listSource hands out one batch of the given events.
type listSource struct{ events []ports.AnalyticsEvent }

func (s *listSource) ReadEvents(ctx context.Context, _ int, handle func(context.Context, []ports.AnalyticsEvent) error) (int, error) {
	n := len(s.events)
	if n == 0 {
		return 0, nil
	}
	events := s.events
	s.events = nil
	return n, handle(ctx, events)
}

func (s *listSource) Lag(context.Context, time.Time) (time.Duration, error) { return 0, nil }

// recordingStore keeps the types of the events it takes.
type recordingStore struct {
	ports.AnalyticsStore
	types []string
}

func (s *recordingStore) InsertEvents(_ context.Context, rows []ports.AnalyticsEvent) error {
	for _, r := range rows {
		s.types = append(s.types, r.Type)
	}
	return nil
}

// TestPipelineStoresCountedTypesOnly: events of types the analytics does not count (as the Kafka events
// topic carries them) are taken from the source but never reach the store or the enricher.
func TestPipelineStoresCountedTypesOnly(t *testing.T) {
	var all []ports.AnalyticsEvent
	for _, typ := range []string{ports.EventEmailQueued, ports.EventEmailSent, ports.EventEmailScheduled,
		ports.EventEmailDelivered, ports.EventEmailCancelled, ports.EventEmailReceived, ports.EventDomainVerified,
		ports.EventEmailBounced, ports.EventEmailComplained, ports.EventEmailOpened, ports.EventEmailClicked,
		ports.EventEmailFailed, ports.EventEmailDeliveryDelayed} {
		all = append(all, ports.AnalyticsEvent{ID: typ, OrganizationID: "o", Type: typ, MessageID: "m", OccurredAt: time.Now()})
	}
	store := &recordingStore{}
	var enriched int
	p := analytics.NewPipeline(analytics.PipelineConfig{Enrich: func(_ context.Context, evs []ports.AnalyticsEvent) error {
		enriched += len(evs)
		return nil
	}}, &listSource{events: all}, store, nil)
	n, err := p.Step(context.Background())
	if err != nil || n != len(all) {
		t.Fatalf("Step = %d, %v; want all %d events taken", n, err, len(all))
	}
	if len(store.types) != len(ports.AnalyticsEventTypes) || enriched != len(store.types) {
		t.Fatalf("stored %v (%d enriched); want exactly %v", store.types, enriched, ports.AnalyticsEventTypes)
	}
	for i, typ := range store.types {
		if !ports.IsAnalyticsEventType(typ) || (i > 0 && typ == store.types[i-1]) {
			t.Fatalf("stored %v; want each counted type once", store.types)
		}
	}
	// A batch of uncounted events only is taken without a call to the store.
	store.types = nil
	p = analytics.NewPipeline(analytics.PipelineConfig{}, &listSource{events: all[:1]}, store, nil)
	if n, err := p.Step(context.Background()); err != nil || n != 1 || len(store.types) != 0 {
		t.Fatalf("a batch of one email.queued: %d, %v, stored %v", n, err, store.types)
	}
}

// TestPipelineCopy: with Copy set, a step copies through it with the batch size, never reads the source
// or inserts into the store, reports what Copy took, and still reads the source's lag.
func TestPipelineCopy(t *testing.T) {
	src := &scriptedSource{sizes: []int{5}, done: make(chan struct{})}
	store := &countingStore{}
	lagged := &lagSource{scriptedSource: src, lag: 3 * time.Second}
	var asked []int
	var copied, lag []float64
	p := analytics.NewPipeline(analytics.PipelineConfig{
		Batch:  7,
		Copy:   func(_ context.Context, max int) (int, error) { asked = append(asked, max); return 4, nil },
		Copied: func(n int) { copied = append(copied, float64(n)) },
		Lag:    func(d time.Duration) { lag = append(lag, d.Seconds()) },
	}, lagged, store, nil)
	n, err := p.Step(context.Background())
	if err != nil || n != 4 {
		t.Fatalf("Step = %d, %v; want what Copy took", n, err)
	}
	if len(asked) != 1 || asked[0] != 7 {
		t.Errorf("Copy asked for %v; want one call for the batch of 7", asked)
	}
	if len(src.reads) != 0 || store.events != 0 {
		t.Errorf("the source was read %d times and the store took %d events beside Copy", len(src.reads), store.events)
	}
	if len(copied) != 1 || copied[0] != 4 || len(lag) != 1 || lag[0] != 3 {
		t.Errorf("reported copied %v and lag %v; want [4] and [3]", copied, lag)
	}
}

// lagSource is a scriptedSource with a fixed lag.
type lagSource struct {
	*scriptedSource
	lag time.Duration
}

func (s *lagSource) Lag(context.Context, time.Time) (time.Duration, error) { return s.lag, nil }
