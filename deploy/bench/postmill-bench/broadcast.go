package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// runBroadcast times a broadcast to a topic of N subscribed contacts spread over D recipient domains (each
// with an MX pointing at the benchmark's sink): from POST /v1/broadcasts/{id}/send to the last message's
// arrival. The MTA signs every message before it delivers it (a message it cannot sign is refused, never
// sent unsigned); deploy/e2e's broadcast test verifies the signatures and their h= list. Beside it, the
// RSA-2048 signing ceiling of the same run and the process's peak RSS. A trickle of transactional sends
// through POST /v1/emails runs first alone and then while the broadcast runs, and their latency (the API's
// answer, and acceptance to delivered) is reported for both.
func runBroadcast(args []string) error {
	fs := flag.NewFlagSet("broadcast", flag.ExitOnError)
	bin := fs.String("bin", "bin/postmill", "postmill binary")
	db := fs.String("db", "", "PostgreSQL URL (its public schema is reset)")
	contacts := fs.Int("contacts", 100000, "subscribed contacts of the topic")
	domains := fs.Int("domains", 20, "recipient domains the contacts are spread over")
	txRate := fs.Int("tx-rate", 20, "transactional sends per second before and during the broadcast (0: none)")
	txAlone := fs.Duration("tx-alone", 15*time.Second, "how long transactional sends are measured alone before the broadcast")
	statements := fs.Bool("statements", false, "reset pg_stat_statements (when the cluster has it) at the send and print the run's busiest statements at the end; it observes without polling")
	sample := fs.Bool("sample", false, "sample PostgreSQL's busy backends (wait event and statement) and lock waits every 100 ms from the send on, and print a summary")
	rsaFor := fs.Duration("rsa", 3*time.Second, "how long the RSA ceiling is measured")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after")
	queue := fs.String("queue", "postgres", "postgres, or kafka: an in-process Kafka cluster (franz-go's kfake) as POSTMILL_QUEUE")
	shape := fs.String("shape", "all", "all: one process; split: --target=mta in a process of its own beside --target=edge,core (peak RSS and CPU count both)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the platform's process to this file")
	profileSecs := fs.Int("cpuprofile-seconds", 30, "seconds of CPU profile, from the send")
	profileAfter := fs.Duration("cpuprofile-after", 0, "start the CPU profile this long after the send")
	_ = fs.Parse(args)
	ctx := context.Background()
	if err := resetDatabase(ctx, *db); err != nil {
		return err
	}
	ceilingBefore, sigCPU, err := rsaMeasure(*rsaFor)
	if err != nil {
		return err
	}
	mx, err := startSink(true, true)
	if err != nil {
		return err
	}
	defer mx.close()
	host, port, _ := net.SplitHostPort(mx.addr())
	z, err := startZone()
	if err != nil {
		return err
	}
	z.a["mx.rcpt.example"] = net.ParseIP(host)
	for d := range *domains {
		z.mx[fmt.Sprintf("rcpt%d.example", d)] = "mx.rcpt.example"
	}
	z.mx["tx.example"] = "mx.rcpt.example"
	env := []string{"POSTMILL_MTA_PORT=" + port, "POSTMILL_MTA_ALLOW_NETS=" + host + "/32"}
	if *queue == "kafka" {
		kenv, stop, err := kafkaQueue()
		if err != nil {
			return err
		}
		defer stop()
		env = append(env, kenv...)
	}
	pprofAddr, err := profileAddr(*cpuProfile != "")
	if err != nil {
		return err
	}
	if pprofAddr != "" {
		env = append(env, "POSTMILL_PPROF_ADDR="+pprofAddr)
	}
	targets := "all"
	if *shape == "split" {
		targets = "edge,core"
	}
	p, err := startPlatform(platformOpts{bin: *bin, db: *db, targets: targets, zone: z, env: env})
	if err != nil {
		return err
	}
	defer p.stop()
	if err := p.setup(z); err != nil {
		return err
	}
	pids := []int{p.cmd.Process.Pid}
	if *shape == "split" {
		m, err := startMTAProcess(*bin, *db, p, env)
		if err != nil {
			return err
		}
		defer m.stop()
		pids = append(pids, m.cmd.Process.Pid)
	}

	conn, err := connect(ctx, *db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var orgID, topic string
	if err := conn.QueryRow(ctx, `SELECT id::text FROM organizations LIMIT 1`).Scan(&orgID); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `INSERT INTO topics (id, organization_id, key, name, created_at, updated_at)
		VALUES (gen_random_uuid(), $1, 'news', 'News', now(), now()) RETURNING id::text`, orgID).Scan(&topic); err != nil {
		return err
	}
	seeded := time.Now()
	if _, err := conn.Exec(ctx, `WITH c AS (INSERT INTO contacts (id, organization_id, email, first_name, properties, created_at, updated_at)
		SELECT gen_random_uuid(), $1, 'c' || g || '@rcpt' || (g % $4) || '.example', 'Contact' || g, '{"plan":"pro"}', now(), now()
		  FROM generate_series(1, $3) g RETURNING id)
		INSERT INTO topic_subscriptions (organization_id, topic_id, contact_id, status, created_at, updated_at)
		SELECT $1, $2, id, 'subscribed', now(), now() FROM c`, orgID, topic, *contacts, *domains); err != nil {
		return err
	}
	fmt.Printf("broadcast (shape %s, queue %s): %d contacts over %d domains seeded in %s\n", *shape, *queue, *contacts, *domains, time.Since(seeded).Round(time.Millisecond))

	st, body, err := p.call("POST", "/v1/broadcasts", p.key, map[string]any{"name": "bench", "subject": "Hello {{ contact.firstName }}",
		"from": "news@" + p.domain, "html": "<p>Hello {{ contact.firstName }}, your plan is {{ contact.properties.plan }}.</p>",
		"text": "Hello {{ contact.firstName }}", "topicId": topic})
	if err != nil || st != 201 {
		return fmt.Errorf("create broadcast: %d %v %v", st, body, err)
	}
	id := body["id"].(string)
	peakRSS := watchRSS(pids...)

	// Transactional sends at a steady rate: first alone (the comparison), then while the broadcast runs.
	txBody, _ := json.Marshal(map[string]any{"from": "tx@" + p.domain, "to": "user@tx.example", "subject": "Receipt", "text": "Thanks."})
	alone := &txLoad{}
	if *txRate > 0 && *txAlone > 0 {
		alone.run(p, txBody, *txRate)
		time.Sleep(*txAlone)
		alone.stop()
		// Let the sink count them before the broadcast's clock starts.
		for end := time.Now().Add(30 * time.Second); mx.count.Load() < int64(alone.accepted()) && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	base := mx.count.Load()
	aloneUntil := time.Now()

	var counters *statementCounters
	if *statements {
		counters = resetStatements(ctx, *db)
	}
	cpu := startCPUMeter(ctx, *db, pids)
	start := time.Now()
	var sampler *monitor
	if *sample {
		sampler = startSampler(ctx, *db)
		sampler.startClock(start)
	}
	mx.startClock(start)
	stopProfile := func() error { return nil }
	if pprofAddr != "" {
		stopProfile = captureProfile(pprofAddr, *cpuProfile, *profileAfter, *profileSecs)
	}
	st, body, err = p.call("POST", "/v1/broadcasts/"+id+"/send", p.key, nil)
	if err != nil || st != 200 {
		return fmt.Errorf("send broadcast: %d %v %v", st, body, err)
	}
	sendAnswered := time.Since(start)
	during := &txLoad{}
	if *txRate > 0 {
		during.run(p, txBody, *txRate)
	}

	deadline := time.Now().Add(*timeout)
	var expanded time.Duration
	var status string
	for time.Now().Before(deadline) {
		if status != "sent" {
			_ = conn.QueryRow(ctx, `SELECT status FROM broadcasts WHERE id = $1`, id).Scan(&status)
			if status == "sent" {
				expanded = time.Since(start)
			}
		}
		if status == "sent" && mx.count.Load()-base-int64(during.accepted()) >= int64(*contacts) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	during.stop()
	duringUntil := time.Now()
	if sampler != nil {
		sampler.stop()
	}
	// Transactional sends accepted at the very end may still be on their way: wait for them, so that the
	// broadcast's count is not short by them.
	for end := time.Now().Add(30 * time.Second); mx.count.Load() < base+int64(*contacts)+int64(during.accepted()) && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	peakRSS.stop()
	if err := stopProfile(); err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	curve, last := mx.curve()
	arrived := mx.count.Load() - base - int64(during.accepted())
	elapsed := last.Sub(start)
	// Every message delivered since the send, the transactional ones included, shares the CPU measured.
	delivered := mx.count.Load() - base
	cpuLine, totalCPU := cpu.report(ctx, delivered), cpu.perMessage(ctx, delivered)
	ceilingAfter, sigCPUAfter, err := rsaMeasure(*rsaFor)
	if err != nil {
		return err
	}
	ceiling := (ceilingBefore + ceilingAfter) / 2
	sigCPU = (sigCPU + sigCPUAfter) / 2
	p.reportLogs()
	dupes, noID, size := mx.stats()

	fmt.Printf("broadcast: %d contacts, %d domains; POST …/send answered in %s; expanded (status sent) after %s\n",
		*contacts, *domains, sendAnswered.Round(time.Millisecond), expanded.Round(time.Millisecond))
	fmt.Printf("  %d of %d broadcast messages arrived in %s = %.0f msg/s (mean %d bytes; %d duplicates, %d without Message-ID)\n",
		arrived, *contacts, elapsed.Round(time.Millisecond), float64(arrived)/elapsed.Seconds(), size, dupes, noID)
	fmt.Printf("  arrivals per second (transactional ones included): %s\n", joinInts(curve))
	fmt.Printf("  RSA-2048 ceiling of this run: %.0f signatures/s (delivery at %.0f%% of it); peak RSS %d MiB\n",
		ceiling, 100*float64(arrived)/elapsed.Seconds()/ceiling, peakRSS.peak()/1024)
	fmt.Println(cpuLine)
	printYardstick(sigCPU, totalCPU)
	if *txRate > 0 {
		for _, ph := range []struct {
			name     string
			load     *txLoad
			from, to time.Time
		}{{"alone", alone, time.Time{}, aloneUntil}, {"during the broadcast", during, start, duringUntil}} {
			lat := ph.load.sorted()
			if len(lat) == 0 {
				continue
			}
			fmt.Printf("  transactional POST /v1/emails %s: %d at %d/s, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d failed\n",
				ph.name, len(lat), *txRate, ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99)), ms(lat[len(lat)-1]), ph.load.fail.Load())
			if ph.load == during && expanded > 0 {
				// While the expander accepts the broadcast, and after it is done (the MTA still delivering).
				for _, part := range []struct {
					name     string
					from, to time.Time
				}{{"while expanding", start, start.Add(expanded)}, {"after expansion", start.Add(expanded), duringUntil}} {
					if lat := ph.load.sortedBetween(part.from, part.to); len(lat) > 0 {
						fmt.Printf("    %s: %d sends, p50 %.1f ms, p99 %.1f ms\n", part.name, len(lat), ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99)))
					}
					if d, err := txDelivery(ctx, conn, part.from, part.to); err == nil && len(d) > 0 {
						fmt.Printf("    %s, acceptance to delivered: p50 %.1f ms, p99 %.1f ms\n", part.name, ms(percentile(d, 0.50)), ms(percentile(d, 0.99)))
					}
				}
			}
			if d, err := txDelivery(ctx, conn, ph.from, ph.to); err == nil && len(d) > 0 {
				fmt.Printf("  transactional acceptance to delivered %s: %d messages, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
					ph.name, len(d), ms(percentile(d, 0.50)), ms(percentile(d, 0.99)), ms(d[len(d)-1]))
			} else if err != nil {
				fmt.Printf("  transactional delivery times %s: %v\n", ph.name, err)
			}
		}
	}
	if sampler != nil {
		sampler.printWaits()
	}
	counters.print(ctx, 12)
	fmt.Printf("summary: broadcast %d contacts %.0f msg/s (%.0f%% of RSA %.0f/s), peak RSS %d MiB\n",
		*contacts, float64(arrived)/elapsed.Seconds(), 100*float64(arrived)/elapsed.Seconds()/ceiling, ceiling, peakRSS.peak()/1024)
	if arrived < int64(*contacts) {
		return fmt.Errorf("only %d of %d broadcast messages arrived (status %s)", arrived, *contacts, status)
	}
	return nil
}

