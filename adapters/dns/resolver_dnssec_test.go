package dns_test

import (
	"bytes"
	"testing"

	"github.com/postmill/postmill/ports"
)

// The test server stands in for a validating resolver: for names under a zone marked secure it sets the AD
// bit when the query asks for DNSSEC, as Unbound or BIND do after checking the zone's signatures. Nothing
// is signed, so these tests cover what Postmill reads from the wire (the DO bit asked, the AD bit and the
// TLSA fields read back); resolver_validating_test.go asks a real validator, Unbound, about a signed zone.

func TestLookupTLSAReadsRecordsAndTheADBit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	digest := bytes.Repeat([]byte{0xab}, 32)
	b.srv.SetTLSA("_25._tcp.mx.signed.test",
		ports.TLSA{Usage: 3, Selector: 1, MatchingType: 1, Data: digest},
		ports.TLSA{Usage: 2, Selector: 0, MatchingType: 2, Data: bytes.Repeat([]byte{1}, 64)})
	b.srv.SetTLSA("_25._tcp.mx.plain.test", ports.TLSA{Usage: 3, Selector: 1, MatchingType: 1, Data: digest})
	b.srv.SetSecure("signed.test", true)

	recs, ad, err := b.res.LookupTLSA(b.ctx, "_25._tcp.mx.signed.test")
	if err != nil {
		t.Fatal(err)
	}
	if !ad {
		t.Error("answer from a secure zone not authenticated")
	}
	if len(recs) != 2 || recs[0].Usage != 3 || recs[0].Selector != 1 || recs[0].MatchingType != 1 || !bytes.Equal(recs[0].Data, digest) ||
		recs[1].Usage != 2 || recs[1].MatchingType != 2 || len(recs[1].Data) != 64 {
		t.Fatalf("records %+v", recs)
	}

	// The same records from a zone the resolver could not validate: returned, but not authenticated.
	recs, ad, err = b.res.LookupTLSA(b.ctx, "_25._tcp.mx.plain.test")
	if err != nil || ad || len(recs) != 1 {
		t.Fatalf("insecure TLSA = %v, ad %v, %v; want one record, not authenticated", recs, ad, err)
	}

	// No TLSA at an MX host: NXDOMAIN, as for every lookup.
	_, _, err = b.res.LookupTLSA(b.ctx, "_25._tcp.mx.none.test")
	wantDNSError(t, err, ports.DNSNotFound, "_25._tcp.mx.none.test")

	b.srv.SetServFail("_25._tcp.mx.broken.signed.test")
	_, _, err = b.res.LookupTLSA(b.ctx, "_25._tcp.mx.broken.signed.test")
	wantDNSError(t, err, ports.DNSTemporary, "_25._tcp.mx.broken.signed.test")
}

func TestLookupMXAuthenticated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.SetMX("signed.test", ports.MX{Host: "mx2.signed.test", Preference: 20}, ports.MX{Host: "mx1.signed.test", Preference: 10})
	b.srv.SetMX("plain.test", ports.MX{Host: "mx.plain.test", Preference: 10})
	b.srv.SetSecure("signed.test", true)

	mxs, ad, err := b.res.LookupMXAuthenticated(b.ctx, "signed.test")
	if err != nil || !ad || len(mxs) != 2 || mxs[0].Host != "mx1.signed.test" {
		t.Fatalf("MX = %v, ad %v, %v; want two sorted records, authenticated", mxs, ad, err)
	}
	if _, ad, err := b.res.LookupMXAuthenticated(b.ctx, "plain.test"); err != nil || ad {
		t.Fatalf("insecure MX: ad %v, %v", ad, err)
	}
	// The ordinary lookup does not ask for DNSSEC, and its answers are the same.
	if mxs, err := b.res.LookupMX(b.ctx, "signed.test"); err != nil || len(mxs) != 2 {
		t.Fatalf("LookupMX = %v, %v", mxs, err)
	}

	// Taking the zone's mark away is what a resolver does when validation stops succeeding for it.
	b.srv.SetSecure("signed.test", false)
	if _, ad, err := b.res.LookupMXAuthenticated(b.ctx, "signed.test"); err != nil || ad {
		t.Fatalf("after the zone lost its mark: ad %v, %v", ad, err)
	}
}
