package mta_test

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

// throttlingServer is a minimal SMTP server on a loopback socket whose refuse decides, per connection,
// whether it answers the greeting with 421 and hangs up (a receiver throttling the sender) or serves
// the session. It counts connections refused and messages accepted.
type throttlingServer struct {
	l        net.Listener
	refuse   func(conn int) bool
	conns    atomic.Int64
	refused  atomic.Int64
	accepted atomic.Int64
}

func mustThrottlingServer(tb testing.TB, addr string, refuse func(conn int) bool) *throttlingServer {
	tb.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	s := &throttlingServer{l: l, refuse: refuse}
	var wg sync.WaitGroup
	tb.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := int(s.conns.Add(1))
			wg.Go(func() { defer c.Close(); s.serve(c, n) })
		}
	})
	return s
}

func (s *throttlingServer) Port() int { return s.l.Addr().(*net.TCPAddr).Port }

func (s *throttlingServer) serve(c net.Conn, n int) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	say := func(line string) { _, _ = io.WriteString(c, line+"\r\n") }
	if s.refuse(n) {
		s.refused.Add(1)
		say("421 4.7.0 Try again later, closing connection")
		return
	}
	say("220 throttle.test ESMTP")
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		verb, _, _ := strings.Cut(strings.ToUpper(strings.TrimSpace(line)), " ")
		verb, _, _ = strings.Cut(verb, ":")
		switch verb {
		case "EHLO", "HELO":
			say("250-throttle.test")
			say("250 8BITMIME")
		case "MAIL", "RCPT", "RSET", "NOOP":
			say("250 ok")
		case "DATA":
			say("354 go ahead")
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
			}
			s.accepted.Add(1)
			say("250 ok queued")
		case "QUIT":
			say("221 bye")
			return
		default:
			say("502 unknown command")
		}
	}
}

// siteState returns the state of the named site, and whether it was seen.
func siteState(m *mta.MTA, name string) (mta.SiteState, bool) {
	for _, s := range m.Sites() {
		if s.Name == name {
			return s, true
		}
	}
	return mta.SiteState{}, false
}

// TestSiteBacksOffOn421AndRecovers: a site whose server answers 421 to every greeting is backed off —
// fewer connections, a rate where it had none, a back-off counted in the metrics — and, once the server
// accepts again, the site gets its connections back step by step and its rate limit lifted. Nothing is
// timed: the recovery is polled for.
func TestSiteBacksOffOn421AndRecovers(t *testing.T) {
	t.Parallel()
	var throttling atomic.Bool
	throttling.Store(true)
	srv := mustThrottlingServer(t, "127.0.0.1:0", func(int) bool { return throttling.Load() })
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx1.rcpt.test"}).IP("mx1.rcpt.test", "127.0.0.1")
	cfg := baseConfig(srv.Port())
	cfg.Concurrency = 8
	cfg.Shaping = &mta.Shaping{
		Sites:    []mta.SiteRule{{Name: "rcpt", MXSuffixes: []string{"rcpt.test"}, Connections: 8}},
		Adaptive: mta.AdaptiveShaping{Hold: time.Hour, RecoverEvery: 50 * time.Millisecond, PerConnectionRate: 10},
	}
	reg := prometheus.NewRegistry()
	h := newHarness(t, cfg, r, func(d *mta.Deps) { d.Registerer = reg }).start()

	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if o := rep.Recipients[0]; o.Kind != ports.OutcomeDeferred || !strings.HasPrefix(o.Response, "421") {
		t.Fatalf("outcome %+v, want deferred with the 421", o)
	}
	down, ok := siteState(h.MTA, "rcpt")
	if !ok || down.Backoffs != 1 || down.Connections >= 8 || down.Rate <= 0 || down.MaxConnections != 8 || down.MaxRate != 0 {
		t.Fatalf("site after a 421: %+v, want fewer than 8 connections, a rate and one back-off", down)
	}
	if got := counter(t, reg, "postmill_mta_site_backoffs_total", "rcpt"); got != 1 {
		t.Errorf("postmill_mta_site_backoffs_total{site=rcpt} = %v, want 1", got)
	}
	if got := counter(t, reg, "postmill_mta_site_connections", "rcpt"); got != float64(down.Connections) {
		t.Errorf("postmill_mta_site_connections{site=rcpt} = %v, want %d", got, down.Connections)
	}
	if got := counter(t, reg, "postmill_mta_site_rate", "rcpt"); got != down.Rate {
		t.Errorf("postmill_mta_site_rate{site=rcpt} = %v, want %v", got, down.Rate)
	}

	throttling.Store(false)
	// The site recovers one step per RecoverEvery: connections rise one by one (never above the rule's),
	// and the rate rises until the limit is lifted.
	seen := map[int]bool{down.Connections: true}
	deadline := time.Now().Add(20 * time.Second)
	for {
		rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
		if rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %+v once the server accepts, want delivered", rep.Recipients[0])
		}
		st, _ := siteState(h.MTA, "rcpt")
		seen[st.Connections] = true
		if st.Connections > 8 || st.Backoffs != 1 {
			t.Fatalf("site while recovering: %+v", st)
		}
		if st.Connections == 8 && st.Rate == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("site did not recover: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(seen) < 2 {
		t.Errorf("connection limits seen %v, want the drop and the recovery", seen)
	}
	if got := counter(t, reg, "postmill_mta_site_connections", "rcpt"); got != 8 {
		t.Errorf("postmill_mta_site_connections{site=rcpt} = %v after the recovery, want 8", got)
	}
	if srv.refused.Load() == 0 || srv.accepted.Load() == 0 {
		t.Errorf("server refused %d and accepted %d", srv.refused.Load(), srv.accepted.Load())
	}
}

