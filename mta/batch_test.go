package mta_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

// batchingService is the harness's DeliveryService taking batches (ports.DeliveryBatcher), as the Connect
// client does. Each batch call takes a round trip's time; single calls are counted, as they should not
// happen; with fail set every batch call fails as a whole (the core unreachable).
type batchingService struct {
	*memDeliveryService
	mu             sync.Mutex
	loads, reports []int // sizes of the batch calls
	singles        int
	fail           bool
	roundTrip      time.Duration
	loadedJobs     map[string]int
}

func (s *batchingService) LoadOutbound(ctx context.Context, job ports.DeliveryJob) (ports.OutboundMessage, error) {
	s.mu.Lock()
	s.singles++
	s.mu.Unlock()
	return s.memDeliveryService.LoadOutbound(ctx, job)
}

func (s *batchingService) ReportDelivery(ctx context.Context, r ports.DeliveryReport) error {
	s.mu.Lock()
	s.singles++
	s.mu.Unlock()
	return s.memDeliveryService.ReportDelivery(ctx, r)
}

func (s *batchingService) LoadOutbounds(ctx context.Context, jobs []ports.DeliveryJob) ([]ports.OutboundResult, error) {
	time.Sleep(s.roundTrip)
	s.mu.Lock()
	s.loads = append(s.loads, len(jobs))
	fail := s.fail
	for _, j := range jobs {
		s.loadedJobs[j.ID]++
	}
	s.mu.Unlock()
	if fail {
		return nil, errors.New("core unreachable")
	}
	out := make([]ports.OutboundResult, len(jobs))
	for i, j := range jobs {
		out[i].Message, out[i].Err = s.memDeliveryService.LoadOutbound(ctx, j)
	}
	return out, nil
}

func (s *batchingService) ReportDeliveries(ctx context.Context, reports []ports.DeliveryReport) ([]error, error) {
	time.Sleep(s.roundTrip)
	s.mu.Lock()
	s.reports = append(s.reports, len(reports))
	s.mu.Unlock()
	errs := make([]error, len(reports))
	for i, r := range reports {
		errs[i] = s.memDeliveryService.ReportDelivery(ctx, r)
	}
	return errs, nil
}

func batchingHarness(t *testing.T) (*harness, *batchingService) {
	t.Helper()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{Pipelining: true})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	var bs *batchingService
	h := newHarness(t, baseConfig(srv.Port()), r, func(d *mta.Deps) {
		bs = &batchingService{memDeliveryService: d.Delivery.(*memDeliveryService), roundTrip: 20 * time.Millisecond,
			loadedJobs: map[string]int{}}
		d.Delivery, d.DeliveryBatch = bs, bs
	})
	return h, bs
}

func sum(v []int) (n int) {
	for _, x := range v {
		n += x
	}
	return n
}

// TestJobsAreLoadedAndReportedInBatches: with a Delivery service that takes batches, the jobs in flight
// together are loaded in shared calls and reported in shared calls, never one call per job, and each job is
// delivered and acked once.
func TestJobsAreLoadedAndReportedInBatches(t *testing.T) {
	t.Parallel()
	h, bs := batchingHarness(t)
	const n = 24
	for range n {
		h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
	}
	h.start()
	for range n {
		if rep := h.Report(); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %+v", rep.Recipients[0])
		}
	}
	for range n {
		if s := h.Settled(); !s.Ack {
			t.Fatalf("settlement %+v, want an ack", s)
		}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.singles != 0 || sum(bs.loads) != n || sum(bs.reports) != n {
		t.Fatalf("%d single calls, batches of loads %v and reports %v; want every job once, in batches", bs.singles, bs.loads, bs.reports)
	}
	if len(bs.loads) >= n || len(bs.reports) >= n {
		t.Fatalf("loads %v, reports %v: one call per job", bs.loads, bs.reports)
	}
}

// TestFailedBatchRetriesEveryJobLater: a batch call that fails as a whole (the core unreachable) sends
// nothing and hands each of its jobs back to the queue with a backoff, as a failed single load would.
func TestFailedBatchRetriesEveryJobLater(t *testing.T) {
	t.Parallel()
	h, bs := batchingHarness(t)
	bs.fail = true
	const n = 6
	for range n {
		h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
	}
	h.start()
	for range n {
		if s := h.Settled(); s.Ack || s.Delay <= 0 || s.Dead != "" {
			t.Fatalf("settlement %+v, want a nack after a backoff", s)
		}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if len(bs.reports) != 0 || bs.singles != 0 {
		t.Fatalf("reports %v, single calls %d; want nothing reported", bs.reports, bs.singles)
	}
}
