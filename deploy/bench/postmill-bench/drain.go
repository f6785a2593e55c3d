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
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// runMTA queues messages with the MTA stopped, then starts an MTA-only process and times how fast it drains
// them into the receiving MX (the in-process sink of sink.go, or Postfix's smtp-sink with -sink), DKIM-signing
// each message. The RSA-2048 signing ceiling is measured first, in the same run.
func runMTA(args []string) error {
	fs := flag.NewFlagSet("mta", flag.ExitOnError)
	bin := fs.String("bin", "bin/postmill", "postmill binary")
	db := fs.String("db", "", "PostgreSQL URL (its public schema is reset)")
	sinkAddr := fs.String("sink", "", "address of an SMTP sink such as Postfix's smtp-sink; empty: the in-process sink")
	messages := fs.Int("messages", 5000, "messages to deliver")
	concurrency := fs.Int("concurrency", 0, "POSTMILL_MTA_CONCURRENCY; 0 keeps the default")
	rsaFor := fs.Duration("rsa", 3*time.Second, "how long the RSA ceiling is measured")
	rtt := fs.Duration("rtt", 0, "the in-process sink waits this long before each write of replies, as a network round trip would")
	shape := fs.String("shape", "all", "all: one process runs core and MTA; split: the MTA is a process of its own reaching the core over Connect")
	chunking := fs.Bool("chunking", true, "the in-process sink offers CHUNKING (RFC 3030) beside PIPELINING, as large receivers do")
	tracked := fs.Bool("tracking", false, "turn open and click tracking on for the sending domain (pixel and rewritten links in every copy)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the process that drains (all shape) to this file")
	profileSecs := fs.Int("cpuprofile-seconds", 10, "seconds of CPU profile, from the start of the drain")
	_ = fs.Parse(args)
	ctx := context.Background()
	if err := resetDatabase(ctx, *db); err != nil {
		return err
	}
	ceilingBefore, sigCPU, err := rsaMeasure(*rsaFor)
	if err != nil {
		return err
	}
	var inProcess *sink
	if *sinkAddr == "" {
		s, err := startSink(true, *chunking)
		if err != nil {
			return err
		}
		s.rtt = *rtt
		defer s.close()
		*sinkAddr, inProcess = s.addr(), s
	}
	host, port, err := net.SplitHostPort(*sinkAddr)
	if err != nil {
		return err
	}
	z, err := startZone()
	if err != nil {
		return err
	}
	z.mx["rcpt.example"] = "mx.rcpt.example"
	z.a["mx.rcpt.example"] = net.ParseIP(host)
	// The sink is on loopback, which the MTA refuses for MX hosts unless allow-listed.
	env := []string{"POSTMILL_MTA_PORT=" + port, "POSTMILL_MTA_ALLOW_NETS=" + host}
	if *concurrency > 0 {
		env = append(env, fmt.Sprintf("POSTMILL_MTA_CONCURRENCY=%d", *concurrency))
	}

	// Phase 1: accept the messages with edge and core only (nothing delivers yet).
	core, err := startPlatform(platformOpts{bin: *bin, db: *db, targets: "edge,core", zone: z, env: env})
	if err != nil {
		return err
	}
	if err := core.setup(z); err != nil {
		core.stop()
		return err
	}
	html := "<p>Hello from the benchmark.</p>"
	if *tracked {
		st, b, err := core.call("PATCH", "/v1/domains/"+core.domainID, core.access, map[string]any{"openTracking": true, "clickTracking": true})
		if err != nil || st != 200 {
			core.stop()
			return fmt.Errorf("tracking on: %d %v %v", st, b, err)
		}
		html = `<html><body><p>Hello from the benchmark.</p><a href="https://example.com/a">A</a> <a href="https://example.com/b">B</a> <a href="https://example.com/c">C</a></body></html>`
	}
	body, _ := json.Marshal(map[string]any{"from": "bench@" + core.domain, "to": "user@rcpt.example", "subject": "MTA benchmark", "text": "Hello from the benchmark.", "html": html})
	var wg sync.WaitGroup
	var failed atomic.Int64
	next := atomic.Int64{}
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(*messages) {
				req, _ := http.NewRequest("POST", core.base+"/v1/emails", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+core.key)
				res, err := core.client.Do(req)
				if err != nil || res.StatusCode != 202 {
					failed.Add(1)
				}
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		core.stop()
		return fmt.Errorf("%d sends failed while queueing", failed.Load())
	}
	// Let the relay move every job to the queue, then stop the core's relay side by keeping it running
	// (the MTA-only process below needs the core over RPC for LoadOutbound and ReportDelivery).
	conn, err := connect(ctx, *db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)

	// Phase 2: the MTA drains the queue, either in a process of its own beside the running core (split) or
	// in one process with the core (all, the default shape on one machine).
	var mta *platform
	start := time.Now()
	if *shape == "split" {
		mta, err = startMTAProcess(*bin, *db, core, env)
		if err != nil {
			core.stop()
			return err
		}
		defer mta.stop()
		defer core.stop()
	} else {
		core.stop()
		pprofAddr, err := profileAddr(*cpuProfile != "")
		if err != nil {
			return err
		}
		allEnv := env
		if pprofAddr != "" {
			allEnv = append(slices.Clone(env), "POSTMILL_PPROF_ADDR="+pprofAddr)
		}
		mta, err = startPlatform(platformOpts{bin: *bin, db: *db, targets: "all", zone: z, env: allEnv})
		if err != nil {
			return err
		}
		defer mta.stop()
		start = time.Now() // timed from readiness: process start-up is not delivery
		if pprofAddr != "" {
			stop := captureProfile(pprofAddr, *cpuProfile, 0, *profileSecs)
			defer func() {
				if err := stop(); err != nil {
					fmt.Println("  cpu profile:", err)
				}
			}()
		}
	}
	var before int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM recipients WHERE status = 'delivered'").Scan(&before); err != nil {
		return err
	}
	pids := []int{mta.cmd.Process.Pid}
	if *shape == "split" {
		pids = append(pids, core.cmd.Process.Pid)
	}
	cpu := startCPUMeter(ctx, *db, pids)
	deadline := time.Now().Add(10 * time.Minute)
	// The in-process sink's count first: a count of recipients reads the whole table, and polled all along
	// it took a share of the cores the drain is measured on.
	for inProcess != nil && inProcess.count.Load() < int64(*messages) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	var delivered int64
	for {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM recipients WHERE status = 'delivered'").Scan(&delivered); err != nil {
			return err
		}
		if delivered >= int64(*messages) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d delivered after 10 minutes\n%s", delivered, *messages, mta.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)
	timed := delivered - before // deliveries made while the clock ran
	cpuLine := cpu.report(ctx, timed)
	totalCPU := cpu.perMessage(ctx, timed)
	ceilingAfter, sigCPUAfter, err := rsaMeasure(*rsaFor) // the machine's load changes: see runE2E
	if err != nil {
		return err
	}
	ceiling := (ceilingBefore + ceilingAfter) / 2
	sigCPU = (sigCPU + sigCPUAfter) / 2
	label := *shape
	if *rtt > 0 {
		label += fmt.Sprintf(", MX round trip %s", *rtt)
	}
	if !*chunking {
		label += ", sink without CHUNKING"
	}
	if *tracked {
		label += ", tracked"
	}
	conc := "default concurrency"
	if *concurrency > 0 {
		conc = fmt.Sprintf("concurrency %d", *concurrency)
	}
	rate := float64(timed) / elapsed.Seconds()
	fmt.Printf("summary: drain %s: %.0f msg/s = %.0f%% of the RSA ceiling (%.0f/s); CPU yardstick %.0f%%\n", label, rate, 100*rate/ceiling, ceiling,
		yardstick(sigCPU, totalCPU))
	fmt.Printf("mta drain (%s): %d messages DKIM-signed (RSA-2048) and delivered in %.1fs = %.0f msg/s = %.0f%% of the RSA ceiling (%.0f/s, mean of before and after; %s); %s\n",
		label, timed, elapsed.Seconds(), rate, 100*rate/ceiling, ceiling, conc, machine())
	fmt.Println(cpuLine)
	if totalCPU > 0 {
		fmt.Printf("  CPU yardstick: a signature costs %.3f ms of CPU, a delivery %.3f ms in all: with both cores to itself the MTA would drain at %.0f%% of the RSA ceiling\n",
			ms(sigCPU), ms(totalCPU), 100*float64(sigCPU)/float64(totalCPU))
	}
	return nil
}

