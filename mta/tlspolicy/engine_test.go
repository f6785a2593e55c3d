package tlspolicy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/dns"
	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/mta/tlspolicy"
	"github.com/postmill/postmill/mta/tlspolicy/tlspolicytest"
	"github.com/postmill/postmill/ports"
)

// clock is a test clock the engine reads through Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testBundle is a DNS server, an HTTPS policy server with a certificate from ca, and an engine using both
// over real sockets.
type testBundle struct {
	dns      *dnstest.Server
	policies *tlspolicytest.PolicyServer
	ca       *tlspolicytest.CA
	clock    *clock
	dir      string
	engine   *tlspolicy.Engine
}

func setup(tb testing.TB, domains []string, edit ...func(*tlspolicy.Config)) *testBundle {
	tb.Helper()
	b := &testBundle{dns: dnstest.New(tb), ca: tlspolicytest.NewCA(tb), clock: &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		dir: tb.TempDir()}
	names := make([]string, len(domains))
	for i, d := range domains {
		names[i] = "mta-sts." + d
		b.dns.SetA(names[i], netip.MustParseAddr("127.0.0.1"))
	}
	b.policies = tlspolicytest.ServePolicies(tb, b.ca.Issue(tb, false, append(names, "mta-sts.unused.test")...))
	cfg := tlspolicy.Config{
		RootCAs: b.ca.Pool, AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		HTTPSPort: b.policies.Port, FetchTimeout: 3 * time.Second, Now: b.clock.Now,
		ReportDir: b.dir, Reporter: "mta.postmill.test",
	}
	for _, f := range edit {
		f(&cfg)
	}
	res := dns.New(b.dns.Addr(), dns.Options{Timeout: 2 * time.Second})
	e, err := tlspolicy.New(cfg, res, res)
	if err != nil {
		tb.Fatal(err)
	}
	b.engine = e
	return b
}

func (b *testBundle) hosts(domain string, names ...string) []tlspolicy.Host {
	return b.engine.Hosts(context.Background(), domain, names)
}

// report reads the day's TLS-RPT report of domain after a flush.
func (b *testBundle) report(tb testing.TB, domain string) (tlspolicy.Report, string) {
	tb.Helper()
	if err := b.engine.Flush(context.Background()); err != nil {
		tb.Fatal(err)
	}
	day := b.clock.Now().UTC().Format("2006-01-02")
	stem := filepath.Join(b.dir, day, tlspolicy.ReportFileName("mta.postmill.test", domain, day))
	raw, err := os.ReadFile(stem + ".json")
	if err != nil {
		tb.Fatal(err)
	}
	var r tlspolicy.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		tb.Fatal(err)
	}
	rua, err := os.ReadFile(stem + ".rua")
	if err != nil {
		tb.Fatal(err)
	}
	return r, string(rua)
}

// failures sums a report's failed sessions per result type.
func failures(r tlspolicy.Report) map[string]int64 {
	out := map[string]int64{}
	for _, p := range r.Policies {
		for _, f := range p.FailureDetails {
			out[f.ResultType] += f.FailedSessionCount
		}
	}
	return out
}

func modes(hs []tlspolicy.Host) string {
	var s []string
	for _, h := range hs {
		m := h.Mode.String()
		if h.Refused != "" {
			m += "(refused)"
		}
		s = append(s, m)
	}
	return strings.Join(s, " ")
}

func TestEnforcePolicyFetchedOverHTTPSAndCached(t *testing.T) {
	t.Parallel()
	b := setup(t, []string{"rcpt.test"})
	b.dns.SetTXT("_mta-sts.rcpt.test", "v=STSv1; id=1")
	b.policies.Set("rcpt.test", tlspolicytest.Policy("enforce", 86400, "*.rcpt.test"))

	hs := b.hosts("rcpt.test", "mx1.rcpt.test", "mx.elsewhere.test")
	if got := modes(hs); got != "sts-enforce sts-enforce(refused)" {
		t.Fatalf("modes %q", got)
	}
	if !hs[0].RequireTLS() || !strings.Contains(hs[1].Refused, "does not match the MTA-STS policy") {
		t.Fatalf("hosts %+v", hs)
	}
	b.clock.Add(time.Minute)
	b.hosts("rcpt.test", "mx1.rcpt.test")
	if n := b.policies.Fetches("rcpt.test"); n != 1 {
		t.Fatalf("%d fetches, want 1 (the second answer comes from the cache)", n)
	}
	r, _ := b.report(t, "rcpt.test")
	if f := failures(r); f[tlspolicy.ResultValidationFailure] != 1 || r.Policies[0].Policy.Type != "sts" ||
		!strings.Contains(strings.Join(r.Policies[0].Policy.String, "\n"), "mode: enforce") {
		t.Fatalf("report %+v", r)
	}
}

