package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/postmill/postmill/adapters/clickhouse"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestAnalyticsBenchmark measures the analytics figures of docs/benchmarks.md on both stores, PostgreSQL
// and ClickHouse (Debian's 18.16, started privately): the ingest rate of events through the store in the
// pipeline's batches of 1,000 and in batches of 5,000 (on ClickHouse beside the same batch insert without
// the lookup of stored ids; on PostgreSQL beside the events table alone), GET /v1/analytics over 10,000,000 events of one organization and the
// first page of GET /v1/logs over 1,000,000 requests, each beside an authenticated GET /v1/organization
// (the HTTP floor) and the store call alone, measured in the same run. The large data sets are written
// straight into the tables (generate_series, numbers()), not through the API. It runs only with
// POSTMILL_BENCH_ANALYTICS=1 (POSTMILL_BENCH_ANALYTICS_STORES=postgres or clickhouse for one store;
// _EVENTS, _REQUESTS and _INGEST change the sizes), asserts that every seeded event is counted and that a
// re-delivered batch is counted once, and logs durations without asserting them.
func TestAnalyticsBenchmark(t *testing.T) {
	if os.Getenv("POSTMILL_BENCH_ANALYTICS") != "1" {
		t.Skip("set POSTMILL_BENCH_ANALYTICS=1 to measure")
	}
	size := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv("POSTMILL_BENCH_ANALYTICS_" + name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	events, requests, ingest := size("EVENTS", 10_000_000), size("REQUESTS", 1_000_000), size("INGEST", 500_000)
	stores := []string{"postgres", "clickhouse"}
	if s := os.Getenv("POSTMILL_BENCH_ANALYTICS_STORES"); s != "" {
		stores = []string{s}
	}
	t.Logf("%d CPUs, load average %s", runtime.NumCPU(), loadAverage())
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			cfg := testConfig(t, pgtest.URL(t))
			var chAddr, chDB string
			if store == "clickhouse" {
				chAddr, chDB = mustClickHouse(t), "postmill_bench_"+randomHex(t, 4)
				cfg.Analytics, cfg.ClickHouseDSN = "clickhouse", "clickhouse://"+chAddr+"/"+chDB
			}
			e := MustStart(t, cfg, "all")
			ctx := context.Background()
			var st ports.AnalyticsStore = e.app.Store().Analytics()
			if store == "clickhouse" {
				a, err := clickhouse.Open(ctx, chAddr, chDB)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { a.Close() })
				st = a
			}
			inserters := []inserter{{"store InsertEvents", st.InsertEvents}}
			if store == "clickhouse" {
				// The comparison: the same batches through the driver's batch insert straight into the
				// events table (through the rollup view), as the store inserts them, but without the lookup
				// of stored ids that keeps re-delivered events out: the difference is the lookup's cost.
				raw, err := ch.Open(&ch.Options{Addr: []string{chAddr}})
				if err != nil {
					t.Fatal(err)
				}
				defer raw.Close()
				inserters = append(inserters, inserter{"driver batch INSERT, no id lookup", func(ctx context.Context, rows []ports.AnalyticsEvent) error {
					b, err := raw.PrepareBatch(ctx, `INSERT INTO `+chDB+`.events (organization_id, occurred_at, id, type, message_id, domain, tags)`)
					if err != nil {
						return err
					}
					for _, e := range rows {
						if err := b.Append(e.OrganizationID, e.OccurredAt.Truncate(time.Second), e.ID, e.Type, e.MessageID, e.Domain, e.Tags); err != nil {
							return err
						}
					}
					return b.Send()
				}})
			}
			if store == "postgres" {
				// The comparison: the same batches into analytics_events alone (ON CONFLICT DO NOTHING, as
				// the store does), without the hourly rollups the store writes in the same statement.
				pool := e.app.Store().Pool()
				inserters = append(inserters, inserter{"events table only, no rollups", func(ctx context.Context, rows []ports.AnalyticsEvent) error {
					var id, org, typ, domain, tags []string
					var at []time.Time
					var tagOf []int32
					for i, e := range rows {
						id, org, typ, domain, at = append(id, e.ID), append(org, e.OrganizationID), append(typ, e.Type),
							append(domain, e.Domain), append(at, e.OccurredAt)
						for _, tg := range e.Tags {
							tagOf, tags = append(tagOf, int32(i+1)), append(tags, tg)
						}
					}
					_, err := pool.Exec(ctx, `
WITH tg AS (SELECT n, array_agg(tag ORDER BY k) AS tags FROM unnest($6::int[], $7::text[]) WITH ORDINALITY AS t (n, tag, k) GROUP BY n)
INSERT INTO analytics_events (id, organization_id, occurred_at, type, message_id, domain, tags)
SELECT i.id, i.org, i.at, i.type, NULL, i.domain, coalesce(tg.tags, '{}')
FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::text[], $5::text[]) WITH ORDINALITY AS i (id, org, at, type, domain, n)
LEFT JOIN tg ON tg.n = i.n
ON CONFLICT DO NOTHING`, id, org, at, typ, domain, tagOf, tags)
					return err
				}})
			}
			for _, size := range []int{1000, 5000} {
				benchIngest(t, st, inserters, ingest, size)
			}

			acct := e.MustSignup("bench-"+randomHex(t, 4)+"@example.test", "")
			start := time.Now()
			switch store {
			case "postgres":
				seedPostgresAnalytics(t, e, acct.orgID, events, requests)
			case "clickhouse":
				seedClickHouseAnalytics(t, chAddr, chDB, acct.orgID, events, requests)
			}
			t.Logf("seeded %d events and %d requests in %v (load average %s)", events, requests,
				time.Since(start).Round(time.Second), loadAverage())
			// The seeding may outlast the access token: sign in again.
			token := expect(t, e.post("/v1/auth/login", "", map[string]any{"email": acct.email, "password": acct.password}), 200).str("accessToken")

			// Every seeded event inside the 30-day range is counted.
			r := expect(t, e.get("/v1/analytics?range=30d", token), 200)
			tot := r.body["totals"].(map[string]any)
			var counted float64
			for _, k := range []string{"sent", "delivered", "bounced", "opened", "clicked"} {
				counted += tot[k].(float64)
			}
			t.Logf("30d totals: %v (%.0f events counted of %d seeded over 29 days)", tot, counted, events)
			if counted != float64(events) {
				t.Errorf("30d counted %.0f events, want %d", counted, events)
			}

			timeIt(t, "GET /v1/organization (HTTP floor)", func() { expect(t, e.get("/v1/organization", token), 200) })
			for _, q := range []string{"range=30d", "range=90d", "range=24h", "range=30d&domain=d1.example", "range=30d&tag=campaign:c3"} {
				timeIt(t, "GET /v1/analytics?"+q, func() { expect(t, e.get("/v1/analytics?"+q, token), 200) })
			}
			now := time.Now().UTC()
			timeIt(t, "store Summarize 30 days", func() {
				if _, err := st.Summarize(ctx, acct.orgID, ports.AnalyticsQuery{From: now.Add(-29 * 24 * time.Hour), To: now, Bucket: 24 * time.Hour}); err != nil {
					t.Fatal(err)
				}
			})
			timeIt(t, "GET /v1/logs (first page, 25)", func() {
				if r := expect(t, e.get("/v1/logs", token), 200); len(r.body["data"].([]any)) != 25 {
					t.Fatalf("first page: %s", r.raw[:min(len(r.raw), 200)])
				}
			})
			timeIt(t, "GET /v1/logs?limit=100", func() { expect(t, e.get("/v1/logs?limit=100", token), 200) })
			timeIt(t, "GET /v1/logs?status=5xx (rare, first page)", func() { expect(t, e.get("/v1/logs?status=5xx", token), 200) })
			timeIt(t, "store ListRequests first page", func() {
				if _, err := st.ListRequests(ctx, acct.orgID, ports.LogFilter{}, ports.PageQuery{Limit: 25}); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("load average after the reads: %s", loadAverage())
		})
	}
}

