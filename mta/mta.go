package mta

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/ports"
)

// Deps are what the MTA tier works with: ports only, so it runs the same next to the core or on its own
// machines talking to the core over the network.
type Deps struct {
	// Queue brings delivery jobs (required).
	Queue ports.Queue
	// Delivery loads a job's message and records its outcome (required).
	Delivery ports.DeliveryService
	// DeliveryBatch, when set, loads and reports many jobs in one call (ports.Core's DeliveryBatch: the
	// core in process, or one call each way over Connect); nil: Delivery is called once per job.
	DeliveryBatch ports.DeliveryBatcher
	// Resolver answers MX and address lookups (required unless Config.Relay is an IP address and port).
	Resolver ports.Resolver
	// Blobs holds attachment bytes (required).
	Blobs ports.BlobStore
	// Logger receives operational logs; never message bodies or credentials. nil discards.
	Logger *slog.Logger
	// Registerer, when set, receives the tier's metrics.
	Registerer prometheus.Registerer
	// TLSPolicy, when set, names the recipient domains whose mail must travel under TLS (an MTA-STS
	// policy in enforce mode, RFC 8461 §5, or DANE, RFC 7672). nil: opportunistic TLS everywhere unless
	// Config.RequireTLS.
	TLSPolicy TLSPolicy
	// Transport, when set, applies MTA-STS (RFC 8461) and DANE (RFC 7672) per MX host and counts every
	// session under them for TLS-RPT (RFC 8460): mta/tlspolicy's Engine (security.go). nil: neither.
	Transport TransportPolicy
}

// TLSPolicy decides per recipient domain whether delivery must use TLS. For a domain that requires it,
// the MTA never falls back to plaintext: a refused STARTTLS or a failed handshake defers the delivery
// (RFC 8461 §5: a policy failure is a temporary failure).
type TLSPolicy interface {
	// RequireTLS reports whether mail for domain (lower-case, no trailing dot) must be sent under TLS. It
	// is called once per job and should answer from a cache.
	RequireTLS(ctx context.Context, domain string) bool
}

// MTA turns delivery jobs into SMTP transactions: it builds and DKIM-signs each message, delivers it to
// the recipient domain's MX hosts (or the relay) over pooled connections, and reports every recipient's
// outcome to the core.
type MTA struct {
	cfg    Config
	deps   Deps
	log    *slog.Logger
	relay  *destination
	pool   *pool
	keys   keyCache
	signed signedCache
	// noBDAT holds the hosts (host:port) that refused BDAT as unknown after offering CHUNKING (session
	// chunking is off for them from then on; pipelining.go).
	noBDAT  sync.Map
	routes  routeCache
	journal *journal
	metrics *metrics
	// sites shapes the traffic per destination site (site.go, shaping.go).
	sites *sites
	// batch loads and reports jobs in batches when Deps.DeliveryBatch is set.
	batch  *batching
	stages *stages
	// sign runs the DKIM signatures while Run runs (signstage.go); nil signs on the job's goroutine.
	sign *signStage
	// txQueued ends takeSlots' wait for half a batch when this process queued a transactional job
	// (ports.TransactionalSignal) and the last lease held bulk jobs only; nil when the queue cannot tell.
	txQueued <-chan struct{}
	// bulkOnly says the last lease held bulk jobs only: transactional ones were not waiting then. Only
	// Run's loop reads and writes it.
	bulkOnly bool
	// chunkWait is takeSlots' longest wait for half a batch; 0 means the constant chunkWait.
	chunkWait time.Duration
	started   atomic.Bool
	now       func() time.Time
}

