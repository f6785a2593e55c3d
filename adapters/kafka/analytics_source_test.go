package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postmill/postmill/adapters/kafka"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// analyticsConfig names an events topic and an analytics group no other test uses.
func analyticsConfig(tb testing.TB, brokers []string, partitions int) kafka.AnalyticsSourceConfig {
	s := suffix(tb)
	return kafka.AnalyticsSourceConfig{
		Brokers:    brokers,
		Topic:      "postmill.events.test." + s,
		Group:      "postmill-analytics-test-" + s,
		Partitions: partitions,
		PollWait:   2 * time.Second,
	}
}

func mustSource(tb testing.TB, cfg kafka.AnalyticsSourceConfig) *kafka.AnalyticsSource {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kafka.NewAnalyticsSource(ctx, cfg)
	if err != nil {
		tb.Fatalf("NewAnalyticsSource: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// publishEvents writes events to the topic the way the core does (EventStream).
func publishEvents(tb testing.TB, brokers []string, topic string, events []ports.Event) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	es, err := kafka.NewEventStream(ctx, kafka.Config{Brokers: brokers, Topic: topic})
	if err != nil {
		tb.Fatal(err)
	}
	defer es.Close()
	if err := es.Publish(ctx, events); err != nil {
		tb.Fatal(err)
	}
}

// produceRaw writes record values as they are, each with the given timestamp.
func produceRaw(tb testing.TB, brokers []string, topic string, at time.Time, values ...[]byte) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Key: []byte("k"), Value: v, Timestamp: at}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		tb.Fatal(err)
	}
}

func messageEvent(org, msg, typ string, at time.Time) ports.Event {
	return ports.Event{ID: uuid.Must(uuid.NewV7()).String(), OrganizationID: org, Type: typ, MessageID: msg, OccurredAt: at}
}

// groupOffsets returns the group's committed offset per partition of the topic (absent: none committed) and
// the end offset of every partition.
func groupOffsets(tb testing.TB, brokers []string, cfg kafka.AnalyticsSourceConfig) (map[int32]int64, map[int32]int64) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, cfg.Group)
	if err != nil {
		tb.Fatal(err)
	}
	got := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == cfg.Topic && o.Err == nil && o.At >= 0 {
			got[o.Partition] = o.At
		}
	})
	ends, err := adm.ListEndOffsets(ctx, cfg.Topic)
	if err != nil {
		tb.Fatal(err)
	}
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	return got, end
}

// readAll calls ReadEvents until want records were taken.
func readAll(t *testing.T, s *kafka.AnalyticsSource, want int, handle func(context.Context, []ports.AnalyticsEvent) error) {
	t.Helper()
	taken := 0
	for deadline := time.Now().Add(30 * time.Second); taken < want; {
		if time.Now().After(deadline) {
			t.Fatalf("took %d records of %d", taken, want)
		}
		n, err := s.ReadEvents(context.Background(), 100, handle)
		if err != nil {
			t.Fatalf("ReadEvents: %v", err)
		}
		taken += n
	}
	if taken != want {
		t.Fatalf("took %d records; want %d", taken, want)
	}
}

