package mta

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the tier's Prometheus series. They exist (unregistered) without a Registerer so the code
// never checks for nil.
type metrics struct {
	deliveries    *prometheus.CounterVec   // per recipient, by outcome
	jobs          *prometheus.CounterVec   // per job, by result: acked, nacked, dropped, held, dead_lettered, parked
	smtp          *prometheus.HistogramVec // seconds, by phase: connect (TCP+greeting+TLS+AUTH), transaction
	tlsDowngrades *prometheus.CounterVec   // sessions in plaintext although STARTTLS was offered, by reason
	tls           *prometheus.CounterVec   // mail transactions by the TLS of their session (security.go)
	forbidden     prometheus.Counter       // MX addresses refused by the forbidden-address rule
	replays       prometheus.Counter       // outcomes reported again from the journal instead of resending
	repliesCut    prometheus.Counter       // sessions ended by a reply past maxReplyBytes (replylimit.go)
}

func newMetrics(reg prometheus.Registerer, p *pool, j *journal, sites prometheus.Collector) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "postmill_mta_deliveries_total",
			Help: "Recipient delivery attempts by outcome (delivered, deferred, bounced, failed).",
		}, []string{"outcome"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "postmill_mta_jobs_total",
			Help: "Delivery jobs processed, by result: acked, nacked (redelivered after a backoff), dropped (message gone), " +
				"held (kept by the core while the organization is paused or the sending domain suspended), " +
				"dead_lettered (given up and reported failed), throttled (handed back to wait for its destination site's rate), parked (given up and kept among the queue's dead letters, the report path failing too).",
		}, []string{"result"}),
		smtp: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "postmill_mta_smtp_duration_seconds",
			Help:    "SMTP latency: connect covers TCP, greeting, EHLO, STARTTLS and AUTH; transaction covers MAIL to the reply after DATA.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"phase"}),
		tlsDowngrades: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "postmill_mta_tls_downgrades_total",
			Help: "SMTP sessions that went on in plaintext although the server offered STARTTLS, by reason: refused (a 4xx/5xx reply to STARTTLS) or handshake (the TLS handshake failed).",
		}, []string{"reason"}),
		tls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "postmill_mta_tls_total",
			Help: "Mail transactions by the TLS of the session carrying them: none (plaintext), opportunistic (encrypted, server not authenticated), verified (certificate checked under the Web PKI, MTA-STS among it) or dane (checked against DANE TLSA records).",
		}, []string{"mode"}),
		forbidden: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "postmill_mta_forbidden_addresses_total",
			Help: "MX and implicit-MX addresses refused because they are loopback, private, link-local or otherwise forbidden (POSTMILL_MTA_ALLOW_NETS exempts).",
		}),
		repliesCut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "postmill_mta_replies_cut_total",
			Help: "SMTP sessions ended because the receiving server sent more than 256 KiB between two of the MTA's commands.",
		}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "postmill_mta_journal_replays_total",
			Help: "Redelivered jobs already handed over to a receiving server whose outcome was reported again from the journal instead of being sent again.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "postmill_mta_journal_entries",
		Help: "Jobs handed over to a receiving server whose outcome is not recorded yet.",
	}, func() float64 { return float64(j.count()) })
	fsyncs := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "postmill_mta_journal_fsyncs_total",
		Help: "Fsyncs of the journal, made when the report of a job a receiving server accepted failed and the job goes back to the queue (concurrent ones share an fsync).",
	}, func() float64 { return float64(j.syncCount()) })
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "postmill_mta_pool_connections",
		Help: "Open SMTP connections, busy or idle, across all destinations.",
	}, func() float64 { n, _ := p.stats(); return float64(n) })
	idle := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "postmill_mta_pool_idle_connections",
		Help: "Idle SMTP connections kept for reuse.",
	}, func() float64 { _, n := p.stats(); return float64(n) })
	var errs []error
	for _, c := range []prometheus.Collector{m.deliveries, m.jobs, m.smtp, m.tlsDowngrades, m.tls, m.forbidden, m.repliesCut, m.replays, fsyncs, open, idle, pending, sites} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
