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
	// hold delays the reply to each message's data, so that transactions overlap; open counts the
	// transactions under way (from MAIL to the reply to the data) and peak the most at once since it was
	// last reset. A connection carries one transaction at a time, so peak is at most the connections the
	// client had open at once.
	hold       time.Duration
	open, peak atomic.Int64
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
		case "MAIL":
			if o := s.open.Add(1); o > s.peak.Load() {
				for p := s.peak.Load(); o > p && !s.peak.CompareAndSwap(p, o); p = s.peak.Load() {
				}
			}
			say("250 ok")
		case "RCPT", "RSET", "NOOP":
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
			time.Sleep(s.hold)
			s.accepted.Add(1)
			s.open.Add(-1) // before the reply: the client may start its next transaction once it has it
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
		Adaptive: mta.AdaptiveShaping{Hold: time.Hour, RecoverEvery: 500 * time.Millisecond, PerConnectionRate: 10},
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

// TestThrottlingSiteGetsFewerConnectionsAndRecovers: what the receiving server sees. One message per
// connection and a server that takes a while to accept each, so that transactions overlap: healthy, it
// sees up to the site's 8 transactions at once; once it answers 421 to every other connection the site is
// backed off and the server never sees more transactions at once than the lowered limit, fewer than
// before; when it stops refusing, the site's limit climbs back and the server sees more at once again.
// Transactions are counted, not timed; the recovery is polled for.
func TestThrottlingSiteGetsFewerConnectionsAndRecovers(t *testing.T) {
	t.Parallel()
	var throttling atomic.Bool
	srv := mustThrottlingServer(t, "127.0.0.1:0", func(n int) bool { return throttling.Load() && n%2 == 0 })
	srv.hold = 50 * time.Millisecond
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx1.rcpt.test"}).IP("mx1.rcpt.test", "127.0.0.1")
	cfg := baseConfig(srv.Port())
	cfg.Concurrency, cfg.Workers = 8, 32
	cfg.Shaping = &mta.Shaping{
		Sites:    []mta.SiteRule{{Name: "rcpt", MXSuffixes: []string{"rcpt.test"}, Connections: 8, MessagesPerConnection: 1}},
		Adaptive: mta.AdaptiveShaping{Hold: time.Hour, RecoverEvery: 500 * time.Millisecond},
	}
	h := newHarness(t, cfg, r).start()
	const messages = 40
	// burst sends messages at once and returns how many were delivered and the most transactions the
	// server had under way at once meanwhile.
	burst := func() (delivered int, peak int64) {
		srv.peak.Store(0)
		for range messages {
			h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
		}
		for range messages {
			if h.Report().Recipients[0].Kind == ports.OutcomeDelivered {
				delivered++
			}
		}
		return delivered, srv.peak.Load()
	}

	n, healthy := burst()
	if n != messages || healthy > 8 {
		t.Fatalf("healthy: %d delivered, %d transactions at once; want %d delivered, at most 8 at once", n, healthy, messages)
	}

	throttling.Store(true)
	for i := 0; ; i++ { // until a connection is refused and the site backed off
		rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
		if rep.Recipients[0].Kind == ports.OutcomeDeferred {
			break
		}
		if i == 5 {
			t.Fatal("the server's 421s were never seen")
		}
	}
	down, _ := siteState(h.MTA, "rcpt")
	if down.Backoffs != 1 || down.Connections != 4 || down.Rate <= 0 {
		t.Fatalf("site after the 421: %+v, want one back-off to 4 connections and a rate", down)
	}
	n, throttled := burst()
	if throttled > int64(down.Connections) || throttled >= healthy {
		t.Fatalf("while throttling the server had %d transactions at once (%d when healthy); want at most the lowered limit %d",
			throttled, healthy, down.Connections)
	}
	if n == 0 || srv.refused.Load() < 2 {
		t.Fatalf("while throttling: %d delivered, %d connections refused", n, srv.refused.Load())
	}

	throttling.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for st, _ := siteState(h.MTA, "rcpt"); st.Connections < 8 || st.Rate != 0; st, _ = siteState(h.MTA, "rcpt") {
		if time.Now().After(deadline) {
			t.Fatalf("site did not recover: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n, recovered := burst()
	if n != messages || recovered <= throttled || recovered > 8 {
		t.Fatalf("recovered: %d delivered, %d transactions at once (%d while throttling); want %d delivered, more transactions at once, at most 8",
			n, recovered, throttled, messages)
	}
	t.Logf("transactions at once: healthy %d, throttling %d, recovered %d", healthy, throttled, recovered)
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

// TestThrottledHandBackIsNotAnAttempt: a site with a rate and a one-job lane gets more jobs at once than
// its lane holds. The jobs beyond it go back to the queue until their turn (at least a second), and a
// hand-back is not a delivery attempt: no report is made for it, each job is reported once, delivered,
// with its attempt number unchanged, and the queue does not count the hand-backs among its deliveries.
func TestThrottledHandBackIsNotAnAttempt(t *testing.T) {
	t.Parallel()
	srv := mustThrottlingServer(t, "127.0.0.1:0", func(int) bool { return false })
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx1.rcpt.test"}).IP("mx1.rcpt.test", "127.0.0.1")
	cfg := baseConfig(srv.Port())
	cfg.Shaping = &mta.Shaping{
		Sites:    []mta.SiteRule{{Name: "rcpt", MXSuffixes: []string{"rcpt.test"}, Rate: 10, Burst: 1}},
		Adaptive: mta.AdaptiveShaping{LaneWait: 50 * time.Millisecond, LaneJobs: 1},
	}
	h := newHarness(t, cfg, r).start()
	const jobs = 8
	ids := map[string]bool{}
	for range jobs {
		out := outbound(t, "rcpt.test", "a@rcpt.test")
		ids[out.Job.ID] = true
		h.Enqueue(out)
	}
	reported := map[string]int{}
	for range jobs {
		rep := h.Report()
		reported[rep.Job.ID]++
		if o := rep.Recipients[0]; o.Kind != ports.OutcomeDelivered || rep.Job.Attempt != 1 {
			t.Fatalf("job %s: %s at attempt %d, want delivered at attempt 1", rep.Job.ID, o.Kind, rep.Job.Attempt)
		}
	}
	handBacks, acks := 0, 0
	for acks < jobs {
		s := h.Settled()
		switch {
		case s.Ack:
			acks++
			if s.Deliveries != 1 {
				t.Errorf("job %s acked at its delivery %d, want 1: a hand-back counted as a try", s.JobID, s.Deliveries)
			}
		case s.HandedBack && s.Dead == "" && s.Delay >= time.Second:
			handBacks++
		default:
			t.Fatalf("settlement %+v: want an ack or a hand-back of at least a second", s)
		}
	}
	for id := range ids {
		if reported[id] != 1 {
			t.Errorf("job %s reported %d times, want once", id, reported[id])
		}
	}
	if handBacks == 0 {
		t.Error("no job was handed back: the lane held them all")
	}
	if int(srv.accepted.Load()) != jobs {
		t.Errorf("server accepted %d messages, want %d", srv.accepted.Load(), jobs)
	}
}
