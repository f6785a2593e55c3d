package dnstest_test

import (
	"strings"
	"testing"

	mdns "github.com/miekg/dns"
	"github.com/postmill/postmill/adapters/dns/dnstest"
)

// query asks the server over the given transport (advertising a 4096-byte EDNS buffer), without the
// Resolver under test, so these tests check the wire answers the server gives.
func query(tb testing.TB, s *dnstest.Server, network, name string, qtype uint16) *mdns.Msg {
	tb.Helper()
	m := new(mdns.Msg)
	m.SetQuestion(mdns.Fqdn(name), qtype)
	m.SetEdns0(4096, false)
	r, _, err := (&mdns.Client{Net: network}).Exchange(m, s.Addr())
	if err != nil {
		tb.Fatalf("%s query %s: %v", network, name, err)
	}
	return r
}

func TestLongTXTIsSplitIntoStrings(t *testing.T) {
	t.Parallel()
	s := dnstest.New(t)
	value := strings.Repeat("k", 600)
	s.SetTXT("sel._domainkey.example.test", value)
	for _, network := range []string{"udp", "tcp"} {
		r := query(t, s, network, "sel._domainkey.example.test", mdns.TypeTXT)
		if len(r.Answer) != 1 {
			t.Fatalf("%s: %d answers", network, len(r.Answer))
		}
		txt := r.Answer[0].(*mdns.TXT).Txt
		if len(txt) != 3 || len(txt[0]) != 255 || len(txt[1]) != 255 || strings.Join(txt, "") != value {
			t.Fatalf("%s: strings of %v bytes", network, lens(txt))
		}
	}
}

func lens(ss []string) []int {
	var out []int
	for _, s := range ss {
		out = append(out, len(s))
	}
	return out
}

func TestRecordsChangeAtRuntime(t *testing.T) {
	t.Parallel()
	s := dnstest.New(t)
	if r := query(t, s, "udp", "a.example.test", mdns.TypeTXT); r.Rcode != mdns.RcodeNameError || !r.Authoritative {
		t.Fatalf("unknown name: rcode %s aa=%v", mdns.RcodeToString[r.Rcode], r.Authoritative)
	}
	s.SetTXT("a.example.test", "one")
	if r := query(t, s, "udp", "a.example.test", mdns.TypeTXT); len(r.Answer) != 1 {
		t.Fatalf("after SetTXT: %v", r)
	}
	s.SetTXT("a.example.test", "two", "three")
	if r := query(t, s, "udp", "a.example.test", mdns.TypeTXT); len(r.Answer) != 2 {
		t.Fatalf("SetTXT does not replace: %v", r)
	}
	s.SetServFail("a.example.test")
	if r := query(t, s, "udp", "a.example.test", mdns.TypeTXT); r.Rcode != mdns.RcodeServerFailure || len(r.Answer) != 0 {
		t.Fatalf("SetServFail: %v", r)
	}
	s.Remove("a.example.test")
	if r := query(t, s, "tcp", "a.example.test", mdns.TypeTXT); r.Rcode != mdns.RcodeNameError {
		t.Fatalf("after Remove: %v", r)
	}
}

func TestCNAMELoopEnds(t *testing.T) {
	t.Parallel()
	s := dnstest.New(t)
	s.SetCNAME("a.example.test", "b.example.test")
	s.SetCNAME("b.example.test", "a.example.test")
	if r := query(t, s, "udp", "a.example.test", mdns.TypeTXT); r.Rcode != mdns.RcodeServerFailure {
		t.Fatalf("CNAME loop: %v", r)
	}
}