func TestNewIDRefetchesAndFailedRefreshKeepsEnforcing(t *testing.T) {
	t.Parallel()
	b := setup(t, []string{"rcpt.test"})
	b.dns.SetTXT("_mta-sts.rcpt.test", "v=STSv1; id=1")
	b.policies.Set("rcpt.test", tlspolicytest.Policy("testing", 3600, "mx.rcpt.test"))
	if got := modes(b.hosts("rcpt.test", "mx.rcpt.test")); got != "sts-testing" {
		t.Fatalf("modes %q", got)
	}

	// The same id after the recheck interval: the TXT record is asked again, the policy is not.
	b.clock.Add(tlspolicy.DefaultRecheck + time.Second)
	b.hosts("rcpt.test", "mx.rcpt.test")
	if n := b.policies.Fetches("rcpt.test"); n != 1 {
		t.Fatalf("%d fetches for an unchanged id", n)
	}

	// A new id: the new policy is fetched.
	b.dns.SetTXT("_mta-sts.rcpt.test", "v=STSv1; id=2")
	b.policies.Set("rcpt.test", tlspolicytest.Policy("enforce", 3600, "mx.rcpt.test"))
	b.clock.Add(tlspolicy.DefaultRecheck + time.Second)
	if got := modes(b.hosts("rcpt.test", "mx.rcpt.test")); got != "sts-enforce" {
		t.Fatalf("after a new id: %q", got)
	}

	// Another new id, and the policy host fails: the cached enforce policy stays in force (RFC 8461 §5.1)
	// and the failure is reported.
	b.dns.SetTXT("_mta-sts.rcpt.test", "v=STSv1; id=3")
	b.policies.SetAnswer("rcpt.test", http.StatusInternalServerError, "", "")
	b.clock.Add(tlspolicy.DefaultRecheck + time.Second)
	if got := modes(b.hosts("rcpt.test", "mx.rcpt.test")); got != "sts-enforce" {
		t.Fatalf("after a failed refresh: %q", got)
	}
	// The record gone altogether: still the cached policy, until its max_age has passed.
	b.dns.Remove("_mta-sts.rcpt.test")
	b.clock.Add(tlspolicy.DefaultRecheck + time.Second)
	if got := modes(b.hosts("rcpt.test", "mx.rcpt.test")); got != "sts-enforce" {
		t.Fatalf("without the record: %q", got)
	}
	b.clock.Add(time.Hour)
	if got := modes(b.hosts("rcpt.test", "mx.rcpt.test")); got != "none" {
		t.Fatalf("after max_age: %q", got)
	}
	r, _ := b.report(t, "rcpt.test")
	if f := failures(r); f[tlspolicy.ResultSTSPolicyFetchError] != 1 {
		t.Fatalf("failures %v", f)
	}
}

