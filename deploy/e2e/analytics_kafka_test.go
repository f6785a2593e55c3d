package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postmill/postmill/adapters/clickhouse"
	"github.com/postmill/postmill/adapters/kafka"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/analytics"
	"github.com/postmill/postmill/deploy/app"
	"github.com/postmill/postmill/ports"
)

// TestAnalyticsFromKafka runs the platform with POSTMILL_QUEUE=kafka (an in-process kfake cluster on
// loopback) as two processes: edge, core and MTA in one, the analytics tier alone (--target=analytics) in
// the other. A sent message's events reach GET /v1/analytics through the Kafka events topic, with its
// sending domain and tags; the PostgreSQL outbox is emptied without being counted; a record on the topic
// that is not an event is counted and skipped; and events published while the analytics process is down
// are counted once it is back, from the offsets its consumer group committed.
func TestAnalyticsFromKafka(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()

	dns, mx := mailRecords(t)
	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	cfg.MTAPort = atoiPort(t, mx.port())
	cfg.MTARetryBase = 200 * time.Millisecond
	cfg.Queue, cfg.KafkaBrokers = "kafka", brokers

	w := &mailWorld{dns: dns, mx: mx}
	w.env = MustStart(t, cfg, "edge,core,mta")
	w.owner = w.MustSignup("owner@"+senderDomain, "")
	w.mustVerifiedDomain(t, senderDomain)
	_, w.key = w.MustKey(w.owner, []string{"emails:send", "emails:read"})
	sess := w.owner.access

	stopAnalytics, metrics := startAnalytics(t, cfg)

	sendOne := func(subject string) {
		t.Helper()
		sent := expect(t, w.send(t, map[string]any{
			"from": "ada@" + senderDomain, "to": []string{"reader@rcpt.example"}, "subject": subject,
			"text": "Hello", "tags": map[string]string{"campaign": "launch"},
		}, nil), 202)
		w.waitStatus(t, sent.str("id"), "delivered", 30*time.Second)
	}
	counted := func(query string, sent, delivered float64) func() bool {
		return func() bool {
			a := expect(t, w.get("/v1/analytics?range=24h"+query, sess), 200)
			tot, _ := a.body["totals"].(map[string]any)
			return tot["sent"] == sent && tot["delivered"] == delivered
		}
	}

	sendOne("Kafka analytics one")
	waitFor(t, 30*time.Second, "the send and delivery in analytics", counted("", 1, 1))
	// The topic carries neither the sending domain nor the tags: the tier looked them up.
	for _, q := range []string{"&domain=" + senderDomain, "&tag=campaign:launch"} {
		if !counted(q, 1, 1)() {
			t.Errorf("GET /v1/analytics?range=24h%s does not count the send and the delivery", q)
		}
	}
	if !counted("&domain=other.example", 0, 0)() {
		t.Error("another domain counts the send")
	}

	// The outbox the events trigger fills is emptied by the analytics process, uncounted: every count
	// above came from the topic.
	pool := w.app.Store().Pool()
	waitFor(t, 30*time.Second, "an empty analytics outbox", func() bool {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM analytics_outbox`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	m := metrics()
	if v := metricValue(t, m, "postmill_analytics_events_total"); v < 2 {
		t.Errorf("postmill_analytics_events_total = %v; want the sent and delivered events at least", v)
	}
	if v := metricValue(t, m, "postmill_analytics_outbox_discarded_total"); v < 2 {
		t.Errorf("postmill_analytics_outbox_discarded_total = %v; want the outbox rows of the two events at least", v)
	}
	for _, name := range []string{"postmill_analytics_lag_seconds", "postmill_analytics_lag_records"} {
		metricValue(t, m, name)
	}

	// A record that is not an event is counted and skipped; the pipeline goes on.
	produceRecord(t, brokers, kafka.DefaultEventsTopic, []byte("not an event"))
	waitFor(t, 30*time.Second, "the malformed record counted", func() bool {
		return metricValue(t, metrics(), "postmill_analytics_malformed_total") == 1
	})

	// Down while a message is sent and delivered: back, it reads on from its group's committed offsets.
	stopAnalytics()
	sendOne("Kafka analytics two")
	if !counted("", 1, 1)() {
		t.Fatal("the second message was counted with the analytics tier down")
	}
	_, _ = startAnalytics(t, cfg)
	waitFor(t, 30*time.Second, "the second message in analytics", counted("", 2, 2))
	// The first message's events were committed before the stop: they were not read again.
	if !counted("&tag=campaign:launch", 2, 2)() {
		t.Error("per tag, the two messages are not counted once each")
	}

	// An event of a message the store does not hold (gone, or of another organization) is counted without
	// a sending domain or tags: the lookup's not_found does not stall the pipeline.
	es, err := kafka.NewEventStream(context.Background(), kafka.Config{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	ghost := ports.Event{ID: randomUUID(t), OrganizationID: w.owner.orgID, Type: ports.EventEmailSent,
		MessageID: randomUUID(t), OccurredAt: time.Now().UTC()}
	if err := es.Publish(context.Background(), []ports.Event{ghost}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the unknown message's event in analytics", counted("", 3, 2))
	if !counted("&domain="+senderDomain, 2, 2)() || !counted("&tag=campaign:launch", 2, 2)() {
		t.Error("the unknown message's event was given a domain or a tag")
	}
}

func randomUUID(t *testing.T) string {
	b := []byte(randomHex(t, 16))
	return string(b[0:8]) + "-" + string(b[8:12]) + "-4" + string(b[13:16]) + "-8" + string(b[17:20]) + "-" + string(b[20:32])
}

// startAnalytics runs the analytics tier alone on cfg; stop (also run when the test ends) stops it, and
// metrics reads its /metrics.
func startAnalytics(t *testing.T, cfg app.Config) (stop func(), metrics func() string) {
	t.Helper()
	ts, err := app.ParseTargets(app.TargetAnalytics)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, ts, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatalf("starting the analytics tier: %v", err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stopping the analytics tier: %v", err)
		}
	}
	t.Cleanup(stop)
	e := &env{t: t, http: &http.Client{Timeout: 30 * time.Second}}
	return stop, func() string {
		r := e.getURL(t, a.MetricsURL()+"/metrics")
		expect(t, r, 200)
		return string(r.raw)
	}
}

// metricValue reads an unlabelled metric from a Prometheus text exposition; a missing metric fails.
func metricValue(t *testing.T, exposition, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(exposition)
	if m == nil {
		t.Fatalf("metric %s is not exported", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("metric %s: %v", name, err)
	}
	return v
}

// produceRecord writes one record to topic as a hostile or broken producer would.
func produceRecord(t *testing.T, brokers []string, topic string, value []byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestAnalyticsPipelineMeasure is opt-in (POSTMILL_BENCH_ANALYTICS_PIPELINE=<messages>): it seeds that many
// messages of one organization with five events each (sent, delivered, opened, clicked, opened) and times
// the analytics pipeline into the PostgreSQL store, in batches of 1,000 as the tier runs it, from the
// PostgreSQL outbox, from the Kafka events topic (kfake on loopback) with the sending domain and tags
// looked up, and from the topic without the lookups (the Kafka source's ceiling). The store is emptied
// between runs; the events are published to the topic before the Kafka runs are timed.
func TestAnalyticsPipelineMeasure(t *testing.T) {
	messages, _ := strconv.Atoi(os.Getenv("POSTMILL_BENCH_ANALYTICS_PIPELINE"))
	if messages <= 0 {
		t.Skip("POSTMILL_BENCH_ANALYTICS_PIPELINE is not set")
	}
	ctx := context.Background()
	e := MustStart(t, testConfig(t, pgtest.URL(t)), "edge,core")
	owner := e.MustSignup("owner@measure.example", "")
	domainID := expect(t, e.post("/v1/domains", owner.access, map[string]any{"domain": "measure.example"}), 201).str("id")
	st := e.app.Store()
	pool := st.Pool()
	// Events already fanned out, so the core leaves them alone; the events trigger fills the outbox.
	if _, err := pool.Exec(ctx, `
WITH m AS (
    INSERT INTO messages (id, organization_id, domain_id, status, from_address, tags, created_at)
    SELECT gen_random_uuid(), $1, $2, 'delivered', 'ada@measure.example',
        jsonb_build_object('campaign', 'c' || (i % 10), 'tier', 'gold'), now() - interval '1 hour'
    FROM generate_series(1, $3) AS i
    RETURNING id, created_at
)
INSERT INTO events (id, organization_id, type, message_id, occurred_at, fanned_out_at)
SELECT gen_random_uuid(), $1, t.type, m.id, m.created_at + t.n * interval '1 second', now()
FROM m, (VALUES (1, 'email.sent'), (2, 'email.delivered'), (3, 'email.opened'), (4, 'email.clicked'),
    (5, 'email.opened')) AS t (n, type)`, owner.orgID, domainID, messages); err != nil {
		t.Fatal(err)
	}
	// Statistics as a live database has them, so the lookups' plans are the ones production gets.
	if _, err := pool.Exec(ctx, `ANALYZE messages; ANALYZE events; ANALYZE analytics_outbox`); err != nil {
		t.Fatal(err)
	}
	total := messages * 5
	stores := []string{"postgres", "clickhouse"}
	if v := os.Getenv("POSTMILL_BENCH_ANALYTICS_PIPELINE_STORES"); v != "" {
		stores = strings.Split(v, ",")
	}
	var chAddr string
	for _, s := range stores {
		if s == "clickhouse" {
			chAddr = mustClickHouse(t)
		}
	}
	// openStore gives an empty store of the kind, and the pipeline's batch with it (as the tier runs it).
	openStore := func(kind string) (ports.AnalyticsStore, int, func()) {
		switch kind {
		case "postgres":
			return st.Analytics(), 1000, func() {
				if _, err := pool.Exec(ctx, `TRUNCATE analytics_events, analytics_rollups`); err != nil {
					t.Fatal(err)
				}
			}
		case "clickhouse":
			a, err := clickhouse.Open(ctx, chAddr, "postmill_pipeline_"+randomHex(t, 4))
			if err != nil {
				t.Fatal(err)
			}
			return a, app.ClickHouseBatch, func() { a.Close() }
		}
		t.Fatalf("unknown store %q (postgres or clickhouse)", kind)
		return nil, 0, nil
	}
	run := func(kind, what string, drain bool, source ports.AnalyticsEventSource, enrich func(context.Context, []ports.AnalyticsEvent) error) {
		t.Helper()
		store, batch, done := openStore(kind)
		defer done()
		if drain {
			// The outbox is emptied by each run that reads it: every seeded event goes back in.
			if _, err := pool.Exec(ctx, `INSERT INTO analytics_outbox (id) SELECT id FROM events
WHERE organization_id = $1 ON CONFLICT DO NOTHING`, owner.orgID); err != nil {
				t.Fatal(err)
			}
		}
		workers := 1
		if drain {
			workers = app.AnalyticsOutboxWorkers(kind)
			// To compare, POSTMILL_BENCH_ANALYTICS_PIPELINE_OUTBOX_WORKERS sets another count.
			if w, err := strconv.Atoi(os.Getenv("POSTMILL_BENCH_ANALYTICS_PIPELINE_OUTBOX_WORKERS")); err == nil && w > 0 {
				workers = w
			}
		}
		p := analytics.NewPipeline(analytics.PipelineConfig{Batch: batch, Enrich: enrich}, source, store, nil)
		load := pipelineLoad()
		start := time.Now()
		var taken atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Go(func() {
				errs <- func() error {
					for {
						n, err := p.Step(ctx)
						if err != nil {
							return fmt.Errorf("%s: %w", what, err)
						}
						if n == 0 && time.Since(start) > 10*time.Minute {
							return fmt.Errorf("%s: took %d of %d events", what, taken.Load(), total)
						}
						// The outbox also holds the domain's event: it is read until empty. The topic holds
						// only the seeded events; waiting for more there would time the poll's wait.
						if taken.Add(int64(n)) >= int64(total) && (n == 0 || !drain) {
							return nil
						}
					}
				}()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		d := time.Since(start)
		sum, err := store.Summarize(ctx, owner.orgID, ports.AnalyticsQuery{From: time.Now().Add(-3 * time.Hour), To: time.Now().Add(time.Hour), Bucket: time.Hour})
		if err != nil || sum.Totals.Sent != int64(messages) || sum.Totals.Opened != int64(2*messages) {
			t.Fatalf("%s into %s: totals %+v, %v", what, kind, sum.Totals, err)
		}
		t.Logf("into %-10s batch %5d × %d  %-40s %8d events in %8v: %8.0f events/s (load average before: %s)", kind, batch, workers, what,
			taken.Load(), d.Round(time.Millisecond), float64(taken.Load())/d.Seconds(), load)
	}

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	topic := "postmill.events.measure." + randomHex(t, 4)
	es, err := kafka.NewEventStream(ctx, kafka.Config{Brokers: brokers, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	rows, err := pool.Query(ctx, `SELECT id, organization_id, type, message_id, occurred_at FROM events
WHERE organization_id = $1 AND message_id IS NOT NULL ORDER BY id`, owner.orgID)
	if err != nil {
		t.Fatal(err)
	}
	var batch []ports.Event
	for rows.Next() {
		var ev ports.Event
		if err := rows.Scan(&ev.ID, &ev.OrganizationID, &ev.Type, &ev.MessageID, &ev.OccurredAt); err != nil {
			t.Fatal(err)
		}
		if batch = append(batch, ev); len(batch) == 5000 {
			if err := es.Publish(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := es.Publish(ctx, batch); err != nil {
		t.Fatal(err)
	}
	source := func() *kafka.AnalyticsSource {
		s, err := kafka.NewAnalyticsSource(ctx, kafka.AnalyticsSourceConfig{Brokers: brokers, Topic: topic,
			Group: "postmill-analytics-measure-" + randomHex(t, 4)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	for _, kind := range stores {
		run(kind, "PostgreSQL outbox", true, st.Analytics(), nil)
		run(kind, "Kafka topic, domain and tags looked up", false, source(), analytics.NewEnricher(st.Analytics(), 0).Enrich)
		run(kind, "Kafka topic, no lookups (ceiling)", false, source(), nil)
	}
}

func pipelineLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