// startMTAProcess runs `postmill serve --target=mta` against the core of p (over Connect).
func startMTAProcess(bin, db string, core *platform, env []string) (*platform, error) {
	rpc := core.rpcURL()
	if rpc == "" {
		return nil, errors.New("core rpc address unknown")
	}
	dataDir, err := os.MkdirTemp("", "postmill-bench-mta-")
	if err != nil {
		return nil, err
	}
	p := &platform{logs: &bytes.Buffer{}, dataDir: dataDir}
	p.cmd = exec.Command(bin, "serve", "--target=mta")
	p.cmd.Env = append(os.Environ(), append(env,
		"POSTMILL_DATABASE_URL="+db,
		"POSTMILL_CORE_URL="+rpc,
		"POSTMILL_METRICS_ADDR=127.0.0.1:0",
		"POSTMILL_DATA_DIR="+dataDir,
		"POSTMILL_SECRET_KEY=bench-secret-key-0123456789abcdef",
		"POSTMILL_LOG_LEVEL=warn",
	)...)
	p.cmd.Env = append(p.cmd.Env, "POSTMILL_DNS_RESOLVER="+envValue(core.cmd.Env, "POSTMILL_DNS_RESOLVER"))
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		_ = os.RemoveAll(dataDir)
		return nil, err
	}
	return p, nil
}

func (p *platform) rpcURL() string {
	if v := envValue(p.cmd.Env, "POSTMILL_RPC_ADDR"); v != "" {
		return "http://" + v
	}
	return ""
}

func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}
