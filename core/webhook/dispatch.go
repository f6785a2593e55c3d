package webhook

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postmill/postmill/core/poll"
	"github.com/postmill/postmill/ports"
)

// Recording attempt results: each RecordAttempts call gets recordTimeout, and a batch the store refuses is
// tried recordTries times in all before it is given up. A result given up is not lost for good: its
// delivery's lease expires and the delivery is attempted again (at least once, SPEC §6).
const (
	recordTimeout = 10 * time.Second
	recordTries   = 3
)

// RunDispatcher attempts due deliveries until ctx ends, then returns nil. It claims (leases) due deliveries
// — never more than the free in-flight slots, at most ClaimBatch — and runs each attempt in its own
// goroutine, at most InFlight at once and at most PerEndpoint per endpoint. A delivery whose endpoint has
// no free slot waits in that endpoint's queue without holding an in-flight slot, so a slow receiver delays
// only its own deliveries while claiming goes on for everyone else's. Results are recorded in batches
// (FlushBatch, or after FlushInterval) by one flusher.
//
// When ctx ends, claiming stops, attempts already running finish (each within AttemptTimeout: they do not
// see ctx's cancellation, which would turn them into failures), their results are recorded, and deliveries
// still waiting in endpoint queues are left untouched to be claimed again when their leases expire. A
// failing claim is logged and retried after a growing pause.
func (s *Service) RunDispatcher(ctx context.Context) error {
	results := make(chan ports.WebhookAttempt, s.cfg.FlushBatch)
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		s.flushResults(context.WithoutCancel(ctx), results)
	}()
	d := &dispatcher{
		s:       s,
		ctx:     context.WithoutCancel(ctx),
		results: results,
		slots:   newSlots(s.cfg.InFlight, s.cfg.PerEndpoint, s.cfg.backlog()),
		freed:   make(chan struct{}, 1),
	}
	s.claimLoop(ctx, d)
	d.mu.Lock()
	dropped := d.slots.stop()
	d.mu.Unlock()
	for _, dd := range dropped {
		d.handBack(dd)
	}
	d.wg.Wait()
	close(results)
	<-flushed
	return nil
}

// claimLoop claims due deliveries and hands them to d until ctx ends. It waits for a quarter of the
// in-flight slots (or of ClaimBatch) to be free before claiming, or for ClaimInterval with at least one
// free, so a busy dispatcher claims in batches rather than one delivery per finished attempt. It goes
// again at once after a full claim and sleeps ClaimInterval after a partial one.
func (s *Service) claimLoop(ctx context.Context, d *dispatcher) {
	want := max(1, min(s.cfg.ClaimBatch, s.cfg.InFlight)/4)
	failures := 0
	for {
		free := d.waitFree(ctx, want, s.cfg.ClaimInterval)
		if ctx.Err() != nil {
			return
		}
		limit := min(free, s.cfg.ClaimBatch)
		now := s.now()
		due, err := s.store.ClaimDue(ctx, now, now.Add(s.cfg.Lease), limit)
		for _, dd := range due {
			d.submit(dd)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			wait := poll.Backoff(s.cfg.ClaimInterval, poll.ErrorBackoffCap, failures)
			s.logger.WarnContext(ctx, "webhook claim failed; retrying", "error", err, "failures", failures, "wait", wait)
			if !poll.Sleep(ctx, wait) {
				return
			}
			continue
		}
		failures = 0
		if (len(due) < limit || d.handedBack.Swap(false)) && !poll.Sleep(ctx, s.cfg.ClaimInterval) {
			return
		}
	}
}

// dispatcher runs the attempts of one RunDispatcher call.
type dispatcher struct {
	s       *Service
	ctx     context.Context // for attempts: carries ctx's values but not its cancellation
	results chan<- ports.WebhookAttempt
	mu      sync.Mutex
	slots   *slots
	wg      sync.WaitGroup
	freed   chan struct{} // signalled when an in-flight slot is released
	// handedBack is set when a claimed delivery was handed back; the claim loop then pauses for
	// ClaimInterval so a backlog on one endpoint is not claimed and handed back in a tight loop.
	handedBack atomic.Bool
}

