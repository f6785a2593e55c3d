package mta_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/mta/simulator"
	"github.com/postmill/postmill/ports"
)

// reportSink stands in for Postmill's MX listener: a real SMTP server recording the recipients of what
// it is sent.
type reportSink struct {
	addr string
	got  chan string // the envelope recipient of each message
}

func mustReportSink(tb testing.TB) *reportSink {
	tb.Helper()
	s := &reportSink{got: make(chan string, 10)}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &reportSession{s: s}, nil }))
	srv.Domain = "mx.postmill.test"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return s
}

type reportSession struct {
	s    *reportSink
	rcpt string
}

func (r *reportSession) Mail(string, *smtp.MailOptions) error      { return nil }
func (r *reportSession) Rcpt(to string, _ *smtp.RcptOptions) error { r.rcpt = to; return nil }
func (r *reportSession) Reset()                                    {}
func (r *reportSession) Logout() error                             { return nil }
func (r *reportSession) Data(rd io.Reader) error {
	if _, err := io.Copy(io.Discard, rd); err != nil {
		return err
	}
	r.s.got <- r.rcpt
	return nil
}

// mustSimulatorHarness runs the MTA with the simulator of this process routed in, and with nothing else
// reachable: the relay is a closed port, no name resolves, and no address is allow-listed. The
// simulator's complaint reports go to mx.
func mustSimulatorHarness(t *testing.T, mx *reportSink) (*harness, *staticResolver) {
	t.Helper()
	sim, err := simulator.New(simulator.Config{MX: func() string { return mx.addr }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := sim.Listen()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = sim.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sim.Shutdown(ctx)
	})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	relay := closed.Addr().String()
	_ = closed.Close()

	cfg := baseConfig(25)
	cfg.AllowNets = nil
	cfg.Relay = relay
	cfg.RequireTLS = true
	cfg.SimulatorDomain, cfg.SimulatorAddr = simulator.Domain, addr
	r := newResolver()
	h := newHarness(t, cfg, r, func(d *mta.Deps) { d.Delivery, d.DeliveryBatch = sim.Delivery(d.Delivery, d.DeliveryBatch) })
	return h.start(), r
}

// TestSimulatorRoute: mail for the simulator's domain reaches the simulator — not the relay, without DNS,
// past the forbidden-address rule for its loopback address and without the TLS the configuration requires
// elsewhere — and each address's reply becomes the outcome real mail would get.
func TestSimulatorRoute(t *testing.T) {
	t.Parallel()
	mx := mustReportSink(t)
	h, r := mustSimulatorHarness(t, mx)
	sim := func(local string) string { return local + "@" + simulator.Domain }

	out := outbound(t, simulator.Domain, sim("delivered"), sim("bounce"), sim("soft-bounce"), sim("delay"), sim("complaint"), sim("who"))
	out.ReturnPath = "b-route@bounce.acme.test"
	rep, st := h.Send(out)
	if !st.Ack || !rep.Handed {
		t.Fatalf("ack=%v handed=%v", st.Ack, rep.Handed)
	}
	got := outcomes(rep)
	for id, want := range map[string]string{
		"r1": "delivered|250 2.0.0 Ok: delivered to the Postmill simulator",
		"r2": "bounced|550 5.1.1 Mailbox does not exist (simulated hard bounce)",
		"r3": "deferred|450 4.2.2 Mailbox full, try again later (simulated soft bounce, attempt 1 of 2 deferred)",
		"r4": "deferred|451 4.7.1 Greylisted, try again later (simulated delay)",
		"r5": "delivered|250 2.0.0 Ok: delivered to the Postmill simulator",
		"r6": "bounced|550 5.1.1 No such simulator address; use delivered, bounce, soft-bounce, complaint or delay",
	} {
		if got[id] != want {
			t.Errorf("%s: %q, want %q", id, got[id], want)
		}
	}
	if asked := r.Asked(); len(asked) != 0 {
		t.Errorf("DNS was asked %v", asked)
	}

	// The complaint report goes to the return path once the report above was recorded.
	select {
	case rcpt := <-mx.got:
		if rcpt != out.ReturnPath {
			t.Errorf("complaint report to %q, want the return path %q", rcpt, out.ReturnPath)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no complaint report reached the MX listener")
	}

	// Retries of soft-bounce@ (the same return path): deferred once more, then delivered.
	for i, want := range []ports.DeliveryOutcomeKind{ports.OutcomeDeferred, ports.OutcomeDelivered} {
		again := outbound(t, simulator.Domain, sim("soft-bounce"))
		again.ReturnPath = out.ReturnPath
		again.Job.Attempt = i + 2
		rep, _ := h.Send(again)
		if o := rep.Recipients[0]; o.Kind != want {
			t.Errorf("soft-bounce attempt %d: %s %q, want %s", i+2, o.Kind, o.Response, want)
		}
	}
	select {
	case rcpt := <-mx.got:
		t.Errorf("an unexpected report to %s", rcpt)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestSimulatorConfigValidate: the simulator's route takes a domain and a loopback address together.
func TestSimulatorConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cfg  mta.Config
		ok   bool
	}{
		{"loopback", mta.Config{SimulatorDomain: simulator.Domain, SimulatorAddr: netip.MustParseAddrPort("127.0.0.1:2600")}, true},
		{"IPv6 loopback", mta.Config{SimulatorDomain: simulator.Domain, SimulatorAddr: netip.MustParseAddrPort("[::1]:2600")}, true},
		{"private address", mta.Config{SimulatorDomain: simulator.Domain, SimulatorAddr: netip.MustParseAddrPort("10.0.0.5:25")}, false},
		{"no port", mta.Config{SimulatorDomain: simulator.Domain, SimulatorAddr: netip.MustParseAddrPort("127.0.0.1:0")}, false},
		{"domain alone", mta.Config{SimulatorDomain: simulator.Domain}, false},
		{"address alone", mta.Config{SimulatorAddr: netip.MustParseAddrPort("127.0.0.1:2600")}, false},
		{"not a domain", mta.Config{SimulatorDomain: "a b", SimulatorAddr: netip.MustParseAddrPort("127.0.0.1:2600")}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// TestSimulatorRouteIsOnlyItsDomain: a neighbouring domain is routed as usual (here: the relay, which is
// closed, so deferred), never to the simulator.
func TestSimulatorRouteIsOnlyItsDomain(t *testing.T) {
	t.Parallel()
	h, _ := mustSimulatorHarness(t, mustReportSink(t))
	for _, domain := range []string{"sub." + simulator.Domain, "postmill.test"} {
		rep, _ := h.Send(outbound(t, domain, "delivered@"+domain))
		if o := rep.Recipients[0]; o.Kind != ports.OutcomeDeferred || !strings.Contains(o.Response, "connect") {
			t.Errorf("%s: %s %q, want deferred by the closed relay", domain, o.Kind, o.Response)
		}
	}
}
