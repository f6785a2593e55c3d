package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// runE2E measures the platform as a user runs it: one process (--target=all) started with its default
// settings, N single sends through POST /v1/emails from concurrent clients while the MTA delivers them,
// timed from the first send to the last arrival at the receiving MX. The MX is the in-process sink
// (sink.go), found the way every recipient domain is found: an MX record in the benchmark's DNS server
// pointing at a host whose A record is 127.0.0.1 (allow-listed with POSTMILL_MTA_ALLOW_NETS, since the MTA
// refuses loopback MX addresses otherwise). The only other settings are those a benchmark cannot do
// without: the MX port (POSTMILL_MTA_PORT, 25 being privileged), the DNS server and an unlimited monthly
// quota. The RSA-2048 signing ceiling is measured first in the same run, and every delivery figure is
// printed with its ratio to it.
func runE2E(args []string) error {
	fs := flag.NewFlagSet("e2e", flag.ExitOnError)
	bin := fs.String("bin", "bin/postmill", "postmill binary")
	db := fs.String("db", "", "PostgreSQL URL (its public schema is reset)")
	sends := fs.Int("sends", 20000, "single sends through POST /v1/emails")
	clients := fs.Int("clients", 64, "concurrent HTTP clients")
	shape := fs.String("shape", "all", "all: one process; split: --target=mta in a process of its own beside --target=edge,core")
	pipelining := fs.Bool("pipelining", true, "the sink offers PIPELINING (RFC 2920)")
	chunking := fs.Bool("chunking", true, "the sink offers CHUNKING (RFC 3030) as well, as large receivers do")
	rtt := fs.Duration("rtt", 0, "the sink waits this long before each write of replies, as a network round trip would")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the (all-in-one or MTA) process to this file")
	profileSecs := fs.Int("cpuprofile-seconds", 10, "seconds of CPU profile, from the first send")
	coreProfile := fs.String("cpuprofile-core", "", "with -shape split, also write a CPU profile of the edge,core process to this file")
	profileAfter := fs.Duration("cpuprofile-after", 0, "start the CPU profile this long after the first send (e.g. 15s: the tail, where only the MTA works)")
	sample := fs.Bool("sample", false, "sample PostgreSQL's wait events and lock waits every 100 ms and print a summary")
	rsaFor := fs.Duration("rsa", 3*time.Second, "how long the RSA ceiling is measured")
	queue := fs.String("queue", "postgres", "postgres, or kafka: an in-process Kafka cluster (franz-go's kfake) as POSTMILL_QUEUE")
	extraEnv := fs.String("env", "", "extra NAME=VALUE settings for the platform, comma-separated (figures with any are not the defaults)")
	webhook := fs.Bool("webhook", false, "subscribe one webhook endpoint (a local receiver answering 204) to email.sent and email.delivered, as an organization using webhooks would")
	statements := fs.Bool("statements", false, "reset pg_stat_statements (when the cluster has it) at the first send and print the run's busiest statements at the end; it observes without polling")
	tiers := fs.String("targets", "all", "the all-in-one process's --target, to measure what a tier costs by leaving it out (e.g. edge,core,mta,inbound)")
	_ = fs.Parse(args)
	ctx := context.Background()
	if err := resetDatabase(ctx, *db); err != nil {
		return err
	}

	ceilingBefore, sigCPU, err := rsaMeasure(*rsaFor)
	if err != nil {
		return err
	}
	probe, err := startSink(*pipelining, *chunking)
	if err != nil {
		return err
	}
	sinkRate, err := measureSink(probe, 16, 2*time.Second)
	probe.close()
	if err != nil {
		return err
	}

	mx, err := startSink(*pipelining, *chunking)
	if err != nil {
		return err
	}
	mx.rtt = *rtt
	defer mx.close()
	host, port, _ := net.SplitHostPort(mx.addr())
	z, err := startZone()
	if err != nil {
		return err
	}
	z.mx["rcpt.example"] = "mx.rcpt.example"
	z.a["mx.rcpt.example"] = net.ParseIP(host)
	env := []string{"POSTMILL_MTA_PORT=" + port, "POSTMILL_MTA_ALLOW_NETS=" + host + "/32"}
	var hooks *hookReceiver
	if *webhook {
		if hooks, err = startHookReceiver(); err != nil {
			return err
		}
		defer hooks.close()
		z.a["hooks.bench.example"] = net.ParseIP("127.0.0.1")
		// Loopback is a forbidden webhook target unless allowed, as it is for the MTA above.
		env = append(env, "POSTMILL_WEBHOOK_ALLOW_NETS=127.0.0.1/32")
	}
	if *queue == "kafka" {
		kenv, stop, err := kafkaQueue()
		if err != nil {
			return err
		}
		defer stop()
		env = append(env, kenv...)
	}
	if *extraEnv != "" {
		env = append(env, strings.Split(*extraEnv, ",")...)
	}
	pprofAddr, err := profileAddr(*cpuProfile != "")
	if err != nil {
		return err
	}
	targets := *tiers
	if *shape == "split" {
		targets = "edge,core"
	}
	coreEnv := env
	if pprofAddr != "" && *shape != "split" {
		coreEnv = append(slices.Clone(env), "POSTMILL_PPROF_ADDR="+pprofAddr)
	}
	corePprofAddr, err := profileAddr(*coreProfile != "" && *shape == "split")
	if err != nil {
		return err
	}
	if corePprofAddr != "" {
		coreEnv = append(slices.Clone(env), "POSTMILL_PPROF_ADDR="+corePprofAddr)
	}
	p, err := startPlatform(platformOpts{bin: *bin, db: *db, targets: targets, zone: z, env: coreEnv})
	if err != nil {
		return err
	}
	defer p.stop()
	if err := p.setup(z); err != nil {
		return err
	}
	if hooks != nil {
		st, res, err := p.call("POST", "/v1/webhooks", p.key, map[string]any{
			"url": fmt.Sprintf("http://hooks.bench.example:%d/e2e", hooks.port()), "eventTypes": []string{"email.sent", "email.delivered"}})
		if err != nil || st != 201 {
			return fmt.Errorf("webhook endpoint: %d %v %v", st, res, err)
		}
	}
	procs := []*platform{p}
	if *shape == "split" {
		mtaEnv := env
		if pprofAddr != "" {
			mtaEnv = append(slices.Clone(env), "POSTMILL_PPROF_ADDR="+pprofAddr)
		}
		m, err := startMTAProcess(*bin, *db, p, mtaEnv)
		if err != nil {
			return err
		}
		defer m.stop()
		procs = append(procs, m)
	}

	conn, err := connect(ctx, *db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)

	body, _ := json.Marshal(map[string]any{"from": "bench@" + p.domain, "to": "user@rcpt.example", "subject": "End-to-end benchmark",
		"text": "Hello from the benchmark.", "html": "<p>Hello from the benchmark.</p>"})
	var (
		next     atomic.Int64
		accepted atomic.Int64
		failed   atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		lastOK   time.Time
		firstErr string
	)
	var pids []int
	for _, pr := range procs {
		pids = append(pids, pr.cmd.Process.Pid)
	}
	var counters *statementCounters
	if *statements {
		counters = resetStatements(ctx, *db)
	}
	cpu := startCPUMeter(ctx, *db, pids)
	mon := startMonitor(ctx, *db, mx, &accepted, *sample)
	stopProfile := func() error { return nil }
	start := time.Now()
	mx.startClock(start)
	mon.startClock(start)
	if pprofAddr != "" {
		stopProfile = captureProfile(pprofAddr, *cpuProfile, *profileAfter, *profileSecs)
	}
	if corePprofAddr != "" {
		stopMTAProfile := stopProfile
		stopCoreProfile := captureProfile(corePprofAddr, *coreProfile, *profileAfter, *profileSecs)
		stopProfile = func() error { return errors.Join(stopMTAProfile(), stopCoreProfile()) }
	}
	var wg sync.WaitGroup
	for range *clients {
		wg.Go(func() {
			local := make([]time.Duration, 0, *sends / *clients + 1)
			for next.Add(1) <= int64(*sends) {
				req, _ := http.NewRequest("POST", p.base+"/v1/emails", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+p.key)
				t0 := time.Now()
				res, err := p.client.Do(req)
				d := time.Since(t0)
				if err != nil {
					failed.Add(1)
					continue
				}
				raw, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 202 {
					failed.Add(1)
					mu.Lock()
					if firstErr == "" {
						firstErr = fmt.Sprintf("%d %s", res.StatusCode, raw)
					}
					mu.Unlock()
					continue
				}
				accepted.Add(1)
				local = append(local, d)
			}
			mu.Lock()
			lat = append(lat, local...)
			if now := time.Now(); now.After(lastOK) {
				lastOK = now
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	acceptedIn := lastOK.Sub(start)
	want := accepted.Load()
	deadline := time.Now().Add(10 * time.Minute)
	for mx.count.Load() < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// Before the monitor stops, so that the backends serving its queries are still there to be counted as
	// the benchmark's.
	cpuLine := cpu.report(ctx, mx.count.Load())
	totalCPU := cpu.perMessage(ctx, mx.count.Load())
	mon.stop()
	// The ceiling is measured again after the run: on a shared machine its load changes meanwhile, and
	// the mean of the two is the fairer yardstick for the run between them.
	ceilingAfter, sigCPUAfter, err := rsaMeasure(*rsaFor)
	if err != nil {
		return err
	}
	ceiling := (ceilingBefore + ceilingAfter) / 2
	sigCPU = (sigCPU + sigCPUAfter) / 2
	profErr := stopProfile()
	curve, last := mx.curve()
	arrived := mx.count.Load()
	elapsed := last.Sub(start)

	for _, pr := range procs {
		pr.reportLogs()
	}
	if failed.Load() > 0 {
		fmt.Printf("  %d sends failed; first: %s\n", failed.Load(), firstErr)
	}
	slices.Sort(lat)
	dupes, noID, size := mx.stats()
	shapeLabel := "all-in-one"
	if *shape == "split" {
		shapeLabel = "split: --target=mta beside --target=edge,core"
	}
	if *queue == "kafka" {
		shapeLabel += ", Kafka queue (kfake in the benchmark's process)"
	}
	if *shape != "split" && *tiers != "all" {
		shapeLabel += ", --target=" + *tiers
	}
	settings := "default settings"
	if *rtt > 0 {
		settings += fmt.Sprintf(", MX round trip %s", *rtt)
	}
	if hooks != nil {
		settings += ", one webhook endpoint (email.sent, email.delivered)"
	}
	if *extraEnv != "" {
		settings = "settings " + *extraEnv
	}
	fmt.Printf("e2e (%s, %s, sink PIPELINING %v, CHUNKING %v): %s\n", shapeLabel, settings, *pipelining, *pipelining && *chunking, machine())
	fmt.Printf("  ceilings: RSA-2048 %.0f signatures/s (%.0f before the run, %.0f after; %.3f ms of CPU per signature); sink %.0f msg/s\n",
		ceiling, ceilingBefore, ceilingAfter, ms(sigCPU), sinkRate)
	fmt.Printf("  accepted: %d of %d in %.2fs = %.0f sends/s, p50 %.1fms, p99 %.1fms (%d clients)\n",
		want, *sends, acceptedIn.Seconds(), float64(want)/acceptedIn.Seconds(), ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), *clients)
	fmt.Printf("  delivered: %d arrived in %.2fs (first send → last arrival) = %.0f msg/s = %.0f%% of the RSA ceiling; "+
		"%d sessions (at most %d open), mean size %d B, duplicates %d, without Message-ID %d\n",
		arrived, elapsed.Seconds(), float64(arrived)/elapsed.Seconds(), 100*float64(arrived)/elapsed.Seconds()/ceiling,
		mx.sessions.Load(), mx.maxOpen.Load(), size, dupes, noID)
	fmt.Printf("  arrivals per second: %s\n", joinInts(curve))
	fmt.Println(cpuLine)
	printYardstick(sigCPU, totalCPU)
	mon.print()
	if arrived < want {
		return fmt.Errorf("only %d of %d accepted messages arrived within 10 minutes", arrived, want)
	}
	if profErr != nil {
		return profErr
	}
	// Every arrival's outcome is recorded shortly after it: wait for the store to say so.
	var recorded int64
	for wait := time.Now().Add(time.Minute); time.Now().Before(wait); time.Sleep(50 * time.Millisecond) {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM recipients WHERE status = 'delivered'").Scan(&recorded); err != nil || recorded >= want {
			break
		}
	}
	recordedIn := time.Since(start)
	var statuses []string
	rows, err := conn.Query(ctx, "SELECT status, count(*) FROM recipients GROUP BY status ORDER BY status")
	if err == nil {
		for rows.Next() {
			var st string
			var n int64
			_ = rows.Scan(&st, &n)
			statuses = append(statuses, fmt.Sprintf("%s %d", st, n))
		}
		rows.Close()
	}
	fmt.Printf("  recipients by status afterwards: %s (all recorded %.2fs after the first send)\n", strings.Join(statuses, ", "), recordedIn.Seconds())
	if hooks != nil {
		fmt.Printf("  webhooks: %d of the %d events' deliveries received %.2fs after the first send\n",
			hooks.count.Load(), 2*want, time.Since(start).Seconds())
	}
	counters.print(ctx, 16)
	fmt.Printf("summary: e2e %s, %s: delivered %.0f msg/s = %.0f%% of the RSA ceiling (%.0f/s); accepted %.0f/s, p99 %.0f ms; CPU yardstick %.0f%%\n",
		shapeLabel, settings, float64(arrived)/elapsed.Seconds(), 100*float64(arrived)/elapsed.Seconds()/ceiling, ceiling,
		float64(want)/acceptedIn.Seconds(), ms(percentile(lat, 0.99)), yardstick(sigCPU, totalCPU))
	return nil
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, " ")
}

// printYardstick prints what the CPU a message cost in all (Postmill, PostgreSQL, the benchmark) allows
// against the signature's own cost; nothing when the CPU could not be measured.
func printYardstick(sigCPU, totalCPU time.Duration) {
	if totalCPU <= 0 {
		return
	}
	fmt.Printf("  CPU yardstick: a signature costs %.3f ms of CPU and this run spent %.3f ms per message in all (Postmill, "+
		"PostgreSQL, benchmark): with both cores to itself the platform would deliver at %.0f%% of the RSA ceiling\n",
		ms(sigCPU), ms(totalCPU), yardstick(sigCPU, totalCPU))
}

// captureProfile takes a CPU profile of secs seconds from the process serving pprof at addr, starting after
// the given delay, and returns a function that waits for it and writes it to path.
func captureProfile(addr, path string, after time.Duration, secs int) func() error {
	done := make(chan error, 1)
	go func() {
		time.Sleep(after)
		res, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
		if err != nil {
			done <- err
			return
		}
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// profileAddr returns a free loopback address for a process's POSTMILL_PPROF_ADDR when wanted, else "".
func profileAddr(wanted bool) (string, error) {
	if !wanted {
		return "", nil
	}
	pp, err := freePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", pp), nil
}

// yardstick is the share of the RSA ceiling the platform would reach with the machine to itself: the CPU
// a signature costs over the CPU a message cost in all.
func yardstick(sig, total time.Duration) float64 {
	if total <= 0 {
		return 0
	}
	return 100 * float64(sig) / float64(total)
}

// kafkaQueue starts an in-process Kafka cluster (franz-go's kfake) and returns the settings that make the
// platform's queue use it, and the cluster's stop.
func kafkaQueue() (env []string, stop func(), err error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, nil, fmt.Errorf("kfake: %w", err)
	}
	return []string{"POSTMILL_QUEUE=kafka", "POSTMILL_KAFKA_BROKERS=" + strings.Join(cluster.ListenAddrs(), ",")}, cluster.Close, nil
}

// hookReceiver is a webhook receiver on loopback that answers every delivery 204 and counts them.
type hookReceiver struct {
	srv   *http.Server
	ln    net.Listener
	count atomic.Int64
}

func startHookReceiver() (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookReceiver{ln: ln}
	h.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		h.count.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *hookReceiver) port() int { return h.ln.Addr().(*net.TCPAddr).Port }

func (h *hookReceiver) close() { _ = h.srv.Close() }
