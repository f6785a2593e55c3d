package mta

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
)

// maxBatch bounds the jobs of one LoadOutbounds call and the reports of one ReportDeliveries call: with
// message bodies of a few kilobytes, one answer stays well below a megabyte.
const maxBatch = 128

// batchTimeout bounds one batch call, which runs detached from the jobs that wait for it.
const batchTimeout = time.Minute

// batcher groups the concurrent calls of one kind into batch calls: while one batch is in flight, the calls
// arriving queue up and go together in the next one. A job thus waits at most for the batch before its own,
// and across the Connect hop the MTA pays one round trip for every group of jobs instead of one per job.
// There is no goroutine while nothing is queued: the call that finds no batch in flight sends one with
// itself and then whatever queued meanwhile, until the queue is empty.
type batcher[Req, Res any] struct {
	// send makes one batch call: res[i] and errs[i] answer reqs[i]; err fails every item.
	send func(ctx context.Context, reqs []Req) (res []Res, errs []error, err error)

	mu     sync.Mutex
	queue  []*batchItem[Req, Res]
	active bool
}

type batchItem[Req, Res any] struct {
	req  Req
	res  Res
	err  error
	done chan struct{}
}

// do queues req and returns its answer, or ctx's error if ctx ends first (the item is still sent).
func (b *batcher[Req, Res]) do(ctx context.Context, req Req) (Res, error) {
	it := &batchItem[Req, Res]{req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, it)
	lead := !b.active
	b.active = true
	b.mu.Unlock()
	if lead {
		b.drain(ctx)
	}
	select {
	case <-it.done:
		return it.res, it.err
	case <-ctx.Done():
		var zero Res
		return zero, ctx.Err()
	}
}

// drain sends batches until the queue is empty. The first batch (the caller's own) is sent on the calling
// goroutine; what queued meanwhile goes on in a goroutine of its own, so the caller is answered at once.
func (b *batcher[Req, Res]) drain(ctx context.Context) {
	group := b.take()
	if group == nil {
		return
	}
	b.sendGroup(ctx, group)
	go func() {
		for g := b.take(); g != nil; g = b.take() {
			b.sendGroup(ctx, g)
		}
	}()
}

// take removes up to maxBatch queued items; with none left it ends the drain.
func (b *batcher[Req, Res]) take() []*batchItem[Req, Res] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.active = false
		return nil
	}
	n := min(len(b.queue), maxBatch)
	group := b.queue[:n:n]
	b.queue = append([]*batchItem[Req, Res](nil), b.queue[n:]...)
	return group
}

func (b *batcher[Req, Res]) sendGroup(ctx context.Context, group []*batchItem[Req, Res]) {
	reqs := make([]Req, len(group))
	for i, it := range group {
		reqs[i] = it.req
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	res, errs, err := b.send(cctx, reqs)
	cancel()
	if err == nil && (len(res) != len(group) || len(errs) != len(group)) {
		err = fmt.Errorf("a batch of %d was answered with %d results", len(group), len(errs))
	}
	for i, it := range group {
		if err != nil {
			it.err = err
		} else {
			it.res, it.err = res[i], errs[i]
		}
		close(it.done)
	}
}

// batching holds the MTA's batchers for Deps.DeliveryBatch.
type batching struct {
	loads   batcher[ports.DeliveryJob, ports.OutboundMessage]
	reports batcher[ports.DeliveryReport, struct{}]
}

func newBatching(b ports.DeliveryBatcher) *batching {
	bt := &batching{}
	bt.loads.send = func(ctx context.Context, jobs []ports.DeliveryJob) ([]ports.OutboundMessage, []error, error) {
		results, err := b.LoadOutbounds(ctx, jobs)
		if err != nil {
			return nil, nil, err
		}
		msgs, errs := make([]ports.OutboundMessage, len(results)), make([]error, len(results))
		for i, r := range results {
			msgs[i], errs[i] = r.Message, r.Err
		}
		return msgs, errs, nil
	}
	bt.reports.send = func(ctx context.Context, reports []ports.DeliveryReport) ([]struct{}, []error, error) {
		errs, err := b.ReportDeliveries(ctx, reports)
		if err != nil {
			return nil, nil, err
		}
		return make([]struct{}, len(errs)), errs, nil
	}
	return bt
}

// loadOutbound loads a job's message, in a batch with the jobs loading at the same time when the Delivery
// service takes batches. The job keeps the lane the queue gave it (a core across Connect answers without
// it), which orders it in the destination's window.
func (m *MTA) loadOutbound(ctx context.Context, job ports.DeliveryJob) (ports.OutboundMessage, error) {
	var out ports.OutboundMessage
	var err error
	if m.batch == nil {
		out, err = m.deps.Delivery.LoadOutbound(ctx, job)
	} else {
		out, err = m.batch.loads.do(ctx, job)
	}
	if err == nil && out.Job.ID == job.ID {
		out.Job.Bulk = job.Bulk
	}
	return out, err
}

// reportDelivery records a job's outcome, in a batch with the reports made at the same time when the
// Delivery service takes batches.
func (m *MTA) reportDelivery(ctx context.Context, r ports.DeliveryReport) error {
	if m.batch == nil {
		return m.deps.Delivery.ReportDelivery(ctx, r)
	}
	_, err := m.batch.reports.do(ctx, r)
	return err
}
