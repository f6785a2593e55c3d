package mta

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// deadLetterCode is the enhanced status (RFC 3463 X.3.0, mail system status) of recipients failed because
// their job was given up: the failure is Postmill's own, not the receiving server's.
const deadLetterCode = "5.3.0"

// report records the job's outcome with the core and acks the job; a failure to record it is retried
// later (retryLater). Once recorded, the journal forgets the job.
func (m *MTA) report(ctx context.Context, d ports.Delivery, log *slog.Logger, r ports.DeliveryReport) {
	if err := m.reportDelivery(ctx, r); err != nil {
		m.retryLater(ctx, d, log, "recording the outcome failed: "+err.Error())
		return
	}
	m.journal.done(r.Job.ID)
	m.ack(ctx, d, log, "acked")
}

// retryLater hands the job back to the queue to come again after redeliveryDelay, or dead-letters it when
// this delivery reaches Config.MaxDeliveries: a failure that recurs is neither retried at full speed nor
// forever.
func (m *MTA) retryLater(ctx context.Context, d ports.Delivery, log *slog.Logger, why string) {
	n := d.Deliveries()
	if n >= m.cfg.MaxDeliveries {
		m.deadLetter(ctx, d, log, why) // fsyncs the journal itself if the job stays unrecorded
		return
	}
	m.syncJournal(d.Job().ID, log)
	delay := m.redeliveryDelay(n)
	log.Warn("job not settled; it comes back later", "reason", why, "retry_in", delay)
	m.metrics.jobs.WithLabelValues("nacked").Inc() // before the queue hears of it, as ack counts
	if err := d.NackAfter(ctx, delay); err != nil {
		log.Warn("handing the job back failed; it comes back when its lease ends", "error", err)
	}
}

// syncJournal fsyncs the journal when it holds the job: the job is about to go back to the queue with
// its outcome unrecorded, and from then on the journal alone keeps it from being sent again.
func (m *MTA) syncJournal(jobID string, log *slog.Logger) {
	if _, ok := m.journal.get(jobID); !ok {
		return
	}
	if err := m.journal.sync(); err != nil {
		log.Error("journal fsync failed; after a machine crash a redelivery of this job would send it again", "error", err)
	}
}

// redeliveryDelay is the wait before the delivery after the n-th: RedeliveryBackoff doubled per earlier
// delivery, at most MaxRedeliveryBackoff, less up to a quarter of jitter so that jobs failing together (a
// core outage) do not come back together.
func (m *MTA) redeliveryDelay(n int) time.Duration {
	d := m.cfg.RedeliveryBackoff
	for i := 1; i < n && d < m.cfg.MaxRedeliveryBackoff; i++ {
		d *= 2
	}
	d = min(d, m.cfg.MaxRedeliveryBackoff)
	return d - rand.N(d/4+1)
}

// deadLetter gives the job up. Its recipients are reported failed with the reason, so the message's
// timeline says why and its sender's webhooks hear of it; then the job is acked. When even that report
// fails — the report path itself is what is broken — the queue keeps the job among its dead letters with
// the reason (PostgreSQL: the delivery_queue row with dead_at and dead_reason; Kafka: the dead-letter
// topic), where an operator finds it and can put it back; the journal keeps what was handed over, so
// putting it back does not send it again. Every way out is logged at error level and counted.
func (m *MTA) deadLetter(ctx context.Context, d ports.Delivery, log *slog.Logger, why string) {
	job := d.Job()
	reason := fmt.Sprintf("%s delivery given up after %d attempts: %s", deadLetterCode, d.Deliveries(), why)
	handed := false
	if e, ok := m.journal.get(job.ID); ok && e.delivered() {
		handed = true
		reason += " (the receiving server had accepted the message: " + acceptedReply(e) + ")"
	}
	reason = cleanText(reason, maxResponse)
	dead := ports.DeliveryReport{Job: job, Handed: handed, At: m.now()}
	for _, id := range job.RecipientIDs {
		dead.Recipients = append(dead.Recipients, ports.RecipientOutcome{RecipientID: id, Kind: ports.OutcomeFailed, Response: reason})
	}
	err := m.reportDelivery(ctx, dead)
	if err == nil {
		log.Error("delivery job dead-lettered: its recipients are failed", "reason", reason)
		m.journal.done(job.ID)
		m.ack(ctx, d, log, "dead_lettered")
		return
	}
	m.syncJournal(job.ID, log)
	parked := cleanText(reason+"; reporting the failure failed too: "+err.Error(), maxResponse)
	if derr := d.DeadLetter(ctx, parked); derr != nil {
		delay := m.cfg.MaxRedeliveryBackoff
		log.Error("dead-lettering the job failed; it comes back later", "reason", parked, "error", derr, "retry_in", delay)
		if nerr := d.NackAfter(ctx, delay); nerr != nil {
			log.Warn("handing the job back failed; it comes back when its lease ends", "error", nerr)
		}
		m.metrics.jobs.WithLabelValues("nacked").Inc()
		return
	}
	log.Error("delivery job parked among the queue's dead letters: its outcome could not be recorded", "reason", parked)
	m.metrics.jobs.WithLabelValues("parked").Inc()
}

// acceptedReply returns the first reply that accepted the message, as the journal has it.
func acceptedReply(e journalEntry) string {
	for _, o := range e.Reports {
		if o.Kind == ports.OutcomeDelivered {
			return strings.TrimSpace(o.Response)
		}
	}
	return ""
}

// ack acks a settled job and counts it under result.
func (m *MTA) ack(ctx context.Context, d ports.Delivery, log *slog.Logger, result string) {
	// Counted first, so that whoever sees the ack (a queue, a test) sees the count too.
	m.metrics.jobs.WithLabelValues(result).Inc()
	if err := d.Ack(ctx); err != nil {
		log.Warn("acking the delivery failed", "error", err)
	}
}
