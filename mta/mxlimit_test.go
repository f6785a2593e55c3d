package mta_test

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/postmill/postmill/ports"
)

// A recipient domain may publish hundreds of MX hosts with many addresses each, all of them answering
// slowly or not at all. One delivery attempt looks up at most ten MX hosts (the most preferred) and opens
// at most five connections (Postfix's smtp_mx_address_limit), then defers: it does not walk the whole
// list, holding a worker for hours and looking up every host.
func TestOneAttemptTriesBoundedHostsAndAddresses(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	addr := serveLoopback(t, "127.0.0.1", func(c net.Conn) {
		conns.Add(1)
		_, _ = io.WriteString(c, "421 4.3.2 busy, try another\r\n")
	})
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)

	r := newResolver()
	var mxs []ports.MX
	for i := range 300 {
		host := fmt.Sprintf("mx%d.many.test", i)
		mxs = append(mxs, ports.MX{Host: host, Preference: uint16(i)})
		r.IP(host, "127.0.0.1", "127.0.0.1", "127.0.0.1")
	}
	r.MX("many.test", mxs...)
	h := newHarness(t, baseConfig(port), r).start()
	rep, st := h.Send(outbound(t, "many.test", "a@many.test"))
	if o := rep.Recipients[0]; o.Kind != ports.OutcomeDeferred || !strings.Contains(o.Response, "421") || !st.Ack {
		t.Errorf("outcome %s %q ack=%v; want deferred with the last 421", o.Kind, o.Response, st.Ack)
	}
	if n := conns.Load(); n != 5 {
		t.Errorf("%d connections in one attempt; want 5", n)
	}
	var lookups []string
	for _, q := range r.Asked() {
		if strings.HasPrefix(q, "IP ") {
			lookups = append(lookups, q)
		}
	}
	// Five connections over hosts of three addresses each: the first two hosts, in preference order.
	if want := []string{"IP mx0.many.test", "IP mx1.many.test"}; strings.Join(lookups, ",") != strings.Join(want, ",") {
		t.Errorf("%d address lookups, the first %q; want %v", len(lookups), lookups[:min(len(lookups), 3)], want)
	}
}