// free returns the in-flight slots not in use.
func (d *dispatcher) free() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.slots.free()
}

// waitFree waits until want slots are free, or until patience has passed and at least one is, and returns
// the free count; 0 when ctx ended.
func (d *dispatcher) waitFree(ctx context.Context, want int, patience time.Duration) int {
	t := time.NewTimer(patience)
	defer t.Stop()
	for {
		if free := d.free(); free >= want {
			return free
		}
		select {
		case <-ctx.Done():
			return 0
		case <-d.freed:
		case <-t.C:
			want = 1
		}
	}
}

// submit starts a claimed delivery, queues it behind its endpoint's running attempts, or drops it (see
// slots.admit); a dropped delivery is attempted again when its lease expires.
func (d *dispatcher) submit(dd ports.DueDelivery) {
	d.mu.Lock()
	adm := d.slots.admit(dd)
	d.mu.Unlock()
	switch adm {
	case admitStart:
		d.wg.Add(1)
		go d.run(dd)
	case admitDrop:
		d.handBack(dd)
	}
}

// handBack returns a claimed delivery that will not be attempted now (its endpoint's backlog is full, or
// the dispatcher is stopping): recording it unchanged, without a next attempt time, clears its lease and
// keeps it due, so any dispatcher can claim it again at once instead of after the lease.
func (d *dispatcher) handBack(dd ports.DueDelivery) {
	d.handedBack.Store(true)
	d.results <- ports.WebhookAttempt{
		DeliveryID: dd.Delivery.ID, Lease: dd.Lease, Status: dd.Delivery.Status,
		Attempts: dd.Delivery.Attempts, ResponseCode: dd.Delivery.ResponseCode,
	}
}

// run attempts dd, hands the result to the flusher and goes on with the next delivery queued for the same
// endpoint, which inherits the slot; it returns when the endpoint's queue is empty.
func (d *dispatcher) run(dd ports.DueDelivery) {
	defer d.wg.Done()
	for {
		a, err := d.s.attempt(d.ctx, dd.Delivery, dd.Endpoint)
		if err != nil {
			d.s.logger.ErrorContext(d.ctx, "webhook attempt impossible; delivery left to its lease", "delivery", dd.Delivery.ID, "endpoint", dd.Endpoint.ID, "error", err)
		} else {
			a.Lease = dd.Lease
			d.results <- a
		}
		d.mu.Lock()
		next, ok := d.slots.release(dd.Endpoint.ID)
		d.mu.Unlock()
		if !ok {
			select {
			case d.freed <- struct{}{}:
			default:
			}
			return
		}
		dd = next
	}
}

// flushResults records attempt results in batches of at most FlushBatch, each written no later than
// FlushInterval after its first result arrived, until results is closed; then it records the rest.
func (s *Service) flushResults(ctx context.Context, results <-chan ports.WebhookAttempt) {
	var batch []ports.WebhookAttempt
	timer := time.NewTimer(s.cfg.FlushInterval)
	timer.Stop()
	for {
		select {
		case r, ok := <-results:
			if !ok {
				timer.Stop()
				s.record(ctx, batch)
				return
			}
			if len(batch) == 0 {
				timer.Reset(s.cfg.FlushInterval)
			}
			batch = append(batch, r)
			if len(batch) >= s.cfg.FlushBatch {
				timer.Stop()
				s.record(ctx, batch)
				batch = nil
			}
		case <-timer.C:
			s.record(ctx, batch)
			batch = nil
		}
	}
}

// record writes one batch of results, trying again after a short pause when the store fails.
func (s *Service) record(ctx context.Context, batch []ports.WebhookAttempt) {
	if len(batch) == 0 {
		return
	}
	for try := 1; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, recordTimeout)
		err := s.store.RecordAttempts(rctx, batch)
		cancel()
		if err == nil {
			return
		}
		if try == recordTries {
			s.logger.ErrorContext(ctx, "webhook results not recorded; deliveries will be attempted again when their leases expire", "results", len(batch), "error", err)
			return
		}
		wait := poll.Backoff(s.cfg.FlushInterval, time.Second, try)
		s.logger.WarnContext(ctx, "recording webhook results failed; retrying", "results", len(batch), "error", err, "wait", wait)
		time.Sleep(wait)
	}
}