// TestAnalyticsSourceCrashBeforeCommit: a process that stored a batch and died before committing leaves
// the batch to the group's next member, which stores it again; the PostgreSQL analytics store counts every
// event once. Offsets are committed only after the store took the batch, and a committed batch is not read
// again.
func TestAnalyticsSourceCrashBeforeCommit(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t)
	cfg := analyticsConfig(t, brokers, 3)
	store := pgtest.Store(t).Analytics()
	a := mustSource(t, cfg)

	org := uuid.NewString()
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	var events []ports.Event
	for i := 0; i < 3; i++ {
		msg := uuid.NewString()
		events = append(events, messageEvent(org, msg, ports.EventEmailSent, at), messageEvent(org, msg, ports.EventEmailDelivered, at.Add(time.Second)))
	}
	events = append(events, ports.Event{ID: uuid.NewString(), OrganizationID: org, Type: ports.EventDomainVerified, DomainID: uuid.NewString(), OccurredAt: at})
	publishEvents(t, brokers, cfg.Topic, events)

	crash := errors.New("the process died after the insert")
	crashed := 0
	for deadline := time.Now().Add(30 * time.Second); crashed == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the first member read nothing")
		}
		n, err := a.ReadEvents(context.Background(), 100, func(ctx context.Context, b []ports.AnalyticsEvent) error {
			if got, _ := groupOffsets(t, brokers, cfg); len(got) != 0 {
				t.Errorf("offsets %v were committed before the store took the batch", got)
			}
			if err := store.InsertEvents(ctx, b); err != nil {
				return err
			}
			crashed += len(b)
			return crash
		})
		if n != 0 || (err != nil && !errors.Is(err, crash)) {
			t.Fatalf("a failed batch: ReadEvents = %d, %v; want 0 and the handler's error", n, err)
		}
	}
	if got, _ := groupOffsets(t, brokers, cfg); len(got) != 0 {
		t.Fatalf("offsets %v were committed for a batch whose handler failed", got)
	}
	a.Close()

	b := mustSource(t, cfg)
	var handed []ports.AnalyticsEvent
	readAll(t, b, len(events), func(ctx context.Context, batch []ports.AnalyticsEvent) error {
		handed = append(handed, batch...)
		return store.InsertEvents(ctx, batch)
	})
	if len(handed) != 6 {
		t.Fatalf("the second member handed %d events; want the 6 message events (the domain event is not handed)", len(handed))
	}
	for _, e := range handed {
		if e.OrganizationID != org || e.MessageID == "" || !e.OccurredAt.Equal(at) && !e.OccurredAt.Equal(at.Add(time.Second)) {
			t.Errorf("handed %+v", e)
		}
	}
	got, end := groupOffsets(t, brokers, cfg)
	for p, e := range end {
		if e > 0 && got[p] != e {
			t.Errorf("partition %d: committed %d, end %d", p, got[p], e)
		}
	}
	if n, err := b.ReadEvents(context.Background(), 100, func(context.Context, []ports.AnalyticsEvent) error {
		t.Error("a committed batch was handed out again")
		return nil
	}); n != 0 || err != nil {
		t.Errorf("after the commit: ReadEvents = %d, %v", n, err)
	}
	sum, err := store.Summarize(context.Background(), org, ports.AnalyticsQuery{From: at.Add(-time.Hour), To: at.Add(time.Hour), Bucket: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Totals.Sent != 3 || sum.Totals.Delivered != 3 {
		t.Errorf("stored totals %+v after %d events were stored twice; want 3 sent and 3 delivered", sum.Totals, crashed)
	}
	if lag, _ := b.Lag(context.Background(), time.Now()); lag != 0 || b.Behind() != 0 {
		t.Errorf("caught up: Lag = %v, Behind = %d; want 0", lag, b.Behind())
	}
}

// TestAnalyticsSourceRetry: a batch whose handler fails is handed out again, whole and first, by the same
// member; while it waits, Lag is the age of its oldest event.
func TestAnalyticsSourceRetry(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t)
	cfg := analyticsConfig(t, brokers, 1)
	s := mustSource(t, cfg)
	org := uuid.NewString()
	published := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	var ids []string
	var values [][]byte
	for i := 0; i < 5; i++ {
		e := messageEvent(org, uuid.NewString(), ports.EventEmailSent, published)
		ids = append(ids, e.ID)
		v, _ := json.Marshal(map[string]any{"id": e.ID, "organization_id": org, "type": e.Type, "message_id": e.MessageID, "occurred_at": e.OccurredAt})
		values = append(values, v)
	}
	produceRaw(t, brokers, cfg.Topic, published, values...)

	var first []string
	for deadline := time.Now().Add(30 * time.Second); len(first) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("nothing was read")
		}
		_, err := s.ReadEvents(context.Background(), 3, func(_ context.Context, b []ports.AnalyticsEvent) error {
			for _, e := range b {
				first = append(first, e.ID)
			}
			return errors.New("store down")
		})
		if len(first) > 0 && err == nil {
			t.Fatal("a failed batch was reported as read")
		}
	}
	if strings.Join(first, ",") != strings.Join(ids[:len(first)], ",") {
		t.Fatalf("first batch %v; want the first records %v", first, ids)
	}
	if lag, _ := s.Lag(context.Background(), published.Add(10*time.Minute)); lag != 10*time.Minute {
		t.Errorf("Lag while the batch waits = %v; want the age of its oldest record, 10m", lag)
	}
	var again []string
	n, err := s.ReadEvents(context.Background(), 5, func(_ context.Context, b []ports.AnalyticsEvent) error {
		for _, e := range b {
			again = append(again, e.ID)
		}
		return nil
	})
	if err != nil || n == 0 || len(again) < len(first) || strings.Join(again[:len(first)], ",") != strings.Join(first, ",") {
		t.Fatalf("after the failure ReadEvents = %d, %v, handed %v; want the failed batch %v first", n, err, again, first)
	}
	if len(again) < len(ids) {
		readAll(t, s, len(ids)-len(again), func(_ context.Context, b []ports.AnalyticsEvent) error {
			for _, e := range b {
				again = append(again, e.ID)
			}
			return nil
		})
	}
	if strings.Join(again, ",") != strings.Join(ids, ",") {
		t.Errorf("handed %v; want %v in order", again, ids)
	}
	if lag, _ := s.Lag(context.Background(), time.Now()); lag != 0 {
		t.Errorf("Lag after the topic was read to its end = %v", lag)
	}
}

