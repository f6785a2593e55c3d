package dns_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/postmill/postmill/adapters/dns"
	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/ports"
)

type testBundle struct {
	srv *dnstest.Server
	res *dns.Resolver
	ctx context.Context
}

func setup(tb testing.TB) *testBundle {
	tb.Helper()
	srv := dnstest.New(tb)
	return &testBundle{srv: srv, res: dns.New(srv.Addr(), dns.Options{Timeout: 2 * time.Second}), ctx: context.Background()}
}

// wantDNSError fails unless err is a *ports.DNSError of kind for name.
func wantDNSError(tb testing.TB, err error, kind ports.DNSErrorKind, name string) {
	tb.Helper()
	var de *ports.DNSError
	if !errors.As(err, &de) {
		tb.Fatalf("error %v (%T) is not a *ports.DNSError", err, err)
	}
	if de.Kind != kind || de.Name != name {
		tb.Fatalf("DNSError{Kind: %s, Name: %s}; want %s for %s", de.Kind, de.Name, kind, name)
	}
}

func TestLookupTXT(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.SetTXT("example.test", "v=spf1 include:spf.postmill.test ~all", "google-site-verification=abc")
	got, err := b.res.LookupTXT(b.ctx, "example.test")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"google-site-verification=abc", "v=spf1 include:spf.postmill.test ~all"}; !slices.Equal(got, want) {
		t.Fatalf("TXT = %q; want %q", got, want)
	}
	// Names are case-insensitive; a trailing dot is accepted.
	if got, err := b.res.LookupTXT(b.ctx, "EXAMPLE.test."); err != nil || len(got) != 2 {
		t.Fatalf("TXT with other case = %q, %v", got, err)
	}
}

func TestLookupTXTJoinsLongValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A 2048-bit DKIM key record is about 410 bytes, published as two character-strings; the value also
	// carries the bytes miekg/dns escapes in presentation form.
	long := "v=DKIM1; k=rsa; p=" + strings.Repeat("MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A", 12) + `"quoted" back\slash ` + "\x01\xff"
	if len(long) <= 255 {
		t.Fatal("test value must exceed one character-string")
	}
	b.srv.SetTXT("pm1._domainkey.example.test", long, "short")
	got, err := b.res.LookupTXT(b.ctx, "pm1._domainkey.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, long) || !slices.Contains(got, "short") || len(got) != 2 {
		t.Fatalf("TXT not joined per record: %q", got)
	}
}

func TestLookupTXTFallsBackToTCP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// 12 records of 200 bytes exceed the 1232-byte EDNS buffer: the UDP answer is truncated.
	var values []string
	for i := range 12 {
		values = append(values, strings.Repeat(string(rune('a'+i)), 200))
	}
	b.srv.SetTXT("big.example.test", values...)

	// Over UDP alone the answer is cut and marked TC.
	m := new(mdns.Msg)
	m.SetQuestion("big.example.test.", mdns.TypeTXT)
	m.SetEdns0(1232, false)
	udp, _, err := (&mdns.Client{Net: "udp"}).Exchange(m, b.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if !udp.Truncated || len(udp.Answer) >= len(values) {
		t.Fatalf("UDP answer not truncated: tc=%v answers=%d", udp.Truncated, len(udp.Answer))
	}

	got, err := b.res.LookupTXT(b.ctx, "big.example.test")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, values) {
		t.Fatalf("got %d records after TCP fallback; want all %d", len(got), len(values))
	}
}

func TestLookupTXTThroughCNAME(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// DKIM delegated to a provider's host, as some DNS setups do.
	b.srv.SetCNAME("pm2._domainkey.example.test", "key.provider.test")
	b.srv.SetTXT("key.provider.test", "v=DKIM1; k=rsa; p=ABC")
	got, err := b.res.LookupTXT(b.ctx, "pm2._domainkey.example.test")
	if err != nil || !slices.Equal(got, []string{"v=DKIM1; k=rsa; p=ABC"}) {
		t.Fatalf("TXT via CNAME = %q, %v", got, err)
	}
}

