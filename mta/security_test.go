package mta_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
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

// secureBundle is what transport security tests deliver through, all over real sockets: a DNS server
// (dnstest, whose AD bit stands in for a validating resolver), an HTTPS server publishing MTA-STS
// policies with a certificate from ca, and the policy engine; the MTA and the engine both resolve through
// adapters/dns.
type secureBundle struct {
	dns      *dnstest.Server
	res      *dns.Resolver
	ca       *tlspolicytest.CA
	policies *tlspolicytest.PolicyServer
	engine   *tlspolicy.Engine
	reports  string
}

func newSecureBundle(tb testing.TB, domains ...string) *secureBundle {
	tb.Helper()
	b := &secureBundle{dns: dnstest.New(tb), ca: tlspolicytest.NewCA(tb), reports: tb.TempDir()}
	b.res = dns.New(b.dns.Addr(), dns.Options{Timeout: 2 * time.Second})
	names := []string{"mta-sts.unused.test"}
	for _, d := range domains {
		names = append(names, "mta-sts."+d)
		b.dns.SetA("mta-sts."+d, netip.MustParseAddr("127.0.0.1"))
	}
	b.policies = tlspolicytest.ServePolicies(tb, b.ca.Issue(tb, false, names...))
	e, err := tlspolicy.New(tlspolicy.Config{
		RootCAs: b.ca.Pool, AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		HTTPSPort: b.policies.Port, FetchTimeout: 3 * time.Second, ReportDir: b.reports, Reporter: "mta.postmill.test",
	}, b.res, b.res)
	if err != nil {
		tb.Fatal(err)
	}
	b.engine = e
	return b
}

// mx publishes domain's one MX host on 127.0.0.1.
func (b *secureBundle) mx(domain, host string) {
	b.dns.SetMX(domain, ports.MX{Host: host, Preference: 10})
	b.dns.SetA(host, netip.MustParseAddr("127.0.0.1"))
}

// sts publishes an MTA-STS policy for domain.
func (b *secureBundle) sts(domain, mode string, mx ...string) {
	b.dns.SetTXT("_mta-sts."+domain, "v=STSv1; id=1")
	b.policies.Set(domain, tlspolicytest.Policy(mode, 86400, mx...))
}

// harness builds an MTA delivering to port through the bundle's resolver and engine.
func (b *secureBundle) harness(tb testing.TB, port int, reg *prometheus.Registry) *harness {
	tb.Helper()
	return newHarness(tb, baseConfig(port), newResolver(), func(d *mta.Deps) {
		d.Resolver = b.res
		d.Transport = b.engine
		if reg != nil {
			d.Registerer = reg
		}
	}).start()
}

// failures returns the failed sessions per result type in today's TLS-RPT report for domain.
func (b *secureBundle) failures(tb testing.TB, domain string) (map[string]int64, int64) {
	tb.Helper()
	if err := b.engine.Flush(context.Background()); err != nil {
		tb.Fatal(err)
	}
	day := time.Now().UTC().Format("2006-01-02")
	raw, err := os.ReadFile(filepath.Join(b.reports, day, tlspolicy.ReportFileName("mta.postmill.test", domain, day)+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	var r tlspolicy.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		tb.Fatal(err)
	}
	out, ok := map[string]int64{}, int64(0)
	for _, p := range r.Policies {
		ok += p.Summary.Successful
		for _, f := range p.FailureDetails {
			out[f.ResultType] += f.FailedSessionCount
		}
	}
	return out, ok
}

func TestMTASTS(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		mode     string
		policyMX string
		cert     string // the server's certificate: valid, wrong-name, self-signed, expired; "" offers no STARTTLS
		want     ports.DeliveryOutcomeKind
		response string // part of the outcome
		tls      bool   // the message went under TLS
		failure  string // the TLS-RPT result type counted, "" for a success
	}{
		{"enforce delivers over a valid certificate", "enforce", "*.rcpt.test", "valid",
			ports.OutcomeDelivered, "(tls: verified)", true, ""},
		{"enforce refuses a certificate for another name", "enforce", "*.rcpt.test", "wrong-name",
			ports.OutcomeDeferred, "certificate-host-mismatch", false, tlspolicy.ResultCertificateHostMismatch},
		{"enforce refuses a self-signed certificate", "enforce", "*.rcpt.test", "self-signed",
			ports.OutcomeDeferred, "certificate-not-trusted", false, tlspolicy.ResultCertificateNotTrusted},
		{"enforce refuses an expired certificate", "enforce", "*.rcpt.test", "expired",
			ports.OutcomeDeferred, "certificate-expired", false, tlspolicy.ResultCertificateExpired},
		{"enforce refuses a server without STARTTLS", "enforce", "*.rcpt.test", "",
			ports.OutcomeDeferred, "TLS is required", false, tlspolicy.ResultSTARTTLSNotSupported},
		{"enforce refuses an MX outside the policy", "enforce", "mx.elsewhere.test", "valid",
			ports.OutcomeDeferred, "does not match the MTA-STS policy", false, tlspolicy.ResultValidationFailure},
		{"testing delivers despite a bad certificate and reports it", "testing", "*.rcpt.test", "wrong-name",
			ports.OutcomeDelivered, "(sent without TLS: STARTTLS handshake with mx.rcpt.test", false, tlspolicy.ResultCertificateHostMismatch},
		{"testing delivers over a valid certificate", "testing", "*.rcpt.test", "valid",
			ports.OutcomeDelivered, "(tls: verified)", true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newSecureBundle(t, "rcpt.test")
			b.mx("rcpt.test", "mx.rcpt.test")
			b.sts("rcpt.test", tc.mode, tc.policyMX)
			opts := serverOptions{}
			switch tc.cert {
			case "valid":
				opts.TLS = tlspolicytest.ServerTLS(b.ca.Issue(t, false, "mx.rcpt.test"))
			case "wrong-name":
				opts.TLS = tlspolicytest.ServerTLS(b.ca.Issue(t, false, "mx.other.test"))
			case "self-signed":
				opts.TLS = tlspolicytest.ServerTLS(tlspolicytest.SelfSigned(t, "mx.rcpt.test"))
			case "expired":
				opts.TLS = tlspolicytest.ServerTLS(b.ca.Issue(t, true, "mx.rcpt.test"))
			}
			ts := mustServer(t, opts)
			h := b.harness(t, ts.Port(), nil)

			rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
			o := rep.Recipients[0]
			if o.Kind != tc.want || !strings.Contains(o.Response, tc.response) {
				t.Fatalf("outcome %s %q; want %s containing %q", o.Kind, o.Response, tc.want, tc.response)
			}
			envs := ts.Envelopes()
			if tc.want == ports.OutcomeDelivered {
				if len(envs) != 1 || envs[0].TLS != tc.tls {
					t.Fatalf("server saw %d transactions (TLS %v), want one with TLS %v", len(envs), len(envs) > 0 && envs[0].TLS, tc.tls)
				}
			} else if len(envs) != 0 {
				t.Fatalf("server received %d transactions although the policy refused it", len(envs))
			}
			if tc.policyMX == "mx.elsewhere.test" {
				if accepts, _, _ := ts.Stats(); accepts != 0 {
					t.Fatalf("%d connections to an MX host outside the policy", accepts)
				}
			}
			failures, ok := b.failures(t, "rcpt.test")
			switch {
			case tc.failure == "" && (ok != 1 || len(failures) != 0):
				t.Errorf("TLS-RPT: %d successes, failures %v; want one success", ok, failures)
			case tc.failure != "" && (failures[tc.failure] < 1 || ok != 0):
				t.Errorf("TLS-RPT: %d successes, failures %v; want a %s failure", ok, failures, tc.failure)
			}
		})
	}
}