// TestAnalyticsSourceMalformed: records that are not events (not JSON, no or bad ids, no time, too long)
// are counted and committed with their batch, never handed out and never read again; the valid event
// among them is handed out.
func TestAnalyticsSourceMalformed(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t)
	cfg := analyticsConfig(t, brokers, 1)
	var malformed atomic.Int64
	cfg.Malformed = func(n int) { malformed.Add(int64(n)) }
	cfg.MaxRecordBytes = 1024
	cfg.Logger = slog.New(slog.DiscardHandler)
	s := mustSource(t, cfg)

	org, msg := uuid.NewString(), uuid.NewString()
	good := messageEvent(org, msg, ports.EventEmailDelivered, time.Now().UTC().Truncate(time.Millisecond))
	valid := func(over map[string]any) []byte {
		m := map[string]any{"id": good.ID, "organization_id": org, "type": good.Type, "message_id": msg, "occurred_at": good.OccurredAt}
		for k, v := range over {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		b, _ := json.Marshal(m)
		return b
	}
	values := [][]byte{
		[]byte("not json"),
		[]byte("{}"),
		[]byte(`[1,2,3]`),
		valid(map[string]any{"id": "1; DROP TABLE events"}),
		valid(map[string]any{"organization_id": "other"}),
		valid(map[string]any{"message_id": "x"}),
		valid(map[string]any{"type": nil}),
		valid(map[string]any{"occurred_at": nil}),
		valid(map[string]any{"provider_response": strings.Repeat("x", 2048)}),
		valid(nil),
		valid(map[string]any{"id": uuid.NewString(), "type": ports.EventDomainVerified, "message_id": nil}),
	}
	produceRaw(t, brokers, cfg.Topic, time.Now(), values...)

	var handed []ports.AnalyticsEvent
	readAll(t, s, len(values), func(_ context.Context, b []ports.AnalyticsEvent) error {
		handed = append(handed, b...)
		return nil
	})
	if len(handed) != 1 || handed[0].ID != good.ID || handed[0].MessageID != msg || handed[0].Type != good.Type || !handed[0].OccurredAt.Equal(good.OccurredAt) {
		t.Fatalf("handed %+v; want only the valid event", handed)
	}
	if got := malformed.Load(); got != 9 {
		t.Errorf("malformed records counted: %d; want 9", got)
	}
	if n, err := s.ReadEvents(context.Background(), 100, func(context.Context, []ports.AnalyticsEvent) error {
		t.Error("a committed record was handed out again")
		return nil
	}); n != 0 || err != nil {
		t.Errorf("after the malformed records: ReadEvents = %d, %v", n, err)
	}
	got, end := groupOffsets(t, brokers, cfg)
	if got[0] != end[0] || end[0] != int64(len(values)) {
		t.Errorf("committed %v, end %v; want every record committed", got, end)
	}
}
