package dns_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/dns"
	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/ports"
)

// Real DNSSEC: a zone signed with ldns-signzone, served by NSD, validated by Unbound (dnstest.NewValidating).
// The AD bit the resolver reports comes from Unbound's validation, not from a stand-in.
func TestLookupsThroughAValidatingResolver(t *testing.T) {
	t.Parallel()
	digest := bytes.Repeat([]byte{0xab}, 32)
	tlsa := "3 1 1 " + strings.Repeat("ab", 32)
	v := dnstest.NewValidating(t, "signed.test", []string{
		"good IN MX 10 mx.good",
		"mx.good IN A 127.0.0.1",
		"_25._tcp.mx.good IN TLSA " + tlsa,
		"bogus IN MX 10 mx.bogus",
		"mx.bogus IN A 127.0.0.1",
		"_25._tcp.mx.bogus IN TLSA " + tlsa,
	}, "_25._tcp.mx.bogus")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := dns.New(v.Resolver, dns.Options{Timeout: 2 * time.Second})

	recs, ad, err := res.LookupTLSA(ctx, "_25._tcp.mx.good.signed.test")
	if err != nil || !ad || len(recs) != 1 || recs[0].Usage != 3 || recs[0].Selector != 1 || recs[0].MatchingType != 1 || !bytes.Equal(recs[0].Data, digest) {
		t.Fatalf("validated TLSA = %+v, ad %v, %v; want the record, authenticated", recs, ad, err)
	}
	mxs, ad, err := res.LookupMXAuthenticated(ctx, "good.signed.test")
	if err != nil || !ad || len(mxs) != 1 || mxs[0].Host != "mx.good.signed.test" {
		t.Fatalf("validated MX = %v, ad %v, %v", mxs, ad, err)
	}
	// The ordinary lookups, which do not ask for DNSSEC, get the same data.
	if ips, err := res.LookupIP(ctx, "mx.good.signed.test"); err != nil || len(ips) != 1 || ips[0].String() != "127.0.0.1" {
		t.Fatalf("LookupIP = %v, %v", ips, err)
	}
	// A name that does not exist: an authenticated denial (NSEC) is still NXDOMAIN, not a failure.
	_, _, err = res.LookupTLSA(ctx, "_25._tcp.mx.none.signed.test")
	wantDNSError(t, err, ports.DNSNotFound, "_25._tcp.mx.none.signed.test")

	// A TLSA record whose signature does not verify: Unbound answers SERVFAIL, a temporary failure.
	_, _, err = res.LookupTLSA(ctx, "_25._tcp.mx.bogus.signed.test")
	wantDNSError(t, err, ports.DNSTemporary, "_25._tcp.mx.bogus.signed.test")
	// The rest of that domain still validates.
	if _, ad, err := res.LookupMXAuthenticated(ctx, "bogus.signed.test"); err != nil || !ad {
		t.Fatalf("MX of the domain with a bogus TLSA record: ad %v, %v", ad, err)
	}

	// The same records straight from the authoritative server: signed, but nobody validated them, so no AD bit.
	direct := dns.New(v.Authority, dns.Options{Timeout: 2 * time.Second})
	if recs, ad, err := direct.LookupTLSA(ctx, "_25._tcp.mx.good.signed.test"); err != nil || ad || len(recs) != 1 {
		t.Fatalf("TLSA from the authoritative server = %v, ad %v, %v; want the record, not authenticated", recs, ad, err)
	}
	// The bogus record is served like any other: the SERVFAIL above is Unbound's verdict on its signature.
	if recs, ad, err := direct.LookupTLSA(ctx, "_25._tcp.mx.bogus.signed.test"); err != nil || ad || len(recs) != 1 {
		t.Fatalf("bogus TLSA from the authoritative server = %v, ad %v, %v; want the record, not authenticated", recs, ad, err)
	}
}
