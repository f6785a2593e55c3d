package mta

import (
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A site is where a recipient domain's mail goes, rolled up by MX (KumoMTA's egress model): every domain
// whose MX hosts match the same named rule (SiteRule.Name, by MX host suffix), or else every domain with
// the same set of MX hosts, is one site, shaped as one: gmail.com, googlemail.com and every Google
// Workspace domain share Google's connections and rate. Each site has a connection limit, a message rate
// (GCRA), a number of messages per connection and an idle timeout, from its rule; and the adaptive
// back-off lowers its connections and rate when it throttles (a 421, or ErrorBurst 4xx replies in a row)
// and gives them back slowly while it does not.
type site struct {
	name  string
	rule  SiteRule
	named bool

	mu sync.Mutex
	// conns and rate are the current limits: the rule's, or less after a back-off. rate 0: no limit.
	conns int
	rate  float64
	// ceiling is the rate recovered towards: the rule's, or for a rule without one the estimate the
	// back-off started from (reaching it lifts the limit again).
	ceiling  float64
	limiter  gcra
	errors   int // 4xx replies since the last delivery
	lastDown time.Time
	lastStep time.Time // last decrease or recovery step
	backoffs int
	// sent counts the deliveries of the current window, begun at window; lastRate is the delivery rate
	// of the window before (messages a second): what the site was actually taking, for the back-off.
	window   time.Time
	sent     int
	lastRate float64
	waiting  int // jobs waiting in the site's lane
	// held counts the site's jobs holding a worker past pace: waiting in the lane, loading, signed and
	// waiting for a connection, or being sent. A backed-off site may hold at most heldCap of them.
	held int
	// handBack is the turn of the last job sent back to the queue (reserve): the next one comes back one
	// interval of the site's rate later, so a backlog returns at the rate the site is sent to.
	handBack  time.Time
	lastTouch time.Time
}

// SiteState is a site's shaping state at one moment (MTA.Sites).
type SiteState struct {
	Name string
	// Connections and Rate are the current limits; MaxConnections and MaxRate the configured ones (Rate 0:
	// no limit).
	Connections, MaxConnections int
	Rate, MaxRate               float64
	// Backoffs counts the decreases since the site was first seen.
	Backoffs int
}

// maxSites bounds the sites remembered; past it, the ones at their configured limits are forgotten.
const maxSites = 10000

// sites keeps the state of every site seen.
type sites struct {
	shaping Shaping
	log     *slog.Logger

	mu    sync.Mutex
	sites map[string]*site
}

func newSites(sh Shaping, log *slog.Logger) *sites {
	return &sites{shaping: sh, log: log, sites: map[string]*site{}}
}

