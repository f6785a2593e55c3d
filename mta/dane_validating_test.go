package mta_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/adapters/dns"
	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/mta/tlspolicy"
	"github.com/postmill/postmill/mta/tlspolicy/tlspolicytest"
	"github.com/postmill/postmill/ports"
)

// DANE end to end with real DNSSEC: the zone signed.test is signed with ldns-signzone, served by NSD and
// validated by Unbound (dnstest.NewValidating), and the MTA resolves everything — MX, addresses, TLSA —
// through Unbound, so the AD bit the policy engine trusts is Unbound's verdict. Three domains of the zone
// each have one MX host on 127.0.0.1, where the test's SMTP server listens with a self-signed certificate:
//   - good: a TLSA record (3 1 1) of the server's key → delivered under DANE;
//   - wrong: a TLSA record of another key → deferred, nothing sent;
//   - bogus: the right TLSA record with a corrupted signature → Unbound answers SERVFAIL → deferred,
//     nothing sent.
func TestDANEWithAValidatingResolver(t *testing.T) {
	t.Parallel()
	cert := tlspolicytest.SelfSigned(t, "some.name.test")
	other := tlspolicytest.SelfSigned(t, "some.name.test")
	records, corrupt := tlspolicytest.DANEZone(cert.Leaf, other.Leaf)
	v := dnstest.NewValidating(t, "signed.test", records, corrupt)

	res := dns.New(v.Resolver, dns.Options{Timeout: 2 * time.Second})
	reports := t.TempDir()
	engine, err := tlspolicy.New(tlspolicy.Config{
		AllowNets:    []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		FetchTimeout: 3 * time.Second, ReportDir: reports, Reporter: "mta.postmill.test",
	}, res, res)
	if err != nil {
		t.Fatal(err)
	}
	b := &secureBundle{res: res, engine: engine, reports: reports}

	cases := []struct {
		domain   string
		want     ports.DeliveryOutcomeKind
		response string
		result   string // the TLS-RPT failure type counted, "" for a success
	}{
		{"good.signed.test", ports.OutcomeDelivered, "(tls: dane)", ""},
		{"wrong.signed.test", ports.OutcomeDeferred, "tlsa-invalid", tlspolicy.ResultTLSAInvalid},
		{"bogus.signed.test", ports.OutcomeDeferred, "TLSA lookup of _25._tcp.mx.bogus.signed.test failed", tlspolicy.ResultDNSSECInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.domain, func(t *testing.T) {
			t.Parallel()
			ts := mustServer(t, serverOptions{TLS: tlspolicytest.ServerTLS(cert)})
			reg := prometheus.NewRegistry()
			h := newHarness(t, baseConfig(ts.Port()), newResolver(), func(d *mta.Deps) {
				d.Resolver = b.res
				d.Transport = b.engine
				d.Registerer = reg
			}).start()

			rep, _ := h.Send(outbound(t, tc.domain, "a@"+tc.domain))
			o := rep.Recipients[0]
			if o.Kind != tc.want || !strings.Contains(o.Response, tc.response) {
				t.Fatalf("outcome %s %q; want %s containing %q", o.Kind, o.Response, tc.want, tc.response)
			}
			envs := ts.Envelopes()
			if tc.want == ports.OutcomeDelivered {
				if len(envs) != 1 || !envs[0].TLS {
					t.Fatalf("server saw %d transactions, want one under TLS", len(envs))
				}
				if got := counter(t, reg, "postmill_mta_tls_total", "dane"); got != 1 {
					t.Errorf(`postmill_mta_tls_total{mode="dane"} = %v, want 1`, got)
				}
			} else if len(envs) != 0 {
				t.Fatalf("server received %d transactions although DANE failed", len(envs))
			}
			failures, ok := b.failures(t, tc.domain)
			if tc.result == "" && (ok != 1 || len(failures) != 0) || tc.result != "" && failures[tc.result] < 1 {
				t.Errorf("TLS-RPT for %s: %d successes, failures %v", tc.domain, ok, failures)
			}
		})
	}
}
