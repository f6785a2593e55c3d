package mta_test

import (
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// BenchmarkOneConnection measures messages per second through a single SMTP connection (Concurrency 1) on
// loopback, every message built, DKIM-signed (RSA-2048), delivered, journaled in memory, reported and
// acked; the receiving server offers CHUNKING and PIPELINING, PIPELINING only or neither, and answers at once or after a 1 ms wait per
// group of replies (a round trip to a nearby receiver). Run with -benchtime=2000x or more.
func BenchmarkOneConnection(b *testing.B) {
	for _, tc := range []struct {
		name       string
		pipelining bool
		chunking   bool
		delay      time.Duration
	}{
		{"chunking", true, true, 0}, {"pipelining", true, false, 0}, {"one-command-at-a-time", false, false, 0},
		{"chunking,1ms", true, true, time.Millisecond}, {"pipelining,1ms", true, false, time.Millisecond},
		{"one-command-at-a-time,1ms", false, false, time.Millisecond},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := mustRawServer(b, "127.0.0.1", rawOptions{Pipelining: tc.pipelining, Chunking: tc.chunking, ReplyDelay: tc.delay})
			r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
			cfg := baseConfig(srv.Port())
			cfg.Concurrency = 1
			cfg.Workers = 64
			h := newHarness(b, cfg, r)
			for range b.N {
				h.Enqueue(outbound(b, "rcpt.test", "a@rcpt.test"))
			}
			go func() { // the harness's queue hands each settlement over on a bounded channel
				for range b.N {
					<-h.Queue.settled
				}
			}()
			start := time.Now()
			h.start()
			for range b.N {
				if rep := h.Report(); rep.Recipients[0].Kind != ports.OutcomeDelivered {
					b.Fatalf("outcome %+v", rep.Recipients[0])
				}
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
			if c := srv.Counts(); c.Conns != 1 {
				b.Fatalf("%d connections, want 1", c.Conns)
			}
		})
	}
}
