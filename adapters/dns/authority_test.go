package dns_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/postmill/postmill/adapters/dns"
	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/ports"
)

// fakeDomains is an in-memory ports.LocalDNSStore that counts reads and can fail.
type fakeDomains struct {
	mu      sync.Mutex
	domains []ports.PublishedDomain
	reads   int
	fail    error
}

func (f *fakeDomains) PublishedDomains(_ context.Context, names []string) ([]ports.PublishedDomain, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.fail != nil {
		return nil, f.fail
	}
	var out []ports.PublishedDomain
	for _, d := range f.domains {
		if slices.Contains(names, d.Name) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f *fakeDomains) add(d ports.PublishedDomain) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.domains = append(f.domains, d)
}

func (f *fakeDomains) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// longKey stands for a 2048-bit key's p= value: longer than one 255-byte character-string.
var longKey = "v=DKIM1; k=rsa; p=" + strings.Repeat("MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A", 13)

// published is the five records core/domain computes for name.
func published(name, selector string) ports.PublishedDomain {
	return ports.PublishedDomain{Name: name, Records: []ports.DNSRecord{
		{Type: ports.RecordSPF, Host: name, Value: "v=spf1 include:spf.postmill.local ~all"},
		{Type: ports.RecordDKIM, Host: selector + "._domainkey." + name, Value: longKey},
		{Type: ports.RecordDMARC, Host: "_dmarc." + name, Value: "v=DMARC1; p=quarantine; rua=mailto:dmarc@reports.postmill.local; fo=1"},
		{Type: ports.RecordReturnPath, Host: "bounce." + name, Value: "bounces.postmill.local"},
		{Type: ports.RecordTracking, Host: "track." + name, Value: "track.postmill.local"},
	}}
}

type authorityBundle struct {
	store *fakeDomains
	auth  *dns.Authority
	res   *dns.Resolver
	ctx   context.Context
}

func startAuthority(tb testing.TB, mutate func(*dns.AuthorityConfig)) *authorityBundle {
	tb.Helper()
	store := &fakeDomains{}
	cfg := dns.AuthorityConfig{
		Addr: "127.0.0.1:0", Domains: store,
		MailHost: "catcher.postmill.localhost", MailAddr: netip.MustParseAddr("127.0.0.1"),
		MissTTL: 50 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	auth, err := dns.NewAuthority(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	addr, err := auth.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = auth.Shutdown(context.Background()) })
	return &authorityBundle{store: store, auth: auth, res: dns.New(addr, dns.Options{Timeout: 2 * time.Second}), ctx: context.Background()}
}

// TestAuthorityPublishesDomainRecords asks for each of the five records through Postmill's own resolver,
// as domain verification does.
func TestAuthorityPublishesDomainRecords(t *testing.T) {
	t.Parallel()
	b := startAuthority(t, nil)
	b.store.add(published("acme.test", "pmabc"))

	if got, err := b.res.LookupTXT(b.ctx, "acme.test"); err != nil || !slices.Equal(got, []string{"v=spf1 include:spf.postmill.local ~all"}) {
		t.Fatalf("SPF = %q, %v", got, err)
	}
	if got, err := b.res.LookupTXT(b.ctx, "PMABC._domainkey.Acme.Test."); err != nil || !slices.Equal(got, []string{longKey}) {
		t.Fatalf("DKIM (case-insensitive, joined from several strings) = %q, %v", got, err)
	}
	if got, err := b.res.LookupTXT(b.ctx, "_dmarc.acme.test"); err != nil || len(got) != 1 || !strings.HasPrefix(got[0], "v=DMARC1;") {
		t.Fatalf("DMARC = %q, %v", got, err)
	}
	for host, want := range map[string]string{"bounce.acme.test": "bounces.postmill.local", "track.acme.test": "track.postmill.local"} {
		if got, err := b.res.LookupCNAME(b.ctx, host); err != nil || got != want {
			t.Fatalf("CNAME %s = %q, %v; want %q", host, got, err, want)
		}
	}

	// Inside the zone: a name nothing is at does not exist, the parent of the DKIM record exists without
	// data (an empty non-terminal), and the apex has no address.
	_, err := b.res.LookupTXT(b.ctx, "nope.acme.test")
	wantDNSError(t, err, ports.DNSNotFound, "nope.acme.test")
	_, err = b.res.LookupTXT(b.ctx, "_domainkey.acme.test")
	wantDNSError(t, err, ports.DNSNoData, "_domainkey.acme.test")
	_, err = b.res.LookupTXT(b.ctx, "other._domainkey.acme.test")
	wantDNSError(t, err, ports.DNSNotFound, "other._domainkey.acme.test")
	if _, err = b.res.LookupIP(b.ctx, "acme.test"); err == nil {
		t.Fatal("the apex has an address")
	}
}

