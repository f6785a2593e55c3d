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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// runThrottle measures per-destination shaping (mta/site.go): how fast the MTA drains one site's messages
// (rcpt.example) alone; then beside as many messages to a second site (slow.example) that accepts every
// connection; then beside as many to the second site answering 421 to every other connection; then alone
// once more. The drains happen in one run, against the in-process sink (the second site is a proxy on
// 127.0.0.2 in front of the same sink), and the results are ratios next to the RSA ceiling measured in the
// same run: the machine is shared and noisy, so only figures of one run are compared. The drain beside the healthy
// second site is the control: on a machine whose cores the MTA saturates, any second site's deliveries
// take CPU from the first; what throttling must not do is cost more than that.
//
//	postmill-bench throttle -bin bin/postmill -db URL [-messages 3000]
func runThrottle(args []string) error {
	fs := flag.NewFlagSet("throttle", flag.ExitOnError)
	bin := fs.String("bin", "bin/postmill", "postmill binary")
	db := fs.String("db", "", "PostgreSQL URL (its public schema is reset)")
	messages := fs.Int("messages", 3000, "messages to the well-behaved site in each drain (and to the throttling site in the second)")
	rsaFor := fs.Duration("rsa", 3*time.Second, "how long the RSA ceiling is measured")
	backlog := fs.Duration("backlog", 0, "then watch -messages jobs to the throttling site alone for this long: hand-outs and CPU (0: skip)")
	rtt := fs.Duration("rtt", 0, "the sink waits this long before each write of replies, as a network round trip would (both sites)")
	_ = fs.Parse(args)
	ctx := context.Background()
	if err := resetDatabase(ctx, *db); err != nil {
		return err
	}
	ceilingBefore, _, err := rsaMeasure(*rsaFor)
	if err != nil {
		return err
	}
	s, err := startSink(true, true)
	if err != nil {
		return err
	}
	defer s.close()
	s.rtt = *rtt
	_, port, _ := net.SplitHostPort(s.addr())
	thr, err := startThrottler(net.JoinHostPort("127.0.0.2", port), s.addr())
	if err != nil {
		return err
	}
	defer thr.close()
	z, err := startZone()
	if err != nil {
		return err
	}
	z.mx["rcpt.example"], z.a["mx.rcpt.example"] = "mx.rcpt.example", net.ParseIP("127.0.0.1")
	z.mx["slow.example"], z.a["mx.slow.example"] = "mx.slow.example", net.ParseIP("127.0.0.2")
	env := []string{"POSTMILL_MTA_PORT=" + port, "POSTMILL_MTA_ALLOW_NETS=127.0.0.1,127.0.0.2"}
	conn, err := connect(ctx, *db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	count := func(domain, status string) (n int64) {
		_ = conn.QueryRow(ctx, "SELECT count(*) FROM recipients WHERE domain = $1 AND status = $2", domain, status).Scan(&n)
		return n
	}

	var creds *platform
	var slowDone, slowQueued, slowHandouts, slowBackoffs int64
	// drain queues the given messages with edge and core only, then starts the whole platform and times how
	// long the MTA takes to deliver the rcpt.example ones.
	var total float64
	var cpuPer time.Duration
	drain := func(perDomain map[string]int, throttling bool) (rate float64, err error) {
		thr.throttling.Store(throttling)
		slowBefore := count("slow.example", "delivered")
		core, err := startPlatform(platformOpts{bin: *bin, db: *db, targets: "edge,core", zone: z, env: env})
		if err != nil {
			return 0, err
		}
		if creds == nil {
			if err := core.setup(z); err != nil {
				core.stop()
				return 0, err
			}
			creds = core
		} else {
			core.key, core.domain, core.access, core.domainID = creds.key, creds.domain, creds.access, creds.domainID
		}
		err = queueTo(core, perDomain)
		core.stop()
		if err != nil {
			return 0, err
		}
		before, arrivedBefore := count("rcpt.example", "delivered"), s.arrivedFor("rcpt.example")
		p, err := startPlatform(platformOpts{bin: *bin, db: *db, targets: "all", zone: z, env: env})
		if err != nil {
			return 0, err
		}
		defer p.stop()
		cpu := startCPUMeter(ctx, *db, []int{p.cmd.Process.Pid})
		start := time.Now()
		deadline := start.Add(10 * time.Minute)
		want := before + int64(perDomain["rcpt.example"])
		// The sink's count first: a count of recipients reads the whole table, and polled all along it
		// took a share of the cores the drain is measured on, larger in each later drain.
		for s.arrivedFor("rcpt.example")-arrivedBefore < int64(perDomain["rcpt.example"]) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		for count("rcpt.example", "delivered") < want {
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("rcpt.example: only %d of %d delivered after 10 minutes\n%s", count("rcpt.example", "delivered")-before, perDomain["rcpt.example"], p.logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		elapsed := time.Since(start).Seconds()
		rate = float64(perDomain["rcpt.example"]) / elapsed
		// Both sites together while the first drained: what the machine delivered, whoever to.
		both := int64(perDomain["rcpt.example"]) + count("slow.example", "delivered") - slowBefore
		total = float64(both) / elapsed
		// CPU per message delivered, whoever to: unlike the rates, hardly changed by the machine's other load.
		cpuPer = cpu.perMessage(ctx, both)
		fmt.Printf("throttle: drain %v: %d delivered in %.1fs (rcpt.example %d)\n%s\n", perDomain, both, elapsed, perDomain["rcpt.example"], cpu.report(ctx, both))
		// The second site's jobs still queued, and how often they were handed out so far: a throttled job
		// handed back and received again costs a lease and a hand-back each time.
		_ = conn.QueryRow(ctx, "SELECT count(*), coalesce(sum(deliveries), 0) FROM delivery_queue WHERE domain = 'slow.example'").Scan(&slowQueued, &slowHandouts)
		slowBackoffs = int64(strings.Count(p.logs.String(), "backing off"))
		if n := int64(perDomain["slow.example"]); n > 0 && !throttling {
			// Untimed: the healthy site's messages all go before the next drain, which must not find them.
			for count("slow.example", "delivered")-slowBefore < n && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
		}
		slowDone = count("slow.example", "delivered") - slowBefore
		return rate, nil
	}

	alone, err := drain(map[string]int{"rcpt.example": *messages}, false)
	if err != nil {
		return err
	}
	totalAlone, cpuAlone := total, cpuPer
	healthy, err := drain(map[string]int{"rcpt.example": *messages, "slow.example": *messages}, false)
	if err != nil {
		return err
	}
	totalHealthy, cpuHealthy := total, cpuPer
	connsBefore := thr.conns.Load()
	beside, err := drain(map[string]int{"rcpt.example": *messages, "slow.example": *messages}, true)
	if err != nil {
		return err
	}
	slowDelivered := slowDone
	cpuThrottling, totalThrottling := cpuPer, total
	queued, handouts, backoffs := slowQueued, slowHandouts, slowBackoffs
	// The throttling site's jobs still queued would be delivered during the last drain: they are dropped.
	if _, err := conn.Exec(ctx, "DELETE FROM delivery_queue WHERE domain = 'slow.example'"); err != nil {
		return err
	}
	// The drain alone once more, after the others: the machine is shared, and the mean of the drain alone
	// before and after is what the others are compared with, like the RSA ceiling.
	alone2, err := drain(map[string]int{"rcpt.example": *messages}, false)
	if err != nil {
		return err
	}
	totalAlone2 := total
	fmt.Printf("throttle: CPU per delivered message (Postmill, its PostgreSQL backends, sink): alone %.3f ms and %.3f ms, beside the healthy site %.3f ms, beside the throttling site %.3f ms\n",
		ms(cpuAlone), ms(cpuPer), ms(cpuHealthy), ms(cpuThrottling))
	fmt.Printf("throttle: alone before %.0f msg/s, after %.0f msg/s\n", alone, alone2)
	alone, totalAlone = (alone+alone2)/2, (totalAlone+totalAlone2)/2
	slowQueued, slowHandouts, slowBackoffs = queued, handouts, backoffs
	fmt.Printf("throttle: both sites together while rcpt.example drained: alone %.0f msg/s, beside the healthy site %.0f msg/s, beside the throttling site %.0f msg/s (%.0f%% of alone)\n",
		totalAlone, totalHealthy, totalThrottling, 100*totalThrottling/totalAlone)
	fmt.Printf("throttle: when rcpt.example was done, slow.example had %d jobs queued, handed out %d times so far; %d back-offs logged\n",
		slowQueued, slowHandouts, slowBackoffs)
	if *backlog > 0 {
		if err := watchBacklog(ctx, *bin, *db, z, env, creds, thr, conn, *messages, *backlog); err != nil {
			return err
		}
	}
	ceilingAfter, _, err := rsaMeasure(*rsaFor)
	if err != nil {
		return err
	}
	ceiling := (ceilingBefore + ceilingAfter) / 2
	fmt.Printf("summary: throttle: one site drains at %.0f msg/s beside a site answering 421 to half its connections, %.0f msg/s beside the same site healthy (= %.0f%%), %.0f msg/s alone (= %.0f%%); RSA ceiling %.0f/s; MX round trip %s\n",
		beside, healthy, 100*beside/healthy, alone, 100*beside/alone, ceiling, *rtt)
	fmt.Printf("throttle: %d messages to rcpt.example: alone %.0f msg/s (%.0f%% of the RSA ceiling); beside %d to a healthy slow.example %.0f msg/s (%.0f%%); "+
		"beside %d to slow.example answering 421 to every other connection %.0f msg/s (%.0f%%), slow.example having %d delivered by then and refused %d of %d connections; %s\n",
		*messages, alone, 100*alone/ceiling, *messages, healthy, 100*healthy/ceiling, *messages, beside, 100*beside/ceiling,
		slowDelivered, thr.refused.Load(), thr.conns.Load()-connsBefore, machine())
	return nil
}

// watchBacklog queues messages to the throttling site only, runs the platform for d and reports what its
// backlog cost: deliveries, how often the jobs still queued were handed out (each a lease and a hand-back
// when the site's lane is full) and the CPU of Postmill and PostgreSQL meanwhile. With no other traffic the
// MTA's workers are free to receive the throttled jobs again as soon as they come back.
func watchBacklog(ctx context.Context, bin, db string, z *zone, env []string, creds *platform, thr *throttler, conn *pgx.Conn, messages int, d time.Duration) error {
	thr.throttling.Store(true)
	core, err := startPlatform(platformOpts{bin: bin, db: db, targets: "edge,core", zone: z, env: env})
	if err != nil {
		return err
	}
	core.key, core.domain, core.access, core.domainID = creds.key, creds.domain, creds.access, creds.domainID
	err = queueTo(core, map[string]int{"slow.example": messages})
	core.stop()
	if err != nil {
		return err
	}
	var before int64
	_ = conn.QueryRow(ctx, "SELECT count(*) FROM recipients WHERE domain = 'slow.example' AND status = 'delivered'").Scan(&before)
	p, err := startPlatform(platformOpts{bin: bin, db: db, targets: "all", zone: z, env: env})
	if err != nil {
		return err
	}
	cpu := startCPUMeter(ctx, db, []int{p.cmd.Process.Pid})
	time.Sleep(d)
	var after, queued, handouts int64
	_ = conn.QueryRow(ctx, "SELECT count(*) FROM recipients WHERE domain = 'slow.example' AND status = 'delivered'").Scan(&after)
	_ = conn.QueryRow(ctx, "SELECT count(*), coalesce(sum(deliveries), 0) FROM delivery_queue WHERE domain = 'slow.example'").Scan(&queued, &handouts)
	report := cpu.report(ctx, after-before)
	p.stop()
	fmt.Printf("throttle: %d messages to the throttling site alone, watched for %s: %d delivered; the %d still queued were handed out %d times (%.1f each); %d back-offs logged\n%s\n",
		messages, d, after-before, queued, handouts, float64(handouts)/float64(max(queued, 1)), strings.Count(p.logs.String(), "backing off"), report)
	_, err = conn.Exec(ctx, "DELETE FROM delivery_queue WHERE domain = 'slow.example'")
	return err
}

// queueTo sends perDomain[d] messages to user@d for every d through the API, the domains interleaved.
func queueTo(p *platform, perDomain map[string]int) error {
	var order []string
	for left := true; left; {
		left = false
		for d, n := range perDomain {
			if n > 0 {
				order = append(order, d)
				perDomain[d] = n - 1
				left = true
			}
		}
	}
	for _, d := range order {
		perDomain[d]++
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	next := atomic.Int64{}
	for range 32 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(order)) {
					return
				}
				body, _ := json.Marshal(map[string]any{"from": "bench@" + p.domain, "to": "user@" + order[i], "subject": "Throttle benchmark", "text": "Hello from the benchmark."})
				req, _ := http.NewRequest("POST", p.base+"/v1/emails", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+p.key)
				res, err := p.client.Do(req)
				if err != nil || res.StatusCode != 202 {
					failed.Add(1)
				}
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		return fmt.Errorf("%d sends failed while queueing", failed.Load())
	}
	return nil
}

// throttler is an MX that, while throttling, answers 421 to every other connection; it passes the others
// to a real sink.
type throttler struct {
	ln             net.Listener
	throttling     atomic.Bool // off: every connection is passed on
	conns, refused atomic.Int64
}

func startThrottler(addr, sink string) (*throttler, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	t := &throttler{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if t.conns.Add(1)%2 == 1 && t.throttling.Load() {
				t.refused.Add(1)
				_, _ = io.WriteString(c, "421 4.7.0 Too many connections, try again later\r\n")
				_ = c.Close()
				continue
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", sink)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); _ = up.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return t, nil
}

func (t *throttler) close() { _ = t.ln.Close() }