// txLoad sends transactional emails through POST /v1/emails at a steady rate until stopped and keeps the
// latency of each accepted one.
type txLoad struct {
	mu   sync.Mutex
	lat  []time.Duration
	at   []time.Time // when each accepted send started
	fail atomic.Int64
	quit chan struct{}
	wg   sync.WaitGroup
}

func (l *txLoad) run(p *platform, body []byte, rate int) {
	l.quit = make(chan struct{})
	l.wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-l.quit:
				return
			case <-tick.C:
			}
			l.wg.Go(func() {
				req, _ := http.NewRequest("POST", p.base+"/v1/emails", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+p.key)
				t0 := time.Now()
				res, err := p.client.Do(req)
				d := time.Since(t0)
				if err != nil {
					l.fail.Add(1)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 202 {
					l.fail.Add(1)
					return
				}
				l.mu.Lock()
				l.lat = append(l.lat, d)
				l.at = append(l.at, t0)
				l.mu.Unlock()
			})
		}
	})
}

// stop ends the sends and waits for those in flight.
func (l *txLoad) stop() {
	if l.quit != nil {
		close(l.quit)
		l.wg.Wait()
	}
}

// accepted is how many sends were accepted: the sink counts them with the broadcast's messages, and they are
// taken off its count. (A transactional message still on its way when the count is read makes the
// broadcast's figure look one message better for a moment, never the final one.)
func (l *txLoad) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lat)
}

