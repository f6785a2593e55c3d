package mta_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

// guardConfig allows 127.0.0.1 only: the rest of 127.0.0.0/8 stands for the forbidden addresses (an
// internal relay, the metadata service) that a tenant's MX records might point at.
func guardConfig(port int) mta.Config {
	cfg := baseConfig(port)
	cfg.AllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	return cfg
}

// TestForbiddenMXFailsWithoutConnecting: an MX host, or a domain's own address (implicit MX), on a
// forbidden address fails the recipients for good with the reason, and the MTA never connects there —
// a server listening at that address sees nothing.
func TestForbiddenMXFailsWithoutConnecting(t *testing.T) {
	t.Parallel()
	port, servers := mustServersOnOnePort(t, []string{"127.0.0.2"}, []serverOptions{{}})
	internal := servers[0]
	cases := []struct {
		name  string
		setup func(*staticResolver)
		want  string
	}{
		{"MX host", func(r *staticResolver) {
			r.MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.2")
		}, "5.4.4 MX host mx.rcpt.test has only forbidden addresses (127.0.0.2 is loopback (127.0.0.0/8))"},
		{"every MX host", func(r *staticResolver) {
			r.MX("rcpt.test", ports.MX{Host: "a.rcpt.test", Preference: 10}, ports.MX{Host: "b.rcpt.test", Preference: 20}).
				IP("a.rcpt.test", "127.0.0.2").IP("b.rcpt.test", "::ffff:127.0.0.2", "::1")
		}, "5.4.4 MX host a.rcpt.test has only forbidden addresses"},
		{"implicit MX", func(r *staticResolver) {
			r.mxErr["rcpt.test"] = ports.DNSNoData
			r.IP("rcpt.test", "127.0.0.2")
		}, "5.4.4 recipient domain rcpt.test has no MX and only forbidden addresses (127.0.0.2 is loopback (127.0.0.0/8))"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newResolver()
			tc.setup(r)
			h := newHarness(t, guardConfig(port), r).start()
			rep, st := h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test"))
			if !st.Ack || rep.Handed {
				t.Errorf("ack=%v handed=%v", st.Ack, rep.Handed)
			}
			for _, o := range rep.Recipients {
				if o.Kind != ports.OutcomeFailed || !strings.HasPrefix(o.Response, tc.want) {
					t.Errorf("outcome %s %q, want failed %q", o.Kind, o.Response, tc.want)
				}
			}
		})
	}
	if accepts, _, _ := internal.Stats(); accepts != 0 {
		t.Fatalf("the forbidden address received %d connections", accepts)
	}
}

// TestForbiddenAddressesAreSkipped: forbidden addresses are dropped and the permitted ones used — another
// address of the same host, or the next MX — without any connection to the forbidden one. A forbidden MX
// next to an unreachable permitted one defers: the permitted one may come back.
func TestForbiddenAddressesAreSkipped(t *testing.T) {
	t.Parallel()
	port, servers := mustServersOnOnePort(t, []string{"127.0.0.1", "127.0.0.2"}, []serverOptions{{}, {}})
	allowed, internal := servers[0], servers[1]

	r := newResolver().
		MX("mixed.test", ports.MX{Host: "mx.mixed.test"}).IP("mx.mixed.test", "127.0.0.2", "127.0.0.1").
		MX("second.test", ports.MX{Host: "inside.second.test", Preference: 10}, ports.MX{Host: "outside.second.test", Preference: 20}).
		IP("inside.second.test", "127.0.0.2").IP("outside.second.test", "127.0.0.1")
	h := newHarness(t, guardConfig(port), r).start()
	for _, domain := range []string{"mixed.test", "second.test"} {
		if rep, _ := h.Send(outbound(t, domain, "a@"+domain)); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Errorf("%s: outcome %v", domain, rep.Recipients[0])
		}
	}
	if n := len(allowed.Envelopes()); n != 2 {
		t.Errorf("the permitted address received %d transactions, want 2", n)
	}
	if accepts, _, _ := internal.Stats(); accepts != 0 {
		t.Fatalf("the forbidden address received %d connections", accepts)
	}

	// 127.0.0.3 is permitted here but nothing listens there: deferred, not failed.
	cfg := guardConfig(port)
	cfg.AllowNets = append(cfg.AllowNets, netip.MustParsePrefix("127.0.0.3/32"))
	r2 := newResolver().
		MX("down.test", ports.MX{Host: "inside.down.test", Preference: 10}, ports.MX{Host: "outside.down.test", Preference: 20}).
		IP("inside.down.test", "127.0.0.2").IP("outside.down.test", "127.0.0.3")
	h2 := newHarness(t, cfg, r2).start()
	rep, _ := h2.Send(outbound(t, "down.test", "a@down.test"))
	if o := rep.Recipients[0]; o.Kind != ports.OutcomeDeferred {
		t.Errorf("outcome %s %q, want deferred", o.Kind, o.Response)
	}
	if accepts, _, _ := internal.Stats(); accepts != 0 {
		t.Fatalf("the forbidden address received %d connections", accepts)
	}
}

// TestRelayIsTrustedByConfiguration: the relay (POSTMILL_MTA_RELAY) may be on a loopback or private
// address without being allow-listed.
func TestRelayIsTrustedByConfiguration(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	cfg := baseConfig(25)
	cfg.AllowNets = nil
	cfg.Relay = ts.Addr
	h := newHarness(t, cfg, newResolver()).start()
	if rep, _ := h.Send(outbound(t, "far-away.test", "a@far-away.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
		t.Fatalf("outcome %v", rep.Recipients[0])
	}
}

func TestConfigValidateRetriesAndAllowNets(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  mta.Config
		ok   bool
	}{
		{"allow list", mta.Config{AllowNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, true},
		{"invalid allow prefix", mta.Config{AllowNets: []netip.Prefix{{}}}, false},
		{"negative max deliveries", mta.Config{MaxDeliveries: -1}, false},
		{"negative backoff", mta.Config{RedeliveryBackoff: -1}, false},
		{"cap below the backoff", mta.Config{RedeliveryBackoff: time.Minute, MaxRedeliveryBackoff: time.Second}, false},
		{"backoff above the default cap", mta.Config{RedeliveryBackoff: time.Hour}, true},
	}
	for _, tc := range cases {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
