package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postmill/postmill/adapters/kafka"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/deploy/app"
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