func TestDANE(t *testing.T) {
	t.Parallel()
	// The server's certificate is self-signed and names nothing useful: under DANE-EE only the published
	// key counts (RFC 7672 §3.1.1), and without DANE the Web PKI check fails.
	cert := tlspolicytest.SelfSigned(t, "some.name.test")
	other := tlspolicytest.SelfSigned(t, "some.name.test")
	cases := []struct {
		name     string
		secure   bool
		key      tls.Certificate // whose key the TLSA record publishes
		want     ports.DeliveryOutcomeKind
		response string
		tls      bool
		mode     string // postmill_mta_tls_total label counted once
	}{
		{"DANE-EE match delivers", true, cert, ports.OutcomeDelivered, "(tls: dane)", true, "dane"},
		{"DANE-EE mismatch defers", true, other, ports.OutcomeDeferred, "tlsa-invalid", false, ""},
		{"without the AD bit the TLSA records are ignored", false, other, ports.OutcomeDelivered, "(sent without TLS:", false, "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newSecureBundle(t)
			b.mx("signed.test", "mx.signed.test")
			b.dns.SetTLSA("_25._tcp.mx.signed.test", ports.TLSA{Usage: 3, Selector: 1, MatchingType: 1, Data: tlspolicytest.SPKISHA256(tc.key.Leaf)})
			b.dns.SetSecure("signed.test", tc.secure)
			ts := mustServer(t, serverOptions{TLS: tlspolicytest.ServerTLS(cert)})
			reg := prometheus.NewRegistry()
			h := b.harness(t, ts.Port(), reg)

			rep, _ := h.Send(outbound(t, "signed.test", "a@signed.test"))
			o := rep.Recipients[0]
			if o.Kind != tc.want || !strings.Contains(o.Response, tc.response) {
				t.Fatalf("outcome %s %q; want %s containing %q", o.Kind, o.Response, tc.want, tc.response)
			}
			envs := ts.Envelopes()
			if tc.want == ports.OutcomeDelivered && (len(envs) != 1 || envs[0].TLS != tc.tls) {
				t.Fatalf("server saw %d transactions, want one with TLS %v", len(envs), tc.tls)
			}
			if tc.want != ports.OutcomeDelivered && len(envs) != 0 {
				t.Fatalf("server received %d transactions under a failed DANE check", len(envs))
			}
			if tc.mode != "" {
				if got := counter(t, reg, "postmill_mta_tls_total", tc.mode); got != 1 {
					t.Errorf("postmill_mta_tls_total{mode=%q} = %v, want 1", tc.mode, got)
				}
			}
			if tc.secure {
				failures, ok := b.failures(t, "signed.test")
				if tc.want == ports.OutcomeDelivered && ok != 1 || tc.want != ports.OutcomeDelivered && failures[tlspolicy.ResultTLSAInvalid] < 1 {
					t.Errorf("TLS-RPT: %d successes, failures %v", ok, failures)
				}
			}
		})
	}
}