// admission is what slots.admit decided for a claimed delivery.
type admission int

const (
	// admitStart: the delivery took an in-flight slot and an endpoint slot; attempt it now.
	admitStart admission = iota
	// admitWait: its endpoint's slots are taken; it is queued and will inherit the next one released.
	admitWait
	// admitDrop: its endpoint's backlog is full (waiting longer could outlast the lease), no in-flight slot
	// is free, or the dispatcher is stopping. It is not attempted; its lease expires and it is claimed
	// again.
	admitDrop
)

// slots is the dispatcher's accounting of in-flight and per-endpoint slots and of the per-endpoint queues.
// It does no locking and no I/O, so its rules are testable on their own.
type slots struct {
	inFlight, perEndpoint, backlog int
	running                        int
	waiting                        int // deliveries queued behind their endpoints' running attempts
	endpoints                      map[string]*endpointSlots
	stopped                        bool
}

type endpointSlots struct {
	running int
	waiting []ports.DueDelivery
}

// newSlots returns empty accounting for at most inFlight attempts, perEndpoint per endpoint, and backlog
// deliveries (running and waiting) per endpoint.
func newSlots(inFlight, perEndpoint, backlog int) *slots {
	return &slots{inFlight: inFlight, perEndpoint: perEndpoint, backlog: max(backlog, perEndpoint), endpoints: make(map[string]*endpointSlots)}
}

// free returns how many more deliveries the process can hold. Queued deliveries count: claiming more than
// can be held would only leave the surplus leased and untouched.
func (s *slots) free() int { return s.inFlight - s.running - s.waiting }

// admit decides what happens to a claimed delivery: drop it when its endpoint's backlog or the process is
// full, start it when its endpoint has a free slot, queue it behind the endpoint's running attempts
// otherwise.
func (s *slots) admit(d ports.DueDelivery) admission {
	if s.stopped {
		return admitDrop
	}
	id := d.Endpoint.ID
	e := s.endpoints[id]
	if e == nil {
		e = &endpointSlots{}
		s.endpoints[id] = e
	}
	switch {
	case e.running+len(e.waiting) >= s.backlog:
		s.forget(id, e)
		return admitDrop
	case s.running+s.waiting >= s.inFlight:
		// Claims never exceed free(), so this happens only if a caller claims too much.
		s.forget(id, e)
		return admitDrop
	case e.running < s.perEndpoint:
		e.running++
		s.running++
		return admitStart
	default:
		e.waiting = append(e.waiting, d)
		s.waiting++
		return admitWait
	}
}

// release ends one attempt against endpointID. When a delivery is queued for that endpoint (and the
// dispatcher is not stopping) it is returned with ok set and inherits both slots; otherwise both slots are
// freed.
func (s *slots) release(endpointID string) (next ports.DueDelivery, ok bool) {
	e := s.endpoints[endpointID]
	if e == nil || e.running == 0 {
		return ports.DueDelivery{}, false
	}
	if len(e.waiting) > 0 {
		next = e.waiting[0]
		e.waiting[0] = ports.DueDelivery{}
		e.waiting = e.waiting[1:]
		s.waiting--
		return next, true
	}
	e.running--
	s.running--
	s.forget(endpointID, e)
	return ports.DueDelivery{}, false
}

// stop drops every queued delivery and refuses new ones; running attempts still release their slots. It
// returns the dropped deliveries.
func (s *slots) stop() []ports.DueDelivery {
	s.stopped = true
	var dropped []ports.DueDelivery
	for id, e := range s.endpoints {
		dropped = append(dropped, e.waiting...)
		e.waiting = nil
		s.forget(id, e)
	}
	s.waiting = 0
	return dropped
}

// forget removes an endpoint's entry once nothing runs or waits for it, so the map holds only busy
// endpoints.
func (s *slots) forget(id string, e *endpointSlots) {
	if e.running == 0 && len(e.waiting) == 0 {
		delete(s.endpoints, id)
	}
}
