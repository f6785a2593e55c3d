package mta_test

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

// floodServer greets, answers EHLO if told how, and then (after the client's next command, if the
// greeting was whole) writes the same bytes for ever: what a
// hostile receiving server can do to make a client read without end. It counts what it managed to write
// before the client hung up.
type floodServer struct {
	Addr    string
	written atomic.Int64
}

func mustFloodServer(tb testing.TB, greeting, ehlo, flood string) *floodServer {
	tb.Helper()
	s := &floodServer{}
	s.Addr = serveLoopback(tb, "127.0.0.1", func(c net.Conn) {
		if _, err := io.WriteString(c, greeting); err != nil {
			return
		}
		r := bufio.NewReader(c)
		if ehlo != "" { // EHLO is answered, and the flood answers the next command
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
			if _, err := io.WriteString(c, ehlo); err != nil {
				return
			}
		}
		if strings.HasSuffix(greeting, "\r\n") { // a whole greeting: the flood answers a command
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
		}
		chunk := []byte(strings.Repeat(flood, 64<<10/len(flood)))
		for {
			n, err := c.Write(chunk)
			s.written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	return s
}

// Port is the server's port.
func (s *floodServer) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

// A receiving server that answers with a reply that never ends — one endless line, or continuation lines
// for ever — gets the delivery deferred after a bounded read (the MTA reads at most maxReplyBytes between
// two of its own writes), not after the command timeout with the whole flood in memory.
func TestEndlessReplyIsCutShort(t *testing.T) {
	t.Parallel()
	// counted: the MTA's bound cuts it (go-smtp's own line bound cuts an endless greeting line first).
	cases := []struct {
		name, greeting, ehlo, flood string
		counted                     bool
	}{
		{"greeting without end of line", "220-", "", "x", false},
		{"EHLO reply of endless continuation lines", "220 flood.test ESMTP\r\n", "", "250-flood.test says hello again\r\n", true},
		// Read by the MTA's own reader of pipelined replies, not by go-smtp's client.
		{"pipelined MAIL reply without end of line", "220 flood.test ESMTP\r\n",
			"250-flood.test\r\n250-PIPELINING\r\n250 8BITMIME\r\n", "x", true},
		{"pipelined MAIL reply of endless continuation lines", "220 flood.test ESMTP\r\n",
			"250-flood.test\r\n250-PIPELINING\r\n250 8BITMIME\r\n", "250-still going\r\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := mustFloodServer(t, tc.greeting, tc.ehlo, tc.flood)
			r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
			reg := prometheus.NewRegistry()
			h := newHarness(t, baseConfig(fs.Port()), r, func(d *mta.Deps) { d.Registerer = reg }).start()
			rep, st := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
			got := outcomes(rep)["r1"]
			if !strings.HasPrefix(got, "deferred|4.4.2 connection failed") || rep.Handed || !st.Ack {
				t.Errorf("outcome %q handed=%v ack=%v; want deferred as a failed connection", got, rep.Handed, st.Ack)
			}
			t.Logf("outcome %q after the server wrote %d KiB", got, fs.written.Load()>>10)
			if n := counterValue(t, reg, "postmill_mta_replies_cut_total"); (n == 1) != tc.counted || n > 1 {
				t.Errorf("postmill_mta_replies_cut_total = %v; want 1 if the MTA's bound cut it (%v), else 0", n, tc.counted)
			}
			// The kernel's socket buffers take a few MiB more than the MTA reads; without the bound the
			// server keeps writing for the whole command timeout (5 s here), hundreds of MiB.
			if n := fs.written.Load(); n > 32<<20 {
				t.Errorf("the server wrote %d MiB before the MTA gave up", n>>20)
			}
		})
	}
}

// counterValue is the value of the counter name in reg (0 when it has no sample).
func counterValue(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
