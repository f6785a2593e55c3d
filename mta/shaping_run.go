package mta

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// Sites returns the shaping state of every destination site seen so far (site.go), sorted by name.
func (m *MTA) Sites() []SiteState { return m.sites.snapshot(m.now()) }

// pace waits for the job's turn in its site's message rate before the job loads its message, so a
// throttled site's jobs neither sign messages nor hold connections while they wait. A short wait is
// spent here, in the site's lane; a job that would wait longer than AdaptiveShaping.LaneWait, or that
// finds its site's lane full, goes back to the queue until its turn (HandBack; the turns of the jobs
// sent back are spread at the site's rate, site.reserve) and frees its worker for the other sites; so does
// a job of a backed-off site already holding as many jobs as it may (site.heldCap). It returns false when
// the job was handed back; otherwise release, to be called when the job no longer holds its worker. A job whose route cannot be found yet goes on: deliver
// reports why. A hand-back is not a try: the queue does not count it among the job's deliveries, so
// however long a site throttles, Config.MaxDeliveries caps only real attempts.
func (m *MTA) pace(ctx context.Context, d ports.Delivery, job ports.DeliveryJob, log *slog.Logger) (ok bool, release func()) {
	st := m.siteFor(job.Domain, nil)
	if st == nil {
		return true, func() {}
	}
	wait, ok := st.reserve(m.sites.shaping.Adaptive, m.now())
	if ok {
		if wait > 0 {
			sleep(ctx, wait)
			st.leave()
		}
		return true, st.release
	}
	// A little jitter, so that the MTA processes sharing a queue (each with its own site state) do not
	// bring their jobs back in step.
	delay := wait + rand.N(wait/10+1)
	log.Debug("site throttled; job handed back until its turn", "site", st.name, "retry_in", delay)
	if err := d.HandBack(ctx, delay); err != nil {
		log.Warn("handing the job back failed; it comes back when its lease ends", "error", err)
	}
	m.metrics.jobs.WithLabelValues("throttled").Inc()
	return false, nil
}

// siteFor returns the site of a recipient domain: from its hosts as routing knows them without any
// lookup (the simulator, the relay, or the MX answer cached by route), else from dests (nil when dests is
// empty too). Naming the site from the MX answer rather than from the destinations left after MTA-STS
// keeps one site per domain whatever its policy refused.
func (m *MTA) siteFor(domain string, dests []destination) *site {
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	var hosts []destination
	switch mxs, _, cached := m.routes.get(domain, m.now()); {
	case m.cfg.SimulatorAddr.IsValid() && domain == strings.TrimSuffix(strings.ToLower(m.cfg.SimulatorDomain), "."):
		hosts = []destination{{host: domain}}
	case m.relay != nil:
		hosts = []destination{*m.relay}
	case cached && len(mxs) == 0:
		hosts = []destination{{host: domain}}
	case cached:
		for _, mx := range mxs {
			if h := strings.TrimSuffix(strings.ToLower(mx.Host), "."); h != "" {
				hosts = append(hosts, destination{host: h})
			}
		}
	}
	if len(hosts) == 0 {
		hosts = dests
	}
	if len(hosts) == 0 {
		return nil
	}
	return m.sites.of(hosts, m.now())
}

// observeSite feeds one attempt's outcome to its site's adaptive back-off: a 421 (to the greeting or
// to any command) backs the site off; other 4xx replies do after AdaptiveShaping.ErrorBurst in a row;
// a delivery resets that count. Failures without a reply (refused connections, timeouts) say nothing
// about throttling and are ignored.
func (m *MTA) observeSite(st *site, replies ...string) {
	for _, resp := range replies {
		var sig signal
		switch {
		case strings.HasPrefix(resp, "421"):
			sig = signalThrottled
		case len(resp) >= 4 && resp[0] == '4' && resp[3] == ' ' && isDigits(resp[1:3]):
			sig = signalTempFail
		case strings.HasPrefix(resp, "250"):
			sig = signalDelivered
		default:
			continue
		}
		if down, conns, rate := st.observe(m.sites.shaping.Adaptive, m.now(), sig); down {
			m.log.Warn("site throttling; backing off", "site", st.name, "reply", resp, "connections", conns, "rate", rate)
		}
	}
}

// observeResult feeds every recipient's reply of r to st (observeSite), once per distinct reply.
func (m *MTA) observeResult(st *site, r *result) {
	seen := make(map[string]bool, 2)
	for _, o := range r.outcomes {
		code := o.Response
		if len(code) > 3 {
			code = code[:3]
		}
		if !seen[code] {
			seen[code] = true
			m.observeSite(st, o.Response)
		}
	}
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// reapPace returns the shortest idle timeout of any site rule, for the pool's reaper.
func (sh Shaping) shortestIdle() time.Duration {
	d := sh.Default.IdleTimeout
	for _, r := range sh.Sites {
		if r.IdleTimeout > 0 && (d == 0 || r.IdleTimeout < d) {
			d = r.IdleTimeout
		}
	}
	return d
}