func TestLookupCNAME(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.SetCNAME("bounce.example.test", "Bounces.Postmill.Test.")
	b.srv.SetCNAME("track.example.test", "hop.example.test")
	b.srv.SetCNAME("hop.example.test", "track.postmill.test")

	got, err := b.res.LookupCNAME(b.ctx, "bounce.example.test")
	if err != nil || got != "Bounces.Postmill.Test" {
		t.Fatalf("CNAME = %q, %v; want the target as published without the trailing dot", got, err)
	}
	// The first hop only: nothing is followed.
	if got, err := b.res.LookupCNAME(b.ctx, "track.example.test"); err != nil || got != "hop.example.test" {
		t.Fatalf("CNAME chain = %q, %v; want the first hop", got, err)
	}
}

func TestLookupMX(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.SetMX("example.test",
		ports.MX{Host: "mx3.example.test", Preference: 30},
		ports.MX{Host: "mx1.example.test", Preference: 10},
		ports.MX{Host: "mx2.example.test", Preference: 20},
	)
	got, err := b.res.LookupMX(b.ctx, "example.test")
	if err != nil {
		t.Fatal(err)
	}
	want := []ports.MX{{Host: "mx1.example.test", Preference: 10}, {Host: "mx2.example.test", Preference: 20}, {Host: "mx3.example.test", Preference: 30}}
	if !slices.Equal(got, want) {
		t.Fatalf("MX = %v; want %v", got, want)
	}

	// RFC 7505 null MX: the domain accepts no mail.
	b.srv.SetMX("nomail.example.test", ports.MX{Host: "", Preference: 0})
	got, err = b.res.LookupMX(b.ctx, "nomail.example.test")
	if err != nil || !slices.Equal(got, []ports.MX{{Host: "", Preference: 0}}) {
		t.Fatalf("null MX = %v, %v", got, err)
	}

	// No MX at an existing name is NODATA, which RFC 5321 §5.1 turns into the A/AAAA fallback.
	b.srv.SetA("nomx.example.test", netip.MustParseAddr("127.0.0.1"))
	_, err = b.res.LookupMX(b.ctx, "nomx.example.test")
	wantDNSError(t, err, ports.DNSNoData, "nomx.example.test")
}

func TestLookupIP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.SetA("mx.example.test", netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"))
	b.srv.SetA("v4.example.test", netip.MustParseAddr("127.0.0.9"))
	b.srv.SetA("v6.example.test", netip.MustParseAddr("::1"))
	b.srv.SetTXT("noaddr.example.test", "x")

	tests := []struct {
		host string
		want []netip.Addr
		kind ports.DNSErrorKind
	}{
		{host: "mx.example.test", want: []netip.Addr{
			netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("::1")}},
		{host: "v4.example.test", want: []netip.Addr{netip.MustParseAddr("127.0.0.9")}},
		{host: "v6.example.test", want: []netip.Addr{netip.MustParseAddr("::1")}},
		{host: "127.0.0.5", want: []netip.Addr{netip.MustParseAddr("127.0.0.5")}},
		{host: "[::1]", want: []netip.Addr{netip.MustParseAddr("::1")}},
		{host: "noaddr.example.test", kind: ports.DNSNoData},
		{host: "missing.example.test", kind: ports.DNSNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			got, err := b.res.LookupIP(b.ctx, tt.host)
			if tt.kind != "" {
				wantDNSError(t, err, tt.kind, tt.host)
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("LookupIP = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.SetTXT("_dmarc.example.test", "v=DMARC1; p=none")
	b.srv.SetCNAME("alias.example.test", "example.net")
	b.srv.SetTXT("broken.example.test", "x")
	b.srv.SetServFail("broken.example.test")
	b.srv.SetTXT("removed.example.test", "x")
	b.srv.Remove("removed.example.test")
	b.srv.SetTXT("empty.example.test")

	type lookup func(ctx context.Context, name string) error
	txt := func(ctx context.Context, n string) error { _, err := b.res.LookupTXT(ctx, n); return err }
	cname := func(ctx context.Context, n string) error { _, err := b.res.LookupCNAME(ctx, n); return err }
	mx := func(ctx context.Context, n string) error { _, err := b.res.LookupMX(ctx, n); return err }
	tests := []struct {
		name   string
		lookup lookup
		host   string
		kind   ports.DNSErrorKind
	}{
		{"unknown name", txt, "nothing.example.test", ports.DNSNotFound},
		{"removed name", txt, "removed.example.test", ports.DNSNotFound},
		{"CNAME of a TXT-only name", cname, "_dmarc.example.test", ports.DNSNoData},
		{"MX of a TXT-only name", mx, "_dmarc.example.test", ports.DNSNoData},
		{"empty non-terminal", txt, "example.test", ports.DNSNoData},
		{"name set without records", txt, "empty.example.test", ports.DNSNoData},
		{"TXT through CNAME to a missing name", txt, "alias.example.test", ports.DNSNotFound},
		{"SERVFAIL", txt, "broken.example.test", ports.DNSTemporary},
		{"SERVFAIL on CNAME", cname, "broken.example.test", ports.DNSTemporary},
		{"invalid name", txt, "a..b", ports.DNSNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantDNSError(t, tt.lookup(b.ctx, tt.host), tt.kind, tt.host)
		})
	}
}

// serveUDP answers queries on a loopback UDP socket with reply(query, n), n counting queries from 1; a nil
// reply drops the query. It returns the address and the query counter.
func serveUDP(tb testing.TB, reply func(q *mdns.Msg, n int64) *mdns.Msg) (string, *atomic.Int64) {
	tb.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = pc.Close() })
	var count atomic.Int64
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(mdns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			r := reply(q, count.Add(1))
			if r == nil {
				continue
			}
			out, err := r.Pack()
			if err != nil {
				continue
			}
			_, _ = pc.WriteTo(out, from)
		}
	}()
	return pc.LocalAddr().String(), &count
}

