package mta

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the tier's Prometheus series. They exist (unregistered) without a Registerer so the code
// never checks for nil.
type metrics struct {
	deliveries *prometheus.CounterVec   // per recipient, by outcome
	jobs       *prometheus.CounterVec   // per job, by result: acked, nacked, dropped
	smtp       *prometheus.HistogramVec // seconds, by phase: connect (TCP+greeting+TLS+AUTH), transaction
}

func newMetrics(reg prometheus.Registerer, p *pool) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "postmill_mta_deliveries_total",
			Help: "Recipient delivery attempts by outcome (delivered, deferred, bounced, failed).",
		}, []string{"outcome"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "postmill_mta_jobs_total",
			Help: "Delivery jobs processed, by result: acked, nacked (redelivered), dropped (message gone).",
		}, []string{"result"}),
		smtp: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "postmill_mta_smtp_duration_seconds",
			Help:    "SMTP latency: connect covers TCP, greeting, EHLO, STARTTLS and AUTH; transaction covers MAIL to the reply after DATA.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"phase"}),
	}
	if reg == nil {
		return m, nil
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "postmill_mta_pool_connections",
		Help: "Open SMTP connections, busy or idle, across all destinations.",
	}, func() float64 { n, _ := p.stats(); return float64(n) })
	idle := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "postmill_mta_pool_idle_connections",
		Help: "Idle SMTP connections kept for reuse.",
	}, func() float64 { _, n := p.stats(); return float64(n) })
	var errs []error
	for _, c := range []prometheus.Collector{m.deliveries, m.jobs, m.smtp, open, idle} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