// timeIt runs fn once to warm up, then 20 times, and logs the median, 90th percentile and maximum.
func timeIt(t *testing.T, what string, fn func()) {
	t.Helper()
	fn()
	var d []time.Duration
	for range 20 {
		start := time.Now()
		fn()
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	t.Logf("%-48s median %8v  p90 %8v  max %8v", what, d[len(d)/2].Round(10*time.Microsecond),
		d[len(d)*9/10].Round(10*time.Microsecond), d[len(d)-1].Round(10*time.Microsecond))
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) < 14 {
		return "unknown"
	}
	return string(b[:14])
}

// benchUUID returns a random UUIDv7 for at (the ids the pipeline hands the store).
func benchUUID(at time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	ms := uint64(at.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// inserter is one way of inserting events, named for the log.
type inserter struct {
	name   string
	insert func(context.Context, []ports.AnalyticsEvent) error
}

// benchIngest inserts n events of a fresh organization per inserter, in batches of size (the pipeline's
// batch is 1,000), one writer, the events of the last hour as the pipeline sees them, the inserters taking
// turns batch by batch so they share the machine's load alike, and logs each one's rate; then it
// re-delivers one batch of the first inserter (the store) and checks nothing more is counted.
func benchIngest(t *testing.T, st ports.AnalyticsStore, inserters []inserter, n, size int) {
	t.Helper()
	ctx := context.Background()
	types := []string{ports.EventEmailSent, ports.EventEmailDelivered, ports.EventEmailOpened, ports.EventEmailClicked}
	now := time.Now().UTC()
	orgs := make([]string, len(inserters))
	batches := make([][][]ports.AnalyticsEvent, len(inserters))
	for k := range inserters {
		orgs[k] = benchUUID(now)
		for i := 0; i < n; i += size {
			b := make([]ports.AnalyticsEvent, 0, size)
			for j := i; j < min(i+size, n); j++ {
				at := now.Add(-time.Hour + time.Duration(j)*time.Hour/time.Duration(n))
				b = append(b, ports.AnalyticsEvent{ID: benchUUID(at), OrganizationID: orgs[k], Type: types[j%len(types)],
					MessageID: benchUUID(at), Domain: fmt.Sprintf("d%d.example", j%5),
					Tags: []string{fmt.Sprintf("campaign:c%d", j%10), "kind:news"}, OccurredAt: at})
			}
			batches[k] = append(batches[k], b)
		}
	}
	load := loadAverage()
	spent := make([]time.Duration, len(inserters))
	for i := range batches[0] {
		for k, in := range inserters {
			start := time.Now()
			if err := in.insert(ctx, batches[k][i]); err != nil {
				t.Fatal(err)
			}
			spent[k] += time.Since(start)
		}
	}
	for k, in := range inserters {
		t.Logf("ingest, %s: %d events (2 tags, 1 domain each) in batches of %d in %v: %.0f events/s (load average before %s, after %s)",
			in.name, n, size, spent[k].Round(time.Millisecond), float64(n)/spent[k].Seconds(), load, loadAverage())
	}
	start := time.Now()
	if err := st.InsertEvents(ctx, batches[0][len(batches[0])/2]); err != nil {
		t.Fatal(err)
	}
	t.Logf("re-delivered batch of %d (all already stored): %v", size, time.Since(start).Round(time.Microsecond))
	sum, err := st.Summarize(ctx, orgs[0], ports.AnalyticsQuery{From: now.Add(-2 * time.Hour), To: now.Add(time.Hour), Bucket: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got := sum.Totals.Sent + sum.Totals.Delivered + sum.Totals.Opened + sum.Totals.Clicked; got != int64(n) {
		t.Errorf("after a re-delivered batch %d events are counted, want %d", got, n)
	}
}

// seedPostgresAnalytics writes events events of org, spread evenly over the last 29 days (five types,
// five domains, ten tags), into analytics_events with their hourly rollups, and requests requests over the
// same span into analytics_requests.
func seedPostgresAnalytics(t *testing.T, e *env, org string, events, requests int) {
	t.Helper()
	ctx := context.Background()
	pool := e.app.Store().Pool()
	span := 29 * 24 * 3600 // seconds
	start := time.Now()
	if _, err := pool.Exec(ctx, `
INSERT INTO analytics_events (id, organization_id, occurred_at, type, message_id, domain, tags)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, $1::uuid,
       now() - (g * $3::float8 / $2::int) * interval '1 second',
       (ARRAY['email.sent','email.delivered','email.bounced','email.opened','email.clicked'])[1 + g % 5],
       NULL, 'd' || (g % 5) || '.example', ARRAY['campaign:c' || (g % 10)]
FROM generate_series(1, $2::int) g`, org, events, span); err != nil {
		t.Fatal(err)
	}
	t.Logf("postgres: %d events inserted in %v", events, time.Since(start).Round(time.Second))
	start = time.Now()
	if _, err := pool.Exec(ctx, `
WITH dims AS (
    SELECT organization_id, '' AS domain, '' AS tag, occurred_at, type FROM analytics_events WHERE organization_id = $1
    UNION ALL SELECT organization_id, domain, '', occurred_at, type FROM analytics_events WHERE organization_id = $1 AND domain <> ''
    UNION ALL SELECT organization_id, '', t, occurred_at, type FROM analytics_events, unnest(tags) AS t WHERE organization_id = $1
)
INSERT INTO analytics_rollups (organization_id, domain, tag, bucket, sent, delivered, bounced, complained,
    opened, clicked, failed, delayed)
SELECT organization_id, domain, tag, date_trunc('hour', occurred_at, 'UTC'),
    count(*) FILTER (WHERE type = 'email.sent'), count(*) FILTER (WHERE type = 'email.delivered'),
    count(*) FILTER (WHERE type = 'email.bounced'), count(*) FILTER (WHERE type = 'email.complained'),
    count(*) FILTER (WHERE type = 'email.opened'), count(*) FILTER (WHERE type = 'email.clicked'),
    count(*) FILTER (WHERE type = 'email.failed'), count(*) FILTER (WHERE type = 'email.delivery_delayed')
FROM dims GROUP BY 1, 2, 3, 4`, org); err != nil {
		t.Fatal(err)
	}
	t.Logf("postgres: rollups of %d events computed in %v", events, time.Since(start).Round(time.Second))
	start = time.Now()
	if _, err := pool.Exec(ctx, `
INSERT INTO analytics_requests (organization_id, id, occurred_at, method, route, path, status, latency_us,
    api_key_id, user_id, user_agent, client_ip, request_id, request_body, response_body)
SELECT $1::uuid, ('00000000-0000-7000-9000-' || lpad(to_hex(g), 12, '0'))::uuid,
       now() - (g * $3::float8 / $2::int) * interval '1 second', 'POST', '/v1/emails', '/v1/emails',
       CASE WHEN g % 1000 = 0 THEN 503 WHEN g % 10 = 0 THEN 422 ELSE 202 END, 1200, 'key-' || (g % 3), '',
       'bench/1', '127.0.0.0', 'req-' || g,
       '{"from":"a@example.com","to":["b@example.com"],"subject":"hello","text":"hi"}', '{"id":"x"}'
FROM generate_series(1, $2::int) g`, org, requests, span); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE analytics_events; ANALYZE analytics_rollups; ANALYZE analytics_requests`); err != nil {
		t.Fatal(err)
	}
	t.Logf("postgres: %d requests inserted and tables analyzed in %v", requests, time.Since(start).Round(time.Second))
}

// seedClickHouseAnalytics writes the same data as seedPostgresAnalytics into ClickHouse with
// INSERT … SELECT FROM numbers(), the events through the materialized view that fills the rollups.
func seedClickHouseAnalytics(t *testing.T, addr, db, org string, events, requests int) {
	t.Helper()
	ctx := context.Background()
	conn, err := ch.Open(&ch.Options{Addr: []string{addr}, ReadTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	span := 29 * 24 * 3600
	start := time.Now()
	if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.events (organization_id, occurred_at, id, type, message_id, domain, tags)
SELECT '%[2]s', toDateTime(now() - intDiv((number + 1) * %[3]d, %[4]d)), concat('seed-', toString(number)),
       arrayElement(['email.sent','email.delivered','email.bounced','email.opened','email.clicked'], (number + 1) %% 5 + 1),
       '', concat('d', toString((number + 1) %% 5), '.example'), [concat('campaign:c', toString((number + 1) %% 10))]
FROM numbers(%[4]d)`, db, org, span, events)); err != nil {
		t.Fatal(err)
	}
	t.Logf("clickhouse: %d events inserted (through the rollup view) in %v", events, time.Since(start).Round(time.Second))
	start = time.Now()
	if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.requests (organization_id, id, occurred_at, occurred_us, method, route,
    path, status, latency_us, api_key_id, user_id, user_agent, client_ip, request_id, request_body, response_body)
SELECT '%[2]s', concat('00000000-0000-7000-9000-', toString(number + 1)), toDateTime(now() - intDiv((number + 1) * %[3]d, %[4]d)),
       toUInt32(0), 'POST', '/v1/emails', '/v1/emails',
       toUInt16(if((number + 1) %% 1000 = 0, 503, if((number + 1) %% 10 = 0, 422, 202))), toUInt64(1200),
       concat('key-', toString((number + 1) %% 3)), '', 'bench/1', '127.0.0.0', concat('req-', toString(number + 1)),
       '{"from":"a@example.com","to":["b@example.com"],"subject":"hello","text":"hi"}', '{"id":"x"}'
FROM numbers(%[4]d)`, db, org, span, requests)); err != nil {
		t.Fatal(err)
	}
	t.Logf("clickhouse: %d requests inserted in %v", requests, time.Since(start).Round(time.Second))
}
