package mta

import (
	"strings"
	"testing"
	"time"
)

func TestGCRA(t *testing.T) {
	var g gcra
	g.setRate(10, 3)
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if w := g.reserve(t0); w != 0 {
			t.Fatalf("burst message %d waits %v", i, w)
		}
	}
	if w := g.reserve(t0); w != 100*time.Millisecond {
		t.Fatalf("the fourth waits %v, want 100ms", w)
	}
	if w := g.wait(t0.Add(time.Second)); w != 0 {
		t.Fatalf("after a second of silence the wait is %v", w)
	}
	g.setRate(0, 0)
	if w := g.reserve(t0); w != 0 {
		t.Fatalf("unlimited waits %v", w)
	}
}

func TestSitesRollUpByMX(t *testing.T) {
	sh := (&Shaping{}).withDefaults(Config{Concurrency: 20, IdleConnTimeout: 30 * time.Second, Workers: 128})
	ss := newSites(sh, nil)
	now := time.Now()
	gmail := ss.of([]destination{{host: "gmail-smtp-in.l.google.com"}, {host: "alt1.gmail-smtp-in.l.google.com"}}, now)
	workspace := ss.of([]destination{{host: "aspmx.l.google.com"}}, now)
	googlemail := ss.of([]destination{{host: "gmr-smtp-in.l.googlemail.com"}}, now)
	if gmail != workspace || gmail != googlemail || gmail.name != "google" {
		t.Fatalf("Google's domains are different sites: %q %q %q", gmail.name, workspace.name, googlemail.name)
	}
	if y := ss.of([]destination{{host: "mta5.am0.yahoodns.net"}}, now); y.name != "yahoo" || y.rule.MessagesPerConnection != 20 {
		t.Fatalf("yahoo site %+v", y.rule)
	}
	a := ss.of([]destination{{host: "mx2.example.net"}, {host: "mx1.example.net"}}, now)
	b := ss.of([]destination{{host: "mx1.example.net"}, {host: "mx2.example.net"}}, now)
	if a != b || a.name != "mx1.example.net,mx2.example.net" || a.rule.Connections != 20 {
		t.Fatalf("unnamed sites %q %q, rule %+v", a.name, b.name, a.rule)
	}
	if c := ss.of([]destination{{host: "mx1.example.net"}}, now); c == a {
		t.Fatal("a different MX set shares a site")
	}
}

func TestSiteBackOffAndRecovery(t *testing.T) {
	a := AdaptiveShaping{ErrorBurst: 3, Hold: time.Second, RecoverEvery: 10 * time.Second, PerConnectionRate: 10, LaneWait: time.Second, LaneJobs: 2}
	s := &site{rule: SiteRule{Connections: 20, Burst: 1}, conns: 20}
	t0 := time.Unix(1000, 0)
	if down, conns, rate := s.observe(a, t0, signalThrottled); !down || conns != 10 || rate != 100 {
		t.Fatalf("first 421: down %v, %d connections, rate %v; want 10 and 100 (half of 20 × 10)", down, conns, rate)
	}
	if down, _, _ := s.observe(a, t0.Add(time.Millisecond), signalThrottled); down {
		t.Fatal("a second 421 within the hold backed off again")
	}
	for i := range 2 {
		if down, _, _ := s.observe(a, t0.Add(2*time.Second), signalTempFail); down {
			t.Fatalf("4xx %d backed off before the burst", i)
		}
	}
	if down, conns, rate := s.observe(a, t0.Add(2*time.Second), signalTempFail); !down || conns != 5 || rate != 50 {
		t.Fatalf("burst of 4xx: down %v, %d connections, rate %v", down, conns, rate)
	}
	st := s.state(a, t0.Add(2*time.Second+10*time.Second))
	if st.Connections != 6 || st.Rate != 70 {
		t.Fatalf("after one step: %+v, want 6 connections and 70 a second", st)
	}
	st = s.state(a, t0.Add(2*time.Second+10*time.Minute))
	if st.Connections != 20 || st.Rate != 0 || st.Backoffs != 2 {
		t.Fatalf("after long without throttling: %+v, want the rule's limits back", st)
	}

	// The lane: with a rate, a burst of jobs waits in it up to LaneJobs; beyond, jobs are handed back.
	s.observe(a, t0.Add(time.Hour), signalThrottled)
	now := t0.Add(time.Hour)
	if w, ok := s.reserve(a, now); !ok || w != 0 {
		t.Fatalf("first reserve %v %v", w, ok)
	}
	for i := range 2 {
		if _, ok := s.reserve(a, now); !ok {
			t.Fatalf("lane job %d refused", i)
		}
	}
	if w, ok := s.reserve(a, now); ok || w < time.Second {
		t.Fatalf("a full lane took a job (wait %v)", w)
	}
}