func TestPolicyFetchRefusals(t *testing.T) {
	t.Parallel()
	domains := []string{"redirect.test", "big.test", "html.test", "private.test", "untrusted.test"}
	b := setup(t, domains)
	for _, d := range domains {
		b.dns.SetTXT("_mta-sts."+d, "v=STSv1; id=1")
		b.policies.Set(d, tlspolicytest.Policy("enforce", 86400, "mx."+d))
	}
	// RFC 8461 §3.3: no redirects, at most 64 KiB, a body that parses.
	b.policies.SetAnswer("redirect.test", http.StatusFound, "", "https://mta-sts.elsewhere.test/.well-known/mta-sts.txt")
	b.policies.Set("big.test", tlspolicytest.Policy("enforce", 86400, "mx.big.test")+strings.Repeat("x: y\r\n", 12000))
	b.policies.Set("html.test", "<html>hello</html>")
	// A policy host on a forbidden address the allow-list does not cover.
	b.dns.SetA("mta-sts.private.test", netip.MustParseAddr("10.1.2.3"))

	want := map[string]string{
		"redirect.test": tlspolicy.ResultSTSPolicyFetchError,
		"big.test":      tlspolicy.ResultSTSPolicyInvalid,
		"html.test":     tlspolicy.ResultSTSPolicyInvalid,
		"private.test":  tlspolicy.ResultSTSPolicyFetchError,
	}
	for d, result := range want {
		if got := modes(b.hosts(d, "mx."+d)); got != "none" {
			t.Errorf("%s: modes %q, want none (no policy applies)", d, got)
		}
		r, _ := b.report(t, d)
		if f := failures(r); f[result] != 1 {
			t.Errorf("%s: failures %v, want one %s", d, f, result)
		}
	}
	if n := b.policies.Fetches("private.test"); n != 0 {
		t.Errorf("the forbidden policy host was contacted %d times", n)
	}

	// A policy host whose certificate no trusted root vouches for.
	other := setup(t, []string{"untrusted.test"}, func(c *tlspolicy.Config) { c.RootCAs = tlspolicytest.NewCA(t).Pool })
	other.dns.SetTXT("_mta-sts.untrusted.test", "v=STSv1; id=1")
	other.policies.Set("untrusted.test", tlspolicytest.Policy("enforce", 86400, "mx.untrusted.test"))
	if got := modes(other.hosts("untrusted.test", "mx.untrusted.test")); got != "none" {
		t.Errorf("untrusted policy host: %q", got)
	}
	if r, _ := other.report(t, "untrusted.test"); failures(r)[tlspolicy.ResultSTSWebPKIInvalid] != 1 {
		t.Errorf("untrusted policy host: failures %v", failures(r))
	}
}

func TestDANEHosts(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	digest := make([]byte, 32)
	b.dns.SetMX("signed.test", ports.MX{Host: "mx1.signed.test"}, ports.MX{Host: "mx2.signed.test"},
		ports.MX{Host: "mx3.signed.test"}, ports.MX{Host: "mx4.signed.test"})
	b.dns.SetTLSA("_25._tcp.mx1.signed.test", ports.TLSA{Usage: 3, Selector: 1, MatchingType: 1, Data: digest})
	b.dns.SetTLSA("_25._tcp.mx2.signed.test", ports.TLSA{Usage: 1, Selector: 1, MatchingType: 1, Data: digest}) // PKIX-EE: unusable
	b.dns.SetServFail("_25._tcp.mx3.signed.test")
	// mx4 has no TLSA records.
	b.dns.SetSecure("signed.test", true)

	hs := b.hosts("signed.test", "mx1.signed.test", "mx2.signed.test", "mx3.signed.test", "mx4.signed.test")
	if got := modes(hs); got != "dane dane-encrypt dane(refused) none" {
		t.Fatalf("modes %q", got)
	}
	if !hs[0].RequireTLS() || !hs[1].RequireTLS() || hs[3].RequireTLS() {
		t.Fatalf("TLS required: %v %v %v", hs[0].RequireTLS(), hs[1].RequireTLS(), hs[3].RequireTLS())
	}

	// The same records without the AD bit (a resolver that could not validate, or does not): ignored.
	b.dns.SetMX("plain.test", ports.MX{Host: "mx1.plain.test"})
	b.dns.SetTLSA("_25._tcp.mx1.plain.test", ports.TLSA{Usage: 3, Selector: 1, MatchingType: 1, Data: digest})
	if got := modes(b.hosts("plain.test", "mx1.plain.test")); got != "none" {
		t.Fatalf("unauthenticated TLSA: %q", got)
	}
	// Authenticated TLSA records under an MX RRset that was not authenticated: ignored too (RFC 7672
	// §2.2.1).
	b.dns.SetMX("mixed.test", ports.MX{Host: "mx1.signed.test"})
	if got := modes(b.hosts("mixed.test", "mx1.signed.test")); got != "none" {
		t.Fatalf("insecure MX RRset: %q", got)
	}
}

func TestDANETakesPrecedenceOverSTS(t *testing.T) {
	t.Parallel()
	b := setup(t, []string{"both.test"})
	b.dns.SetTXT("_mta-sts.both.test", "v=STSv1; id=1")
	b.policies.Set("both.test", tlspolicytest.Policy("enforce", 86400, "mx2.both.test"))
	b.dns.SetMX("both.test", ports.MX{Host: "mx1.both.test"}, ports.MX{Host: "mx2.both.test"})
	b.dns.SetTLSA("_25._tcp.mx1.both.test", ports.TLSA{Usage: 3, Selector: 1, MatchingType: 1, Data: make([]byte, 32)})
	b.dns.SetSecure("both.test", true)
	// mx1 is outside the MTA-STS policy, but has DANE: DANE decides for it (RFC 8461 §2).
	if got := modes(b.hosts("both.test", "mx1.both.test", "mx2.both.test")); got != "dane sts-enforce" {
		t.Fatalf("modes %q", got)
	}
}