func TestTimeoutAgainstSilentServer(t *testing.T) {
	t.Parallel()
	addr, count := serveUDP(t, func(*mdns.Msg, int64) *mdns.Msg { return nil })
	res := dns.New(addr, dns.Options{Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := res.LookupTXT(context.Background(), "example.test")
	elapsed := time.Since(start)
	wantDNSError(t, err, ports.DNSTemporary, "example.test")
	if elapsed < 200*time.Millisecond || elapsed > 2*time.Second {
		t.Fatalf("lookup took %s; want about two 100ms attempts", elapsed)
	}
	if got := count.Load(); got != 2 {
		t.Fatalf("server saw %d queries; want the first and one retry", got)
	}
}

func TestTimeoutBoundedByContext(t *testing.T) {
	t.Parallel()
	addr, _ := serveUDP(t, func(*mdns.Msg, int64) *mdns.Msg { return nil })
	res := dns.New(addr, dns.Options{}) // default 3s per attempt
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := res.LookupMX(ctx, "example.test")
	wantDNSError(t, err, ports.DNSTemporary, "example.test")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v does not carry the context's deadline", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Fatalf("lookup took %s despite a 150ms context", elapsed)
	}
}

func TestRetryAfterLostQuery(t *testing.T) {
	t.Parallel()
	addr, count := serveUDP(t, func(q *mdns.Msg, n int64) *mdns.Msg {
		if n == 1 {
			return nil // the first datagram is lost
		}
		r := new(mdns.Msg)
		r.SetReply(q)
		r.Answer = append(r.Answer, &mdns.TXT{
			Hdr: mdns.RR_Header{Name: q.Question[0].Name, Rrtype: mdns.TypeTXT, Class: mdns.ClassINET, Ttl: 60},
			Txt: []string{"second"},
		})
		return r
	})
	res := dns.New(addr, dns.Options{Timeout: 100 * time.Millisecond})
	got, err := res.LookupTXT(context.Background(), "example.test")
	if err != nil || !slices.Equal(got, []string{"second"}) || count.Load() != 2 {
		t.Fatalf("TXT = %q, %v after %d queries", got, err, count.Load())
	}
}

func TestRcodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rcode int
		kind  ports.DNSErrorKind
	}{
		{mdns.RcodeRefused, ports.DNSTemporary},
		{mdns.RcodeServerFailure, ports.DNSTemporary},
		{mdns.RcodeNotImplemented, ports.DNSTemporary},
		{mdns.RcodeNameError, ports.DNSNotFound},
	}
	for _, tt := range tests {
		t.Run(mdns.RcodeToString[tt.rcode], func(t *testing.T) {
			t.Parallel()
			addr, _ := serveUDP(t, func(q *mdns.Msg, _ int64) *mdns.Msg {
				return new(mdns.Msg).SetRcode(q, tt.rcode)
			})
			_, err := dns.New(addr, dns.Options{Timeout: time.Second}).LookupTXT(context.Background(), "example.test")
			wantDNSError(t, err, tt.kind, "example.test")
		})
	}
}