// TestAuthorityRoutesMailToTheCatcher: every MX question, about the instance's domains or anyone else's,
// names the catcher, whose address the server also serves; a domain's own exchangers take precedence.
func TestAuthorityRoutesMailToTheCatcher(t *testing.T) {
	t.Parallel()
	b := startAuthority(t, nil)
	b.store.add(published("acme.test", "pmabc"))
	inbound := published("in.test", "pmdef")
	inbound.MX = []ports.MX{{Host: "mx.postmill.localhost", Preference: 5}}
	b.store.add(inbound)

	for _, domain := range []string{"acme.test", "gmail.com", "rcpt.example"} {
		mx, err := b.res.LookupMX(b.ctx, domain)
		if err != nil || len(mx) != 1 || mx[0].Host != "catcher.postmill.localhost" {
			t.Fatalf("MX %s = %+v, %v", domain, mx, err)
		}
	}
	if mx, err := b.res.LookupMX(b.ctx, "in.test"); err != nil || len(mx) != 1 || mx[0].Host != "mx.postmill.localhost" || mx[0].Preference != 5 {
		t.Fatalf("MX of a domain with exchangers of its own = %+v, %v", mx, err)
	}
	ips, err := b.res.LookupIP(b.ctx, "catcher.postmill.localhost")
	if err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("catcher address = %v, %v", ips, err)
	}
	// Without a mail host, MX questions about other names are forwarded like any other (here: refused).
	plain := startAuthority(t, func(c *dns.AuthorityConfig) { c.MailHost = "" })
	_, err = plain.res.LookupMX(plain.ctx, "gmail.com")
	wantDNSError(t, err, ports.DNSTemporary, "gmail.com")
}

// TestAuthorityPicksUpNewDomains: a domain created while the server runs is published without a restart,
// once the short memory of the miss has passed; reads within the cache time cost one store read.
func TestAuthorityPicksUpNewDomains(t *testing.T) {
	t.Parallel()
	b := startAuthority(t, func(c *dns.AuthorityConfig) { c.CacheTTL = time.Hour })
	_, err := b.res.LookupTXT(b.ctx, "late.test")
	wantDNSError(t, err, ports.DNSTemporary, "late.test") // not ours, no upstream: refused
	b.store.add(published("late.test", "pmxyz"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := b.res.LookupTXT(b.ctx, "late.test")
		if err == nil && len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new domain was never published: %q, %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := b.store.readCount()
	for range 5 {
		if _, err := b.res.LookupTXT(b.ctx, "late.test"); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.store.readCount() - before; n != 0 {
		t.Fatalf("%d store reads for cached answers, want 0", n)
	}
}

// TestAuthorityStoreFailure answers SERVFAIL and does not remember the failure.
func TestAuthorityStoreFailure(t *testing.T) {
	t.Parallel()
	b := startAuthority(t, nil)
	b.store.add(published("acme.test", "pmabc"))
	b.store.mu.Lock()
	b.store.fail = errors.New("database down")
	b.store.mu.Unlock()
	_, err := b.res.LookupTXT(b.ctx, "acme.test")
	wantDNSError(t, err, ports.DNSTemporary, "acme.test")
	b.store.mu.Lock()
	b.store.fail = nil
	b.store.mu.Unlock()
	if got, err := b.res.LookupTXT(b.ctx, "acme.test"); err != nil || len(got) != 1 {
		t.Fatalf("after the store recovered: %q, %v", got, err)
	}
}

// TestAuthorityForwardsOtherNames relays questions outside the instance's domains to the upstream server,
// so webhook hosts keep resolving in local mode.
func TestAuthorityForwardsOtherNames(t *testing.T) {
	t.Parallel()
	up := dnstest.New(t)
	up.SetA("hooks.example", netip.MustParseAddr("192.0.2.7"))
	up.SetTXT("hooks.example", "hello")
	b := startAuthority(t, func(c *dns.AuthorityConfig) { c.Upstream = up.Addr() })
	if ips, err := b.res.LookupIP(b.ctx, "hooks.example"); err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("192.0.2.7") {
		t.Fatalf("forwarded A = %v, %v", ips, err)
	}
	if got, err := b.res.LookupTXT(b.ctx, "hooks.example"); err != nil || !slices.Equal(got, []string{"hello"}) {
		t.Fatalf("forwarded TXT = %q, %v", got, err)
	}
	_, err := b.res.LookupTXT(b.ctx, "missing.example")
	wantDNSError(t, err, ports.DNSNotFound, "missing.example")
}

// TestAuthorityTruncatesForSmallBuffers: a client without EDNS gets the DKIM key truncated over UDP and
// whole over TCP (RFC 1035 §4.2.1); malformed questions are refused.
func TestAuthorityTruncatesForSmallBuffers(t *testing.T) {
	t.Parallel()
	b := startAuthority(t, nil)
	b.store.add(published("acme.test", "pmabc"))
	q := new(mdns.Msg)
	q.SetQuestion("pmabc._domainkey.acme.test.", mdns.TypeTXT)
	long := strings.Repeat("x", 300) // pushes the answer past 512 bytes with the key
	b.store.add(ports.PublishedDomain{Name: "acme.test", Records: []ports.DNSRecord{
		{Type: ports.RecordDKIM, Host: "pmabc._domainkey.acme.test", Value: long}}})

	udp := &mdns.Client{Net: "udp", Timeout: 2 * time.Second}
	resp, _, err := udp.Exchange(q, b.auth.Addr())
	if err != nil || !resp.Truncated {
		t.Fatalf("UDP without EDNS: truncated=%v, %v", resp != nil && resp.Truncated, err)
	}
	tcp := &mdns.Client{Net: "tcp", Timeout: 2 * time.Second}
	resp, _, err = tcp.Exchange(q, b.auth.Addr())
	if err != nil || resp.Truncated || len(resp.Answer) != 2 {
		t.Fatalf("TCP: %v, %v", resp, err)
	}

	chaos := new(mdns.Msg)
	chaos.SetQuestion("acme.test.", mdns.TypeTXT)
	chaos.Question[0].Qclass = mdns.ClassCHAOS
	if resp, _, err := udp.Exchange(chaos, b.auth.Addr()); err != nil || resp.Rcode != mdns.RcodeRefused {
		t.Fatalf("class CHAOS: %v, %v", resp, err)
	}
}
