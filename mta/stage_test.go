package mta_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

// gatedService holds every report until the gate opens, as a slow core would.
type gatedService struct {
	*memDeliveryService
	gate chan struct{}
}

func (s *gatedService) ReportDelivery(ctx context.Context, r ports.DeliveryReport) error {
	<-s.gate
	return s.memDeliveryService.ReportDelivery(ctx, r)
}

// TestReportsHappenBehindTheConnection: a job whose SMTP transaction is over frees its worker while its
// report waits for a slow core, so the next jobs are delivered meanwhile; up to Workers jobs settle behind
// at once, and then the pipeline waits for them. Every job is reported and acked once the core answers.
func TestReportsHappenBehindTheConnection(t *testing.T) {
	t.Parallel()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{Pipelining: true})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(srv.Port())
	cfg.Workers = 2
	gate := make(chan struct{})
	h := newHarness(t, cfg, r, func(d *mta.Deps) {
		d.Delivery = &gatedService{memDeliveryService: d.Delivery.(*memDeliveryService), gate: gate}
	})
	const n = 6
	for range n {
		h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
	}
	h.start()
	// Two jobs settle (held at the gate) and two more finish their transactions and wait to hand over.
	deadline := time.Now().Add(10 * time.Second)
	for srv.Counts().Contents < 2*cfg.Workers && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // time for a job that should wait to go ahead wrongly
	if c := srv.Counts(); c.Contents != 2*cfg.Workers {
		t.Fatalf("%d messages sent while the core held every report; want %d (Workers sending and settling)", c.Contents, 2*cfg.Workers)
	}
	close(gate)
	for range n {
		if rep := h.Report(); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %+v", rep.Recipients[0])
		}
		if s := h.Settled(); !s.Ack {
			t.Fatalf("settlement %+v, want an ack", s)
		}
	}
	if c := srv.Counts(); c.Contents != n {
		t.Fatalf("%d messages sent, want %d", c.Contents, n)
	}
}