func TestRetryWithoutEDNSAfterFormErr(t *testing.T) {
	t.Parallel()
	addr, _ := serveUDP(t, func(q *mdns.Msg, _ int64) *mdns.Msg {
		if q.IsEdns0() != nil {
			return new(mdns.Msg).SetRcode(q, mdns.RcodeFormatError)
		}
		r := new(mdns.Msg).SetReply(q)
		r.Answer = append(r.Answer, &mdns.MX{
			Hdr: mdns.RR_Header{Name: q.Question[0].Name, Rrtype: mdns.TypeMX, Class: mdns.ClassINET, Ttl: 60},
			Mx:  "mx.example.test.", Preference: 5,
		})
		return r
	})
	got, err := dns.New(addr, dns.Options{Timeout: time.Second}).LookupMX(context.Background(), "example.test")
	if err != nil || !slices.Equal(got, []ports.MX{{Host: "mx.example.test", Preference: 5}}) {
		t.Fatalf("MX from a server without EDNS = %v, %v", got, err)
	}
}

func TestNewServerAddress(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"127.0.0.1:5353", "127.0.0.1:5353"},
		{"127.0.0.1", "127.0.0.1:53"},
		{"::1", "[::1]:53"},
		{"[::1]:5353", "[::1]:5353"},
		{"dns.example.test", "dns.example.test:53"},
	}
	for _, tt := range tests {
		if got := dns.New(tt.in, dns.Options{}).Server(); got != tt.want {
			t.Errorf("New(%q).Server() = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// Records whose owner is not the name asked for (nor reached from it through a CNAME of the answer) are
// not an answer: a server that answers example.test's TXT question with evil.example.test's records has
// answered nothing.
func TestRecordsOfAnotherNameAreIgnored(t *testing.T) {
	t.Parallel()
	addr, _ := serveUDP(t, func(q *mdns.Msg, _ int64) *mdns.Msg {
		r := new(mdns.Msg).SetReply(q)
		name := q.Question[0].Name
		hdr := func(owner string, t uint16) mdns.RR_Header {
			return mdns.RR_Header{Name: owner, Rrtype: t, Class: mdns.ClassINET, Ttl: 60}
		}
		switch name {
		case "wrong.test.":
			r.Answer = []mdns.RR{&mdns.TXT{Hdr: hdr("evil.wrong.test.", mdns.TypeTXT), Txt: []string{"v=spf1 -all"}},
				&mdns.MX{Hdr: hdr("evil.wrong.test.", mdns.TypeMX), Preference: 10, Mx: "mx.evil.test."}}
		case "chain.test.":
			r.Answer = []mdns.RR{&mdns.CNAME{Hdr: hdr("CHAIN.test.", mdns.TypeCNAME), Target: "target.test."},
				&mdns.TXT{Hdr: hdr("target.test.", mdns.TypeTXT), Txt: []string{"via the chain"}},
				&mdns.TXT{Hdr: hdr("elsewhere.test.", mdns.TypeTXT), Txt: []string{"not on it"}}}
		}
		return r
	})
	res := dns.New(addr, dns.Options{Timeout: time.Second})
	ctx := context.Background()
	_, err := res.LookupTXT(ctx, "wrong.test")
	wantDNSError(t, err, ports.DNSNoData, "wrong.test")
	_, err = res.LookupMX(ctx, "wrong.test")
	wantDNSError(t, err, ports.DNSNoData, "wrong.test")
	got, err := res.LookupTXT(ctx, "chain.test")
	if err != nil || !slices.Equal(got, []string{"via the chain"}) {
		t.Fatalf("TXT through the answer's CNAME = %q, %v; want only the record on the chain", got, err)
	}
}