func TestReportFileAndRUA(t *testing.T) {
	t.Parallel()
	b := setup(t, []string{"rcpt.test"})
	b.dns.SetTXT("_mta-sts.rcpt.test", "v=STSv1; id=1")
	b.dns.SetTXT("_smtp._tls.rcpt.test", "v=TLSRPTv1; rua=mailto:tlsrpt@rcpt.test,https://rcpt.test/tlsrpt")
	b.policies.Set("rcpt.test", tlspolicytest.Policy("testing", 86400, "mx.rcpt.test"))
	h := b.hosts("rcpt.test", "mx.rcpt.test")[0]
	for range 3 {
		h.Result(nil)
	}
	h.Result(tlspolicy.Fail(tlspolicy.ResultCertificateExpired, "x509: certificate has expired\x00\r\n"))
	h.Result(tlspolicy.Fail(tlspolicy.ResultSTARTTLSNotSupported, "no STARTTLS"))

	r, rua := b.report(t, "rcpt.test")
	if rua != "mailto:tlsrpt@rcpt.test\nhttps://rcpt.test/tlsrpt\n" {
		t.Errorf("rua file %q", rua)
	}
	if r.DateRange.Start != "2026-03-01T00:00:00Z" || r.DateRange.End != "2026-03-01T23:59:59Z" || r.OrganizationName != "Postmill" {
		t.Errorf("report header %+v", r)
	}
	if len(r.Policies) != 1 {
		t.Fatalf("policies %+v", r.Policies)
	}
	p := r.Policies[0]
	if p.Summary.Successful != 3 || p.Summary.Failed != 2 || p.Policy.Domain != "rcpt.test" || len(p.Policy.MXHost) != 1 {
		t.Errorf("policy %+v", p)
	}
	for _, f := range p.FailureDetails {
		if f.ReceivingMXHostname != "mx.rcpt.test" || strings.ContainsAny(f.FailureReasonCode, "\x00\r\n") {
			t.Errorf("failure detail %+v", f)
		}
	}

	// The next day's counts go to the next day's report; the first stays as written.
	b.clock.Add(24 * time.Hour)
	h.Result(nil)
	r2, _ := b.report(t, "rcpt.test")
	if r2.Policies[0].Summary.Successful != 1 || r2.DateRange.Start != "2026-03-02T00:00:00Z" {
		t.Errorf("second day %+v", r2)
	}
}

// A flush returns once every count recorded before it is on disk, even when another flush took those
// counts first and is still writing them (here it waits for the domain's rua record). Otherwise a Flush at
// shutdown could return while the periodic one was still writing, and the process end before the report.
func TestFlushWaitsForAFlushUnderWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, []string{"rcpt.test"})
	b.dns.SetTXT("_mta-sts.rcpt.test", "v=STSv1; id=1")
	b.dns.SetTXT("_smtp._tls.rcpt.test", "v=TLSRPTv1; rua=mailto:tlsrpt@rcpt.test")
	b.policies.Set("rcpt.test", tlspolicytest.Policy("testing", 86400, "mx.rcpt.test"))
	h := b.hosts("rcpt.test", "mx.rcpt.test")[0]
	asked, release := b.dns.Hold(t, "_smtp._tls.rcpt.test")
	h.Result(nil)
	day := b.clock.Now().UTC().Format("2006-01-02")
	file := filepath.Join(b.dir, day, tlspolicy.ReportFileName("mta.postmill.test", "rcpt.test", day)+".json")

	first := make(chan error, 1)
	go func() { first <- b.engine.Flush(ctx) }()
	<-asked // the first flush has taken the counts and waits for the rua lookup
	type result struct {
		err     error
		written bool
	}
	second := make(chan result, 1)
	go func() {
		err := b.engine.Flush(ctx)
		_, statErr := os.Stat(file)
		second <- result{err, statErr == nil}
	}()
	var got result
	select {
	case got = <-second: // returned while the first was held: too early
		release()
	case <-time.After(100 * time.Millisecond):
		release()
		got = <-second
	}
	if err := <-first; err != nil {
		t.Fatalf("first flush: %v", err)
	}
	if got.err != nil || !got.written {
		t.Fatalf("second flush returned (%v) before the report it had been asked for was written", got.err)
	}
}