// New checks cfg (zero fields take DefaultConfig's values) and deps and returns an MTA ready to Run.
func New(cfg Config, deps Deps) (*MTA, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var missing []string
	if deps.Queue == nil {
		missing = append(missing, "Queue")
	}
	if deps.Delivery == nil {
		missing = append(missing, "Delivery")
	}
	if deps.Blobs == nil {
		missing = append(missing, "Blobs")
	}
	m := &MTA{cfg: cfg, deps: deps, log: deps.Logger, now: time.Now, stages: newStages(cfg)}
	if deps.DeliveryBatch != nil {
		m.batch = newBatching(deps.DeliveryBatch)
	}
	if s, ok := deps.Queue.(ports.TransactionalSignal); ok {
		m.txQueued = s.TransactionalQueued()
	}
	if cfg.Relay != "" {
		d, err := relayDestination(cfg.Relay)
		if err != nil {
			return nil, fmt.Errorf("mta: relay: %w", err)
		}
		m.relay = d
	}
	if deps.Resolver == nil && (m.relay == nil || m.relay.addrs == nil) {
		missing = append(missing, "Resolver")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("mta: missing dependencies: %s", strings.Join(missing, ", "))
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.log = m.log.With("component", "mta")
	m.pool = newPool(cfg.Concurrency, cfg.IdleConnTimeout, m.quit)
	shaping := cfg.Shaping.withDefaults(cfg)
	m.sites = newSites(shaping, m.log)
	m.pool.shortestIdle = shaping.shortestIdle()
	m.signed.now = time.Now
	j, err := openJournal(cfg.JournalDir, time.Now())
	if err != nil {
		return nil, fmt.Errorf("mta: %w", err)
	}
	m.journal = j
	met, err := newMetrics(deps.Registerer, m.pool, j, newSiteCollector(m.sites, m.now))
	if err != nil {
		return nil, fmt.Errorf("mta: metrics: %w", err)
	}
	m.metrics = met
	return m, nil
}

// Run receives jobs and processes up to Config.Workers at once until ctx ends; then it stops receiving,
// lets the jobs in flight finish (their SMTP sessions, reports and acks are not cut short by ctx) and
// closes the pooled connections and the journal. It returns nil after a clean shutdown. Run may be
// called once.
func (m *MTA) Run(ctx context.Context) error {
	if !m.started.CompareAndSwap(false, true) {
		return errors.New("mta: Run called twice")
	}
	signers := m.cfg.Signers
	if signers == 0 {
		signers = runtime.GOMAXPROCS(0)
	}
	m.sign = newSignStage(signers, max(m.cfg.SigningNice, 0), m.cfg.Foreground)
	jobCtx := context.WithoutCancel(ctx)
	reapCtx, stopReap := context.WithCancel(jobCtx)
	var reaper sync.WaitGroup
	reaper.Go(func() { m.pool.reap(reapCtx) })

	slots := make(chan struct{}, m.cfg.Workers)
	var inflight sync.WaitGroup
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		// Take one worker slot, blocking, then every other free one up to the batch size.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		n := m.takeSlots(ctx, slots)
		ds, err := m.deps.Queue.Receive(ctx, n)
		if err != nil || len(ds) == 0 {
			for range n {
				<-slots
			}
			if ctx.Err() != nil {
				break
			}
			if err != nil {
				m.log.Warn("receive failed", "error", err, "retry_in", backoff)
			}
			sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		m.bulkOnly = true
		for i, d := range ds {
			m.bulkOnly = m.bulkOnly && d.Job().Bulk
			if i >= n {
				slots <- struct{}{} // the queue returned more than asked: still never exceed Workers
			}
			inflight.Go(func() {
				defer func() { <-slots }()
				m.handle(jobCtx, d)
			})
		}
		for range n - len(ds) {
			<-slots
		}
	}
	inflight.Wait()
	m.stages.settling.Wait()
	m.sign.close()
	stopReap()
	reaper.Wait()
	m.pool.close()
	if err := m.journal.close(); err != nil {
		return fmt.Errorf("mta: closing the journal: %w", err)
	}
	return nil
}

// takeSlots takes worker slots for the next Receive, the first one already taken: every other free one,
// up to ReceiveBatch. While the MTA holds a full batch of jobs or more, it waits (at most chunkWait) until
// half a batch of slots is free: leasing one job each time one finishes would cost a queue round trip
// and a lease statement per job, which the queue then answers with a walk past every leased row, and it
// would leave the loads and reports behind it in groups of one or two. A transactional job queued by
// this process meanwhile (txQueued) ends the wait when the last lease held bulk jobs only: the queues hand
// out transactional jobs first, so a receipt sent during a broadcast is leased with the slots free now
// rather than with the next batch. When transactional jobs were in the last lease they are flowing
// already, and ending the wait for each new one would only make the leases small.
func (m *MTA) takeSlots(ctx context.Context, slots chan struct{}) int {
	n, batch := 1, m.cfg.ReceiveBatch
	if len(slots)-n >= batch {
		txQueued := m.txQueued
		if !m.bulkOnly {
			txQueued = nil
		}
		t := time.NewTimer(cmp.Or(m.chunkWait, chunkWait))
		defer t.Stop()
	wait:
		for n < batch/2 {
			select {
			case slots <- struct{}{}:
				n++
			case <-t.C:
				break wait
			case <-txQueued:
				break wait
			case <-ctx.Done():
				break wait
			}
		}
	}
	for n < batch {
		select {
		case slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

// chunkWait bounds takeSlots' wait for half a batch: a job queued for another destination than the
// jobs in hand waits at most that much longer to be leased.
const chunkWait = 50 * time.Millisecond

// handle processes one delivery: load, build and sign, deliver, journal, report, then Ack. A job whose
// message is gone is acked and dropped; so is one the core put on hold, which the core now keeps. A job
// the journal says was handed over already is not sent again: its recorded outcome is reported again. A
// failure to load or to report is retried after a backoff (retryLater) and, at Config.MaxDeliveries,
// dead-lettered; so is a job that keeps coming back without settling (a crash while handling it).
func (m *MTA) handle(ctx context.Context, d ports.Delivery) {
	job := d.Job()
	log := m.log.With("job", job.ID, "message", job.MessageID, "domain", job.Domain, "attempt", job.Attempt,
		"deliveries", d.Deliveries())
	defer func() {
		if p := recover(); p != nil {
			log.Error("delivery panicked", "panic", p)
			m.retryLater(ctx, d, log, fmt.Sprintf("handling the job panicked: %v", p))
		}
	}()

	stopLease := func() {}
	if r, ok := d.(ports.LeaseRenewer); ok {
		stopLease = m.keepLease(r, log)
	}
	behind := false // the settling stage stops the renewal once the job is settled
	defer func() {
		if !behind {
			stopLease()
		}
	}()

	if e, ok := m.journal.get(job.ID); ok {
		log.Info("job already handed over; reporting its outcome again instead of sending it again")
		m.metrics.replays.Inc()
		m.report(ctx, d, log, e.report(job))
		return
	}
	if n := d.Deliveries(); n > m.cfg.MaxDeliveries {
		m.deadLetter(ctx, d, log, fmt.Sprintf("the job was handed out %d times without settling", n-1))
		return
	}

	ok, release := m.pace(ctx, d, job, log)
	if !ok { // the job's site is throttled: it comes back at its turn (shaping_run.go)
		return
	}
	defer release()
	out, err := m.loadOutbound(ctx, job)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		log.Info("message gone; job dropped")
		m.ack(ctx, d, log, "dropped")
		return
	}
	if ports.IsDeliveryHeld(err) {
		// The organization is paused or the sending domain suspended: the core keeps the job and puts it
		// back in the outbox when it may go, so it leaves the queue without using up redeliveries.
		log.Info("delivery held by the core; job handed over to it", "reason", ports.ErrorMessage(err))
		m.ack(ctx, d, log, "held")
		return
	}
	if err != nil {
		m.retryLater(ctx, d, log, "loading the message failed: "+err.Error())
		return
	}
	out.Job = job

	report := m.deliver(ctx, out)
	for _, o := range report.Recipients {
		m.metrics.deliveries.WithLabelValues(string(o.Kind)).Inc()
		log.Debug("recipient outcome", "recipient", o.RecipientID, "outcome", o.Kind, "response", o.Response)
	}
	// The worker slot is free for the next job; the journal, the report and the ack happen behind.
	behind = true
	m.settleBehind(ctx, d, log, func() {
		defer stopLease()
		m.settle(ctx, d, log, report)
	})
}

// handedOver reports whether a receiving server accepted the message for some recipient: sending the job
// again would deliver it twice.
func handedOver(r ports.DeliveryReport) bool {
	for _, o := range r.Recipients {
		if o.Kind == ports.OutcomeDelivered {
			return true
		}
	}
	return false
}

// keepLease renews r every LeaseRenewInterval until the returned stop is called, so a job that takes long
// (a slow receiver within RFC 5321 §4.5.3.2's timeouts) is not handed to another MTA meanwhile. A lost
// lease is logged and renewal ends: the outcome is still recorded once (ApplyDelivery is idempotent).
func (m *MTA) keepLease(r ports.LeaseRenewer, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(m.cfg.LeaseRenewInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), m.cfg.LeaseRenewInterval)
				err := r.Renew(ctx)
				cancel()
				if err != nil {
					log.Warn("renewing the job's lease failed", "error", err)
					if ports.ErrorCode(err) == ports.CodeFailedPrecondition {
						return
					}
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// deliver makes one delivery attempt for the job of out and returns its report.
func (m *MTA) deliver(ctx context.Context, out ports.OutboundMessage) ports.DeliveryReport {
	rcpts := make([]ports.Recipient, len(out.Recipients))
	for i, rc := range out.Recipients {
		rc.Address = envelopeAddress(rc.Address)
		rcpts[i] = rc
	}
	r := newResult(rcpts)
	report := func() ports.DeliveryReport {
		return ports.DeliveryReport{Job: out.Job, Handed: r.handed, Recipients: r.outcomes, At: m.now()}
	}
	if len(rcpts) == 0 {
		return report()
	}

	dests, rerr := m.route(ctx, out.Job.Domain)
	if rerr != nil {
		r.settleRest(rerr.kind, rerr.response)
		return report()
	}
	// The message is signed only once there is room in the first destination's window (stages), where
	// transactional jobs wait ahead of a broadcast's.
	leave, err := m.stages.enterWindowAs(ctx, dests[0].key(), out.Job.Bulk)
	if err != nil {
		r.settleRest(ports.OutcomeDeferred, "4.3.0 temporary failure preparing the message")
		return report()
	}
	defer leave()

	data, err := m.message(ctx, out)
	if err != nil {
		var pe *permanentError
		if errors.As(err, &pe) {
			m.log.Warn("message cannot be built", "message", out.MessageID, "error", pe.response)
			r.settleRest(ports.OutcomeFailed, pe.response)
		} else {
			m.log.Warn("message build failed", "message", out.MessageID, "error", err)
			r.settleRest(ports.OutcomeDeferred, "4.3.0 temporary failure preparing the message")
		}
		return report()
	}
	m.send(ctx, dests, envelopeAddress(out.ReturnPath), data, r, m.siteFor(out.Job.Domain, dests), out.Job.Bulk)
	return report()
}

// message returns the signed RFC 5322 bytes of out. DKIM runs once per message: when the message's
// visible recipients span several domains (one job each), the signed bytes are shared between the jobs.
func (m *MTA) message(ctx context.Context, out ports.OutboundMessage) ([]byte, error) {
	build := func() ([]byte, error) {
		key, err := m.keys.signer(out.DKIMPrivateKey)
		if err != nil {
			return nil, err
		}
		raw, keys, err := compose(ctx, out, m.deps.Blobs)
		if err != nil {
			return nil, err
		}
		var signed []byte
		if werr := m.sign.do(ctx, out.Job.Bulk, func() { signed, err = signDKIM(raw, keys, out, key) }); werr != nil {
			return nil, werr
		}
		return signed, err
	}
	if !spansDomains(out) {
		return build()
	}
	return m.signed.get(out.MessageID+"\x00"+out.DKIMSelector, build)
}

// spansDomains reports whether a To or Cc address is outside the job's domain, so that another job of the
// same message will need the same bytes. (Bcc-only spreads are not visible here and are signed per job.)
func spansDomains(out ports.OutboundMessage) bool {
	for _, list := range [][]string{out.To, out.Cc} {
		for _, a := range list {
			addr := envelopeAddress(a)
			if at := strings.LastIndexByte(addr, '@'); at >= 0 && !strings.EqualFold(addr[at+1:], out.Job.Domain) {
				return true
			}
		}
	}
	return false
}

// envelopeAddress returns the bare address of "Name <a@b>" (RFC 5321 paths carry no display names).
func envelopeAddress(s string) string {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, "<\"") {
		if a, err := mail.ParseAddress(s); err == nil {
			return a.Address
		}
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
