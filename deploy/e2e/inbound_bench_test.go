package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/smtp"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// Inbound throughput beside Postfix (docs/benchmarks.md, Inbound): 20 concurrent senders of 20 KB
// messages with one attachment, into Postmill's MX listener (accept, store, parse, route) and into a private
// Postfix smtpd (accept into its queue) on the same machine in the same run, in rounds that alternate which
// goes first (POSTMILL_INBOUND_BENCH_ROUNDS, 4 by default); then the latency from the end
// of DATA to the route's email.received webhook at half Postmill's rate. It runs only with
// POSTMILL_INBOUND_BENCH=1: it takes the machine's CPUs for a while.

const (
	benchRounds   = 4
	benchSenders  = 20
	benchPerConn  = 40
	benchAttBytes = 13 << 10
)

// benchMessage is a ~20 KB message with one attachment, unique per (sender, n).
func benchMessage(rcpt string, sender, n int) []byte {
	att := make([]byte, benchAttBytes)
	for i := range att {
		att[i] = byte('a' + (i+sender+n)%26)
	}
	b64 := base64.StdEncoding.EncodeToString(att)
	var lines []string
	for len(b64) > 76 {
		lines = append(lines, b64[:76])
		b64 = b64[76:]
	}
	lines = append(lines, b64)
	body := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 30)
	return []byte(strings.ReplaceAll(fmt.Sprintf("From: Bench <bench@sender.example>\nTo: %s\nSubject: bench %d-%d\n"+
		"Message-ID: <bench-%d-%d-%d@sender.example>\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n"+
		"--b\nContent-Type: text/plain; charset=utf-8\n\n%s\n--b\nContent-Type: application/octet-stream\n"+
		"Content-Disposition: attachment; filename=\"data.bin\"\nContent-Transfer-Encoding: base64\n\n%s\n--b--\n",
		rcpt, sender, n, sender, n, time.Now().UnixNano(), body, strings.Join(lines, "\n")), "\n", "\r\n"))
}

// blast sends perConn messages on each of senders connections to addr, pacing each connection to one
// message per gap (0: as fast as it goes), and returns the elapsed time and each message's DATA end by
// subject.
func blast(t *testing.T, addr, rcpt string, senders, perConn int, gap time.Duration) (time.Duration, map[string]time.Time) {
	t.Helper()
	var mu sync.Mutex
	ends := map[string]time.Time{}
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	start := time.Now()
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := smtp.Dial(addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			if err := c.Hello("bench.example"); err != nil {
				errs <- err
				return
			}
			next := time.Now()
			for n := range perConn {
				if gap > 0 {
					time.Sleep(time.Until(next))
					next = next.Add(gap)
				}
				msg := benchMessage(rcpt, s, n)
				if err := c.Mail("bench@sender.example"); err != nil {
					errs <- err
					return
				}
				if err := c.Rcpt(rcpt); err != nil {
					errs <- err
					return
				}
				wc, err := c.Data()
				if err != nil {
					errs <- err
					return
				}
				if _, err := wc.Write(msg); err != nil {
					errs <- err
					return
				}
				if err := wc.Close(); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				ends[fmt.Sprintf("bench %d-%d", s, n)] = time.Now()
				mu.Unlock()
			}
			_ = c.Quit()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("sending to %s: %v", addr, err)
	}
	return time.Since(start), ends
}