// TestThrottledSiteDoesNotBlockOtherSites: two sites on two loopback addresses; one answers 421 to every
// other connection. The throttling site is backed off and its jobs are all settled; every message for
// the other site is delivered, and the other site keeps its limits. Deliveries are counted, not timed.
func TestThrottledSiteDoesNotBlockOtherSites(t *testing.T) {
	t.Parallel()
	slow := mustThrottlingServer(t, "127.0.0.1:0", func(n int) bool { return n%2 == 0 })
	port := slow.Port()
	fast := mustThrottlingServer(t, net.JoinHostPort("127.0.0.2", strconv.Itoa(port)), func(int) bool { return false })
	r := newResolver().
		MX("slow.test", ports.MX{Host: "mx.slow.test"}).IP("mx.slow.test", "127.0.0.1").
		MX("fast.test", ports.MX{Host: "mx.fast.test"}).IP("mx.fast.test", "127.0.0.2")
	cfg := baseConfig(port)
	cfg.Concurrency, cfg.Workers = 4, 8
	// Two messages per connection: the throttling site sees many new connections, half of them refused.
	cfg.Shaping = &mta.Shaping{
		Sites:    []mta.SiteRule{{Name: "slow", MXSuffixes: []string{"mx.slow.test"}, MessagesPerConnection: 2}},
		Adaptive: mta.AdaptiveShaping{Hold: time.Hour, RecoverEvery: time.Hour, PerConnectionRate: 50},
	}
	h := newHarness(t, cfg, r).start()

	const perSite = 40
	for range perSite {
		h.Enqueue(outbound(t, "slow.test", "a@slow.test"))
		h.Enqueue(outbound(t, "fast.test", "b@fast.test"))
	}
	delivered := map[string]int{}
	reports := 0
	for reports < 2*perSite {
		rep := h.Report()
		reports++
		if rep.Recipients[0].Kind == ports.OutcomeDelivered {
			delivered[rep.Job.Domain]++
		}
	}
	if delivered["fast.test"] != perSite {
		t.Errorf("delivered to the other site: %d, want %d", delivered["fast.test"], perSite)
	}
	if int(fast.accepted.Load()) != perSite {
		t.Errorf("the other site's server accepted %d, want %d", fast.accepted.Load(), perSite)
	}
	st, _ := siteState(h.MTA, "slow")
	if st.Backoffs == 0 || st.Connections >= 4 {
		t.Errorf("throttling site %+v, want backed off", st)
	}
	if fs, _ := siteState(h.MTA, "mx.fast.test"); fs.Backoffs != 0 || fs.Connections != 4 || fs.Rate != 0 {
		t.Errorf("other site %+v, want its limits untouched", fs)
	}
	if slow.refused.Load() < 2 {
		t.Errorf("the throttling server refused %d connections", slow.refused.Load())
	}
	t.Logf("throttling site: %d delivered, %d refused connections; other site: %d delivered", delivered["slow.test"], slow.refused.Load(), delivered["fast.test"])
}