func TestParseShaping(t *testing.T) {
	sh, err := ParseShaping([]byte(`{
		"default": {"connections": 5, "idle_timeout": "10s"},
		"sites": [{"name": "corp", "mx_suffixes": ["mx.corp.example"], "rate": 2.5, "burst": 5, "messages_per_connection": 30}],
		"adaptive": {"hold": "2s", "recover_every": "1m", "error_burst": 4}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if sh.Default.Connections != 5 || sh.Default.IdleTimeout != 10*time.Second || sh.Adaptive.RecoverEvery != time.Minute || sh.Adaptive.ErrorBurst != 4 {
		t.Fatalf("parsed %+v", sh)
	}
	if len(sh.Sites) != 1+len(DefaultSites()) || sh.Sites[0].Name != "corp" || sh.Sites[0].Rate != 2.5 {
		t.Fatalf("sites %+v", sh.Sites)
	}
	full := sh.withDefaults(Config{Concurrency: 20, Workers: 8})
	if c := full.Sites[0]; c.Connections != 5 || c.IdleTimeout != 10*time.Second || c.Burst != 5 {
		t.Fatalf("corp rule with defaults %+v", c)
	}
	only, err := ParseShaping([]byte(`{"builtin_sites": false, "sites": [{"mx_suffixes": ["a.example"]}]}`))
	if err != nil || len(only.Sites) != 1 {
		t.Fatalf("builtin_sites false: %v %+v", err, only)
	}
	for _, bad := range []string{
		`{"sites": [{"name": "x"}]}`,
		`{"default": {"connections": -1}}`,
		`{"default": {"idle_timeout": "soon"}}`,
		`{"sites": [{"mx_suffixes": ["a b"]}]}`,
		`{"unknown": 1}`,
	} {
		if _, err := ParseShaping([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "mta: shaping") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}

// TestHandedBackJobsAreSpreadAtTheSiteRate: the jobs a throttled site sends back to the queue get turns one
// interval of its rate apart, so they come back about at the rate the site takes them instead of all
// together after the same wait (each then sent back again, over and over). Beyond maxHandBack they are
// not spread further.
func TestHandedBackJobsAreSpreadAtTheSiteRate(t *testing.T) {
	a := AdaptiveShaping{LaneWait: time.Second, LaneJobs: 2}
	s := &site{rule: SiteRule{Connections: 4, Rate: 10, Burst: 1}, conns: 4, rate: 10}
	s.limiter.setRate(10, 1)
	now := time.Unix(1000, 0)
	for i := range 3 { // one goes at once, two wait in the lane
		if _, ok := s.reserve(a, now); !ok {
			t.Fatalf("job %d refused before the lane was full", i)
		}
	}
	var prev time.Duration
	for i := range 50 {
		w, ok := s.reserve(a, now)
		if ok {
			t.Fatalf("job %d took a full lane", i)
		}
		if i == 0 && w < time.Second {
			t.Fatalf("the first job sent back comes back after %v, want at least a second", w)
		}
		if i > 0 && w-prev != 100*time.Millisecond {
			t.Fatalf("job %d sent back for %v, %v after the one before; want 100ms (1/rate) after", i, w, w-prev)
		}
		prev = w
	}
	// A job sent back later, while the lane's wait is shorter than the backlog: its turn comes after the
	// backlog's, not before.
	later := now.Add(2 * time.Second)
	s.limiter.tat = later.Add(1500 * time.Millisecond) // the lane's jobs have booked the next 1.5 s
	if w, ok := s.reserve(a, later); ok || w != prev-2*time.Second+100*time.Millisecond {
		t.Fatalf("after the backlog: %v %v, want %v", w, ok, prev-2*time.Second+100*time.Millisecond)
	}
	// A backlog longer than maxHandBack: its tail comes back after maxHandBack, not later.
	s.handBack = now.Add(time.Hour)
	if w, _ := s.reserve(a, now); w != maxHandBack {
		t.Fatalf("beyond the bound: sent back for %v, want %v", w, maxHandBack)
	}
}

// TestBackOffStartsFromTheRateDelivered: a site without a configured rate that was delivered to at 30
// messages a second, less than the estimate for its connections (20 × 10), backs off to half of what it
// got, not to half of the estimate (which would lower nothing); one sent very little starts from one
// connection's estimate; one not delivered to lately starts from the estimate.
func TestBackOffStartsFromTheRateDelivered(t *testing.T) {
	a := AdaptiveShaping{ErrorBurst: 3, Hold: time.Second, RecoverEvery: 10 * time.Second, PerConnectionRate: 10, LaneWait: time.Second, LaneJobs: 2}
	s := &site{rule: SiteRule{Connections: 20, Burst: 1}, conns: 20}
	t0 := time.Unix(1000, 0)
	var now time.Time
	for i := range 90 { // 30 a second for 3 s
		now = t0.Add(time.Duration(i) * time.Second / 30)
		s.observe(a, now, signalDelivered)
	}
	if down, conns, rate := s.observe(a, now, signalThrottled); !down || conns != 10 || rate < 14 || rate > 16 {
		t.Fatalf("421 after 30 a second: down %v, %d connections, rate %v; want 10 and about 15", down, conns, rate)
	}
	if st := s.state(a, now.Add(10*time.Second)); st.Rate < 16 || st.Rate > 18.5 {
		t.Fatalf("one recovery step later the rate is %v, want about 15 + 3 (a tenth of what it got)", st.Rate)
	}

	// Sent 1 a second: the back-off starts from one connection's estimate (10), not from 1.
	little := &site{rule: SiteRule{Connections: 20, Burst: 1}, conns: 20}
	for i := range 5 {
		now = t0.Add(time.Duration(i) * time.Second)
		little.observe(a, now, signalDelivered)
	}
	if _, _, rate := little.observe(a, now, signalThrottled); rate != 5 {
		t.Fatalf("421 after 1 a second: rate %v, want 5 (half of one connection's 10)", rate)
	}

	idle := &site{rule: SiteRule{Connections: 20, Burst: 1}, conns: 20}
	idle.observe(a, t0, signalDelivered)
	if _, _, rate := idle.observe(a, t0.Add(time.Minute), signalThrottled); rate != 100 {
		t.Fatalf("421 after a minute without deliveries: rate %v, want 100 (half of 20 × 10)", rate)
	}
}

// TestBackedOffSiteHoldsAtMostItsCap: a site at its configured limits is not capped (it takes what it is
// sent); backed off, it holds at most two jobs per connection it is allowed plus its lane, even when each
// job's turn has come, and a job over that goes back to the queue until one of them is done.
func TestBackedOffSiteHoldsAtMostItsCap(t *testing.T) {
	a := AdaptiveShaping{Hold: time.Second, RecoverEvery: time.Hour, PerConnectionRate: 10, LaneWait: time.Second, LaneJobs: 3}
	s := &site{rule: SiteRule{Connections: 4, Burst: 1}, conns: 4}
	now := time.Unix(1000, 0)
	for i := range 100 {
		if _, ok := s.reserve(a, now); !ok {
			t.Fatalf("job %d refused by a site at its limits", i)
		}
	}
	for range 100 {
		s.release()
	}
	if down, conns, rate := s.observe(a, now, signalThrottled); !down || conns != 2 || rate != 20 {
		t.Fatalf("421: down %v, %d connections, rate %v; want 2 and 20", down, conns, rate)
	}
	step := 50 * time.Millisecond // the site's rate: each job's turn has come when it asks
	heldCap := 2*2 + a.LaneJobs
	for i := range heldCap {
		now = now.Add(step)
		w, ok := s.reserve(a, now)
		if !ok {
			t.Fatalf("job %d of %d refused", i+1, heldCap)
		}
		if w > 0 {
			s.leave()
		}
	}
	now = now.Add(step)
	if w, ok := s.reserve(a, now); ok || w < time.Second {
		t.Fatalf("job %d taken by a site holding %d (wait %v)", heldCap+1, heldCap, w)
	}
	s.release()
	now = now.Add(step)
	if _, ok := s.reserve(a, now); !ok {
		t.Fatal("a job was refused after one of the held ones was done")
	}
}