func TestInboundBenchmark(t *testing.T) {
	if os.Getenv("POSTMILL_INBOUND_BENCH") == "" {
		t.Skip("set POSTMILL_INBOUND_BENCH=1 to measure inbound throughput beside Postfix")
	}
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var p struct {
			Data struct {
				Email struct {
					Subject string `json:"subject"`
				} `json:"received_email"`
			} `json:"data"`
		}
		_ = json.Unmarshal(b, &p)
		mu.Lock()
		arrived[p.Data.Email.Subject] = time.Now()
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)

	dns := dnstest.New(t)
	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	cfg.InboundMXHost = inboundMXHost
	cfg.SMTPMaxConnections = 4 * benchSenders
	cfg.SMTPMaxConnectionsPerIP = 4 * benchSenders
	cfg.WebhookAllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	w := &inboundWorld{env: MustStart(t, cfg, "all"), dns: dns}
	w.owner = w.MustSignup("owner@acme.example", "")
	_, w.key = w.MustKey(w.owner, []string{ports.ScopeInboundRead})
	domain := func(name, action, dest string) string {
		id := expect(t, w.post("/v1/inbound/domains", w.owner.access, map[string]any{"domain": name}), 201).str("id")
		dns.SetMX(name, ports.MX{Host: inboundMXHost, Preference: 10})
		expect(t, w.post("/v1/inbound/domains/"+id+"/verify", w.owner.access, nil), 201)
		body := map[string]any{"inboundDomainId": id, "matchType": "catch_all", "action": action}
		if dest != "" {
			body["destination"] = dest
		}
		expect(t, w.post("/v1/inbound/routes", w.owner.access, body), 201)
		return name
	}
	stored := domain("store-"+randomHex(t, 3)+".bench.example", "store", "")
	hooked := domain("hook-"+randomHex(t, 3)+".bench.example", "webhook", hook.URL)
	pf := MustPostfix(t, postfixConfig{Transports: map[string]string{"queue.bench.example": "discard:"}})

	// Rounds alternate which server goes first (Postmill-Postfix, then Postfix-Postmill, ...), so that a
	// shared machine's load, which moves from second to second, falls on both sides alike.
	rounds := benchRounds
	if v, err := strconv.Atoi(os.Getenv("POSTMILL_INBOUND_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	total := benchSenders * benchPerConn
	size := len(benchMessage("x@"+stored, 0, 0))
	var pmTime, pfTime time.Duration
	for r := range rounds {
		var pmElapsed, pfElapsed time.Duration
		if r%2 == 0 {
			pmElapsed, _ = blast(t, w.app.InboundAddr(), "bench@"+stored, benchSenders, benchPerConn, 0)
			pfElapsed, _ = blast(t, pf.addr, "bench@queue.bench.example", benchSenders, benchPerConn, 0)
		} else {
			pfElapsed, _ = blast(t, pf.addr, "bench@queue.bench.example", benchSenders, benchPerConn, 0)
			pmElapsed, _ = blast(t, w.app.InboundAddr(), "bench@"+stored, benchSenders, benchPerConn, 0)
		}
		pmTime, pfTime = pmTime+pmElapsed, pfTime+pfElapsed
		t.Logf("round %d: %d messages of %d bytes from %d senders: Postmill %.0f msg/s, Postfix smtpd %.0f msg/s", r+1,
			total, size, benchSenders, float64(total)/pmElapsed.Seconds(), float64(total)/pfElapsed.Seconds())
	}
	pmRate := float64(rounds*total) / pmTime.Seconds()
	pfRate := float64(rounds*total) / pfTime.Seconds()
	t.Logf("%d rounds: Postmill %.0f msg/s, Postfix smtpd %.0f msg/s (Postmill/Postfix %.2f)", rounds, pmRate, pfRate, pmRate/pfRate)

	// Latency at half Postmill's rate: each connection paced to rate/2/senders messages a second.
	gap := time.Duration(float64(time.Second) * benchSenders / (pmRate / 2))
	_, ends := blast(t, w.app.InboundAddr(), "bench@"+hooked, benchSenders, benchPerConn/2, gap)
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n >= len(ends) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration
	for subject, end := range ends {
		if at, ok := arrived[subject]; ok {
			lat = append(lat, at.Sub(end))
		}
	}
	if len(lat) < len(ends) {
		t.Errorf("%d of %d webhooks arrived", len(lat), len(ends))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(time.Millisecond)
	}
	t.Logf("DATA end → email.received webhook at %.0f msg/s (%d messages): p50 %v, p90 %v, p99 %v, max %v",
		pmRate/2, len(lat), q(0.5), q(0.9), q(0.99), lat[len(lat)-1].Round(time.Millisecond))
}
