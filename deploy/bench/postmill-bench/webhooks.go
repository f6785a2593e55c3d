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
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// runWebhooks measures webhook deliveries per second into a local receiver (127.0.0.1, the one
// allow-listed address) and the delay from each event's created_at to its first attempt. Sandbox sends
// produce two events each (queued, sent); every endpoint subscribes to both. With -rate 0 the sends go as
// fast as the API takes them (the dispatcher's ceiling); with -rate N they are paced at N sends/s (the
// delay at a steady load).
func runWebhooks(args []string) error {
	fs := flag.NewFlagSet("webhooks", flag.ExitOnError)
	bin := fs.String("bin", "bin/postmill", "postmill binary")
	db := fs.String("db", "", "PostgreSQL URL (its public schema is reset)")
	endpoints := fs.Int("endpoints", 4, "endpoints, each subscribed to email.queued and email.sent")
	sends := fs.Int("sends", 4000, "sandbox sends")
	rate := fs.Int("rate", 0, "sends per second (0 = as fast as possible)")
	_ = fs.Parse(args)
	ctx := context.Background()
	if err := resetDatabase(ctx, *db); err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		delays []time.Duration
		first  time.Time
		last   time.Time
		seen   = map[string]bool{}
	)
	want := *sends * 2 * *endpoints
	done := make(chan struct{})
	recv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		now := time.Now()
		var ev struct {
			CreatedAt time.Time `json:"created_at"`
		}
		_ = json.Unmarshal(body, &ev)
		key := r.URL.Path + " " + r.Header.Get("X-Service-Event-Id")
		mu.Lock()
		if !seen[key] {
			seen[key] = true
			if first.IsZero() {
				first = now
			}
			last = now
			delays = append(delays, now.Sub(ev.CreatedAt))
			if len(seen) == want {
				close(done)
			}
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = recv.Serve(ln) }()
	defer recv.Close()

	z, err := startZone()
	if err != nil {
		return err
	}
	z.a["hooks.bench.example"] = net.ParseIP("127.0.0.1")
	p, err := startPlatform(platformOpts{bin: *bin, db: *db, targets: "edge,core", zone: z,
		env: []string{"POSTMILL_WEBHOOK_ALLOW_NETS=127.0.0.1/32"}})
	if err != nil {
		return err
	}
	defer p.stop()
	if err := p.setup(z); err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	for i := range *endpoints {
		st, body, err := p.call("POST", "/v1/webhooks", p.key, map[string]any{
			"url": fmt.Sprintf("http://hooks.bench.example:%d/e%d", port, i), "eventTypes": []string{"email.queued", "email.sent"}})
		if err != nil || st != 201 {
			return fmt.Errorf("endpoint: %d %v %v", st, body, err)
		}
	}
	payload, _ := json.Marshal(map[string]any{"from": "bench@" + p.domain, "to": "user@rcpt.example", "subject": "Webhook benchmark", "text": "x", "sandbox": true})
	var wg sync.WaitGroup
	var next atomic.Int64
	var failed atomic.Int64
	var tick <-chan time.Time
	if *rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(*rate))
		defer t.Stop()
		tick = t.C
	}
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(*sends) {
				if tick != nil {
					<-tick
				}
				req, _ := http.NewRequest("POST", p.base+"/v1/emails", bytes.NewReader(payload))
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
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		return fmt.Errorf("%d sends failed", failed.Load())
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		mu.Lock()
		defer mu.Unlock()
		return fmt.Errorf("only %d of %d deliveries arrived", len(seen), want)
	}
	mu.Lock()
	defer mu.Unlock()
	p.reportLogs()
	slices.Sort(delays)
	elapsed := last.Sub(first)
	mode := "as fast as the API takes sends"
	if *rate > 0 {
		mode = fmt.Sprintf("%d sends/s offered", *rate)
	}
	fmt.Printf("webhooks (%s): %d deliveries to %d endpoints in %.1fs = %.0f deliveries/s; delay event→first attempt p50 %.0fms, p99 %.0fms, max %.0fms; %s\n",
		mode, len(seen), *endpoints, elapsed.Seconds(), float64(len(seen))/elapsed.Seconds(),
		ms(percentile(delays, 0.5)), ms(percentile(delays, 0.99)), ms(delays[len(delays)-1]), machine())
	return nil
}
