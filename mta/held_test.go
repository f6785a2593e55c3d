package mta_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

// TestHeldJobIsAckedWithoutDeliveryOrRedelivery: the core answers LoadOutbound with DeliveryHeld (the
// organization is paused, or the sending domain suspended) and keeps the job itself. The MTA acknowledges
// the job at its first delivery: nothing is sent, nothing is reported, and the job does not come back to
// use up redeliveries until it is dead-lettered.
func TestHeldJobIsAckedWithoutDeliveryOrRedelivery(t *testing.T) {
	t.Parallel()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	reg := prometheus.NewRegistry()
	h := newHarness(t, fastRetries(baseConfig(srv.Port()), 3), r, func(d *mta.Deps) { d.Registerer = reg })
	// Wrapped, as the core returns it; the error keeps its code and reason across the RPC boundary too.
	h.Service.loadErr = fmt.Errorf("sending: %w", ports.DeliveryHeld(ports.HoldOrganizationPaused))
	h.start()
	h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))

	st := h.Settled()
	if !st.Ack || st.Deliveries != 1 || st.Dead != "" {
		t.Fatalf("settlement %+v, want an ack at the first delivery", st)
	}
	quiet()
	select {
	case st := <-h.Queue.settled:
		t.Fatalf("the held job came back: %+v", st)
	case rep := <-h.Service.reports:
		t.Fatalf("a held job was reported: %+v", rep)
	default:
	}
	if c := srv.Counts(); c.Conns != 0 {
		t.Errorf("%d connections for a held job", c.Conns)
	}
	if got := counter(t, reg, "postmill_mta_jobs_total", "held"); got != 1 {
		t.Errorf("held jobs %v, want 1", got)
	}
}