// of returns the site of a route: the destinations' hosts, in any order.
func (ss *sites) of(dests []destination, now time.Time) *site {
	hosts := make([]string, 0, len(dests))
	for _, d := range dests {
		hosts = append(hosts, d.host)
	}
	rule, named := ss.match(hosts)
	var name string
	if named {
		name = rule.Name
	} else {
		sort.Strings(hosts)
		name = strings.Join(slices.Compact(hosts), ",")
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.sites[name]
	if s == nil {
		if len(ss.sites) >= maxSites {
			ss.forgetIdle()
		}
		s = &site{name: name, rule: rule, named: named, conns: rule.Connections, rate: rule.Rate, ceiling: rule.Rate}
		s.limiter.setRate(rule.Rate, rule.Burst)
		ss.sites[name] = s
	}
	s.lastTouch = now
	return s
}

// match returns the first rule one of whose suffixes matches one of hosts, or the default rule.
func (ss *sites) match(hosts []string) (SiteRule, bool) {
	for _, r := range ss.shaping.Sites {
		for _, sfx := range r.MXSuffixes {
			for _, h := range hosts {
				if h == sfx || strings.HasSuffix(h, "."+sfx) {
					return r, r.Name != ""
				}
			}
		}
	}
	return ss.shaping.Default, false
}

// forgetIdle drops the sites at their configured limits with nobody waiting. ss.mu is held.
func (ss *sites) forgetIdle() {
	for k, s := range ss.sites {
		s.mu.Lock()
		idle := s.waiting == 0 && s.held == 0 && s.conns == s.rule.Connections && s.rate == s.rule.Rate
		s.mu.Unlock()
		if idle {
			delete(ss.sites, k)
		}
	}
	if len(ss.sites) >= maxSites {
		clear(ss.sites)
	}
}

// snapshot returns every site's state, sorted by name.
func (ss *sites) snapshot(now time.Time) []SiteState {
	ss.mu.Lock()
	all := make([]*site, 0, len(ss.sites))
	for _, s := range ss.sites {
		all = append(all, s)
	}
	ss.mu.Unlock()
	out := make([]SiteState, 0, len(all))
	for _, s := range all {
		out = append(out, s.state(ss.shaping.Adaptive, now))
	}
	slices.SortFunc(out, func(a, b SiteState) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (s *site) state(a AdaptiveShaping, now time.Time) SiteState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recover(a, now)
	return SiteState{Name: s.name, Connections: s.conns, MaxConnections: s.rule.Connections, Rate: s.rate, MaxRate: s.rule.Rate, Backoffs: s.backoffs}
}

// limits returns the site's current connection limit, messages per connection and idle timeout.
func (s *site) limits(a AdaptiveShaping, now time.Time) (conns, perConn int, idle time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recover(a, now)
	return s.conns, s.rule.MessagesPerConnection, s.rule.IdleTimeout
}

// maxHandBack bounds how far ahead a job sent back to the queue is given its turn: a site backed off to
// its lowest rate with a long backlog would otherwise push the last jobs days away. Jobs beyond it come
// back after it and are sent back again.
const maxHandBack = 15 * time.Minute

// reserve books a message's turn in the site's rate and returns how long it must wait, unless the wait
// is longer than a.LaneWait or the lane already holds a.LaneJobs waiting jobs: then the job is to go back
// to the queue, and ok is false with how long it should stay there. A job given a non-zero wait is in the
// lane until it calls leave.
//
// The jobs sent back are given turns one interval of the site's current rate apart, after the last one
// sent back (and not before the lane's wait): a backlog of n jobs comes back spread over n intervals,
// at about the rate the site takes them, so each is received about once more rather than every job coming
// back together after the same short wait, finding the lane full and being sent back again (a lease and
// a hand-back per job every few seconds, which cost the other sites' CPU and queue throughput).
func (s *site) reserve(a AdaptiveShaping, now time.Time) (wait time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recover(a, now)
	w := s.limiter.wait(now)
	if full := s.backedOff() && s.held >= s.heldCap(a); full || (w > 0 && (w > a.LaneWait || s.waiting >= a.LaneJobs)) {
		turn := now.Add(max(w, time.Second))
		if s.handBack.After(turn) {
			turn = s.handBack
		}
		if limit := now.Add(maxHandBack); turn.After(limit) {
			turn = limit
		} else if s.rate > 0 {
			s.handBack = turn.Add(time.Duration(float64(time.Second) / s.rate))
		}
		return turn.Sub(now), false
	}
	w = s.limiter.reserve(now)
	if w > 0 {
		s.waiting++
	}
	s.held++
	return w, true
}

// backedOff reports whether the site is below its configured limits. s.mu is held.
func (s *site) backedOff() bool { return s.conns < s.rule.Connections || s.rate != s.rule.Rate }

// heldCap is how many jobs a backed-off site may hold at once: two per connection it is allowed (one
// being sent, one signed and ready) and its lane. Without it the jobs its rate lets through but its
// connections cannot take yet pile up waiting for a connection, each holding a worker, until the site
// holds nearly every worker and the other sites get a job only as often as it delivers one. A site at
// its configured limits has no cap beyond the workers and its window: it is taking what it is sent.
// s.mu is held.
func (s *site) heldCap(a AdaptiveShaping) int { return 2*s.conns + a.LaneJobs }

// release ends a job's hold on the site (reserve's ok).
func (s *site) release() {
	s.mu.Lock()
	s.held--
	s.mu.Unlock()
}

func (s *site) leave() {
	s.mu.Lock()
	s.waiting--
	s.mu.Unlock()
}

// signal is what one attempt told about a site.
type signal int

const (
	signalDelivered signal = iota // a 250 after DATA
	signalTempFail                // a 4xx reply other than 421
	signalThrottled               // 421: the server closes the channel (RFC 5321 §3.8), or refuses to greet
)

// observe takes one attempt's signal and backs the site off when it throttles: a 421, or ErrorBurst
// 4xx replies in a row. It returns whether the site was backed off.
func (s *site) observe(a AdaptiveShaping, now time.Time, sig signal) (down bool, conns int, rate float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recover(a, now)
	switch sig {
	case signalDelivered:
		s.count(now)
		s.errors = 0
		s.recover(a, now)
		return false, s.conns, s.rate
	case signalTempFail:
		s.errors++
		if s.errors < a.ErrorBurst {
			return false, s.conns, s.rate
		}
	}
	s.errors = 0
	if !s.lastDown.IsZero() && now.Sub(s.lastDown) < a.Hold {
		s.lastStep = now // still throttling: the recovery waits
		return false, s.conns, s.rate
	}
	// Multiplicative decrease: half the connections (at least one) and half the rate. A site without a
	// rate starts from the estimate of what its current connections carry, or from the rate it was
	// actually delivered to when that was less: halving an estimate above what the site got would lower
	// nothing, and the site would go on taking as much as before its 421s. Not from less than one
	// connection's estimate, though: a site sent little has said nothing about its rate, and one 421 must
	// not hold its next burst to a trickle.
	s.conns = max(1, s.conns/2)
	if s.rate == 0 {
		s.ceiling = a.PerConnectionRate * float64(max(s.conns*2, 1))
		if got := s.delivered(now); got > 0 && got < s.ceiling {
			s.ceiling = max(got, min(a.PerConnectionRate, s.ceiling))
		}
		s.rate = s.ceiling
	}
	s.rate = max(s.rate/2, 1.0/60)
	s.limiter.setRate(s.rate, min(max(1, int(s.rate)), max(s.rule.Burst, 1)))
	s.lastDown, s.lastStep = now, now
	s.backoffs++
	return true, s.conns, s.rate
}

// rateWindow is the span over which a site's delivery rate is measured.
const rateWindow = 2 * time.Second

// count counts one delivery in the site's rate window. s.mu is held.
func (s *site) count(now time.Time) {
	if el := now.Sub(s.window); el >= rateWindow {
		s.lastRate = 0
		if el < 2*rateWindow { // the window just ended; an older one says nothing about now
			s.lastRate = float64(s.sent) / el.Seconds()
		}
		s.window, s.sent = now, 0
	}
	s.sent++
}

// delivered returns the rate the site was delivered to lately, in messages a second: the last full
// window's, or the current one's when it is at least half a window old and higher; 0 when nothing was
// delivered for longer than a window. s.mu is held.
func (s *site) delivered(now time.Time) float64 {
	el := now.Sub(s.window)
	if el >= 2*rateWindow {
		return 0
	}
	if el >= rateWindow {
		return float64(s.sent) / el.Seconds()
	}
	r := s.lastRate
	if el >= rateWindow/2 {
		r = max(r, float64(s.sent)/el.Seconds())
	}
	return r
}

// recover gives a backed-off site one connection and a tenth of its ceiling rate back for every
// RecoverEvery since its last step (additive increase); reaching the ceiling of a site without a
// configured rate lifts the limit. s.mu is held.
func (s *site) recover(a AdaptiveShaping, now time.Time) {
	if s.conns >= s.rule.Connections && s.rate == s.rule.Rate {
		return
	}
	for now.Sub(s.lastStep) >= a.RecoverEvery && (s.conns < s.rule.Connections || s.rate != s.rule.Rate) {
		s.lastStep = s.lastStep.Add(a.RecoverEvery)
		s.conns = min(s.conns+1, s.rule.Connections)
		if s.rate != s.rule.Rate {
			s.rate += s.ceiling / 10
			if s.rate >= s.ceiling {
				s.rate = s.rule.Rate
			}
		}
	}
	if s.rate == s.rule.Rate {
		s.limiter.setRate(s.rule.Rate, s.rule.Burst)
	} else {
		s.limiter.setRate(s.rate, min(max(1, int(s.rate)), max(s.rule.Burst, 1)))
	}
}

// siteCollector exposes the sites' state: postmill_mta_site_rate, postmill_mta_site_connections and
// postmill_mta_site_backoffs_total, for the named sites and every site backed off at least once (the
// others are many, one per set of MX hosts, and at their configured limits).
type siteCollector struct {
	sites               func() []SiteState
	named               func(string) bool
	rate, conns, backed *prometheus.Desc
}

func newSiteCollector(ss *sites, now func() time.Time) *siteCollector {
	return &siteCollector{
		sites: func() []SiteState { return ss.snapshot(now()) },
		named: func(n string) bool {
			for _, r := range ss.shaping.Sites {
				if r.Name == n {
					return true
				}
			}
			return false
		},
		rate: prometheus.NewDesc("postmill_mta_site_rate",
			"Current message rate limit of a destination site, in messages a second (0: no limit); lowered by the adaptive back-off.", []string{"site"}, nil),
		conns: prometheus.NewDesc("postmill_mta_site_connections",
			"Current connection limit of a destination site; lowered by the adaptive back-off.", []string{"site"}, nil),
		backed: prometheus.NewDesc("postmill_mta_site_backoffs_total",
			"Times a destination site was backed off (a 421 or a burst of 4xx replies).", []string{"site"}, nil),
	}
}

func (c *siteCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.rate
	ch <- c.conns
	ch <- c.backed
}

func (c *siteCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.sites() {
		if s.Backoffs == 0 && !c.named(s.Name) {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, s.Rate, s.Name)
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Connections), s.Name)
		ch <- prometheus.MustNewConstMetric(c.backed, prometheus.CounterValue, float64(s.Backoffs), s.Name)
	}
}
