package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestContactSegmentBenchmark measures the marketing figures of docs/benchmarks.md: a 10,000-row CSV import
// (about 1 MB, three properties) through POST /v1/contacts/import, 100,000 contacts loaded by ten such
// imports (one after another, then ten at once), and segment previews (count and sample) over 1,000,000
// contacts: the six-condition rule, a rule whose selective condition is a numeric property range, one
// whose selective condition is a text contains, each next to the statements the previous preview ran,
// timed in the same run. It runs only with POSTMILL_BENCH_MARKETING=1 and asserts nothing about
// durations: it logs them.
func TestContactSegmentBenchmark(t *testing.T) {
	mode := os.Getenv("POSTMILL_BENCH_MARKETING")
	if mode != "1" && mode != "import" {
		t.Skip("set POSTMILL_BENCH_MARKETING=1 to measure (import to measure the imports only)")
	}
	e := MustStartAll(t)
	logLoad(t)
	a := e.MustSignup("bench-"+randomHex(t, 4)+"@example.test", "")
	_, key := e.MustKey(a, []string{"*"})

	csv := func(prefix string) string {
		var doc strings.Builder
		doc.WriteString("email,first_name,last_name,plan,city,score\n")
		for i := range 10000 {
			fmt.Fprintf(&doc, "%sreader%06d@newsletter.example.com,Firstname%d,Lastname%d,%s,City number %d,%d\n",
				prefix, i, i, i, []string{"free", "pro", "team"}[i%3], i%500, i%1000)
		}
		return doc.String()
	}
	doc := csv("")
	t.Logf("CSV: %d bytes", len(doc))
	for run, label := range []string{"create", "upsert", "upsert"} {
		start := time.Now()
		r := expect(t, e.post("/v1/contacts/import", key, map[string]any{"csv": doc}), 200)
		d := time.Since(start)
		t.Logf("import %d (%s): %v, %.0f rows/s, %s", run, label, d, 10000/d.Seconds(), r.raw[:min(len(r.raw), 80)])
	}

	// 100,000 contacts by ten imports of 10,000 new rows each, into organizations of their own: first one
	// import after another, then all ten at once.
	for _, concurrent := range []bool{false, true} {
		b := e.MustSignup("bench-"+randomHex(t, 4)+"@example.test", "")
		_, bkey := e.MustKey(b, []string{"*"})
		docs := make([][]byte, 10)
		for i := range docs {
			docs[i], _ = json.Marshal(map[string]any{"csv": csv(fmt.Sprintf("b%02d-", i))})
		}
		errs := make([]error, len(docs))
		each := make([]time.Duration, len(docs))
		start := time.Now()
		if concurrent {
			var wg sync.WaitGroup
			for i := range docs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					t0 := time.Now()
					errs[i] = importCSV(e, bkey, docs[i])
					each[i] = time.Since(t0)
				}()
			}
			wg.Wait()
		} else {
			for i := range docs {
				t0 := time.Now()
				errs[i] = importCSV(e, bkey, docs[i])
				each[i] = time.Since(t0)
			}
		}
		total := time.Since(start)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		var n int
		if err := e.app.Store().Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM contacts WHERE organization_id = $1`, b.orgID).Scan(&n); err != nil || n != 100000 {
			t.Fatalf("ten imports left %d contacts, %v", n, err)
		}
		way := "one after another"
		if concurrent {
			way = "ten at once"
		}
		sort.Slice(each, func(i, j int) bool { return each[i] < each[j] })
		t.Logf("100,000 contacts by ten imports of 10,000 (%s): %v, %.0f rows/s; each import %v-%v, median %v",
			way, total, 100000/total.Seconds(), each[0], each[len(each)-1], each[len(each)/2])
	}
	logLoad(t)
	if mode == "import" {
		return
	}

	// 1,000,000 contacts written straight into the tables, with a topic two in five subscribe to.
	ctx := context.Background()
	pool := e.app.Store().Pool()
	start := time.Now()
	topic := expect(t, e.post("/v1/topics", key, map[string]any{"key": "news", "name": "News"}), 201).str("id")
	// The imported contacts leave; the organization holds the seeded million only.
	if _, err := pool.Exec(ctx, `DELETE FROM contacts WHERE organization_id = $1`, a.orgID); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, `INSERT INTO contacts (id, organization_id, email, first_name, locale, source, properties,
		consent_status, bounced, last_active_at, created_at, updated_at)
		SELECT gen_random_uuid(), $1, 'c' || g || '@bulk' || (g % 50) || '.example',
		       'Name' || (g % 1000), (ARRAY['en','fr','de','es'])[1 + g % 4], 'bulk',
		       jsonb_build_object('plan', (ARRAY['free','pro','team'])[1 + g % 7 % 3], 'score', g % 1000, 'city', 'City ' || (g % 700)),
		       CASE WHEN g % 10 = 0 THEN 'unsubscribed' ELSE 'subscribed' END, g % 97 = 0,
		       CASE WHEN g % 3 = 0 THEN now() - (g % 400) * interval '1 day' END,
		       now() - (g % 1000) * interval '1 day', now()
		  FROM generate_series(1, 1000000) g`, a.orgID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO topic_subscriptions (organization_id, topic_id, contact_id, status, created_at, updated_at)
		SELECT organization_id, $2, id, CASE WHEN random() < 0.9 THEN 'subscribed' ELSE 'pending' END, now(), now()
		  FROM contacts WHERE organization_id = $1 AND random() < 0.4`, a.orgID, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE contacts; ANALYZE topic_subscriptions`); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded 1,000,000 contacts in %v", time.Since(start))
	logLoad(t)

	since := time.Now().Add(-180 * 24 * time.Hour)
	rules := []struct {
		name, rule string
		// where and args are the WHERE clause the SQL builder writes for the rule ($1 is the organization),
		// for the statements of the previous preview and for EXPLAIN.
		where string
		args  []any
	}{
		{"six conditions", `{"rule":{"op":"and","rules":[
			{"field":"consentStatus","cmp":"eq","value":"subscribed"},
			{"field":"properties.plan","cmp":"eq","value":"pro"},
			{"field":"properties.score","cmp":"gte","value":500},
			{"field":"lastActiveAt","cmp":"gte","value":{"daysAgo":180}},
			{"field":"locale","cmp":"in","value":["en","fr"]},
			{"field":"topic.news","cmp":"eq"}]}}`,
			`(c.consent_status = $2::text) AND (c.properties @> $3::jsonb) AND (` + numericGTE("$4", "$5") + `) AND
			 (c.last_active_at >= $6::timestamptz) AND (c.locale = ANY($7::text[])) AND
			 (EXISTS (SELECT 1 FROM topic_subscriptions ts WHERE ts.topic_id = $8::uuid AND ts.organization_id = $1
			          AND ts.contact_id = c.id AND ts.status = $9::text))`,
			[]any{"subscribed", `{"plan":"pro"}`, "score", 500.0, since, []string{"en", "fr"}, topic, "subscribed"}},
		{"numeric property range (score >= 990, 1%)", `{"rule":{"field":"properties.score","cmp":"gte","value":990}}`,
			numericGTE("$2", "$3"), []any{"score", 990.0}},
		{"text contains (email contains c12345, 11 matches)", `{"rule":{"field":"email","cmp":"contains","value":"c12345"}}`,
			`c.email ILIKE $2 ESCAPE '\'`, []any{"%c12345%"}},
	}
	for _, r := range rules {
		var count any
		times := timeRuns(5, func() {
			count = expect(t, e.post("/v1/segments/preview", key, r.rule), 200).body["count"]
		})
		t.Logf("%s: preview over 1,000,000 contacts: count %v, runs %v, median %v", r.name, count, times, times[len(times)/2])
		args := append([]any{a.orgID}, r.args...)
		q := ` FROM contacts c WHERE c.organization_id = $1 AND (` + r.where + `)`
		old := func(tx pgx.Tx) {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*)`+q, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			rows, err := tx.Query(ctx, `SELECT c.*`+q+` ORDER BY c.id LIMIT 25`, args...)
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
		}
		times = timeRuns(3, func() { inTx(t, pool, func(tx pgx.Tx) { old(tx) }) })
		t.Logf("%s: the previous statements (count(*), then ORDER BY id LIMIT 25): runs %v, median %v", r.name, times, times[len(times)/2])
		if r.name == "six conditions" {
			times = timeRuns(3, func() {
				inTx(t, pool, func(tx pgx.Tx) {
					if _, err := tx.Exec(ctx, `DROP INDEX contacts_organization_id_last_active_at_idx`); err != nil {
						t.Fatal(err)
					}
					old(tx)
				})
			})
			t.Logf("%s: the previous statements without migration 00027's index: runs %v, median %v", r.name, times, times[len(times)/2])
		}
		if os.Getenv("POSTMILL_BENCH_EXPLAIN") != "" {
			explain(t, pool, `EXPLAIN (ANALYZE, BUFFERS) WITH m AS MATERIALIZED (SELECT c.id`+q+`) SELECT id FROM m LIMIT 10001`, args)
		}
	}
	logLoad(t)
}

// numericGTE is the builder's numeric comparison of properties.<key $k> >= $v.
func numericGTE(k, v string) string {
	typ := "jsonb_typeof(c.properties -> " + k + "::text)"
	return `(CASE WHEN ` + typ + ` = 'number' THEN (c.properties -> ` + k + `::text)::numeric
		WHEN ` + typ + ` = 'string' AND (c.properties ->> ` + k + `::text) ~ '^-?[0-9]{1,30}(\.[0-9]{1,30})?$'
		THEN (c.properties ->> ` + k + `::text)::numeric END) >= ` + v + `::numeric`
}

// importCSV posts one CSV import; safe to call from several goroutines.
func importCSV(e *env, key string, body []byte) error {
	hr, err := http.NewRequest("POST", e.base+"/v1/contacts/import", bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+key)
	res, err := e.http.Do(hr)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var out struct{ Created int }
	if res.StatusCode != 200 || json.Unmarshal(raw, &out) != nil || out.Created != 10000 {
		return fmt.Errorf("import: status %d: %.200s", res.StatusCode, raw)
	}
	return nil
}

// timeRuns runs f n times and returns the durations, shortest first.
func timeRuns(n int, f func()) []time.Duration {
	var times []time.Duration
	for range n {
		start := time.Now()
		f()
		times = append(times, time.Since(start))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times
}

// inTx runs f in a repeatable-read transaction that is rolled back.
func inTx(t *testing.T, pool *pgxpool.Pool, f func(pgx.Tx)) {
	tx, err := pool.BeginTx(context.Background(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	f(tx)
}

// explain logs the plan of the preview's statement, with the setting the preview's transaction makes.
func explain(t *testing.T, pool *pgxpool.Pool, q string, args []any) {
	tx, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(context.Background(), `SET LOCAL parallel_tuple_cost = 0.01`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		t.Log(line)
	}
}

// logLoad logs the machine's load average, which the figures depend on.
func logLoad(t *testing.T) {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		t.Logf("load average: %s", strings.TrimSpace(string(b)))
	}
}