func (l *txLoad) sorted() []time.Duration {
	return l.sortedBetween(time.Time{}, time.Now().Add(time.Hour))
}

// sortedBetween is the latencies of the sends started in [from, to), sorted.
func (l *txLoad) sortedBetween(from, to time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for i, d := range l.lat {
		if !l.at[i].Before(from) && l.at[i].Before(to) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// txDelivery is, for each transactional message accepted in [from, to), the time from its acceptance to its
// email.delivered event (both the database's timestamps), sorted.
func txDelivery(ctx context.Context, conn *pgx.Conn, from, to time.Time) ([]time.Duration, error) {
	rows, err := conn.Query(ctx, `SELECT extract(epoch FROM e.occurred_at - m.created_at)::float8
		FROM messages m JOIN events e ON e.message_id = m.id AND e.type = 'email.delivered'
		WHERE m.from_address LIKE 'tx@%' AND m.created_at >= $1 AND m.created_at < $2`, from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []time.Duration
	for rows.Next() {
		var sec float64
		if err := rows.Scan(&sec); err != nil {
			return nil, err
		}
		out = append(out, time.Duration(sec*float64(time.Second)))
	}
	slices.Sort(out)
	return out, rows.Err()
}

// rssWatch samples the resident set size of processes (their sum) every 200 ms and keeps the largest.
type rssWatch struct {
	max  atomic.Int64
	quit chan struct{}
	once sync.Once
}

func watchRSS(pids ...int) *rssWatch {
	w := &rssWatch{quit: make(chan struct{})}
	go func() {
		for {
			var kb int64
			for _, pid := range pids {
				kb += rssKB(pid)
			}
			if kb > w.max.Load() {
				w.max.Store(kb)
			}
			select {
			case <-w.quit:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

// peak is the largest RSS seen so far, in KiB.
func (w *rssWatch) peak() int64 { return w.max.Load() }

// stop ends the sampling; calling it again does nothing.
func (w *rssWatch) stop() { w.once.Do(func() { close(w.quit) }) }

// rssKB is a process's resident set size in KiB, from /proc (0 when unreadable).
func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
