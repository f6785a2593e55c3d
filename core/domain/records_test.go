package domain

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"testing"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

func TestBuildRecords(t *testing.T) {
	t.Parallel()
	cfg := validConfig().withDefaults()
	n := 0
	ids := func() string { n++; return fmt.Sprintf("rec-%d", n) }
	got := buildRecords(cfg, "dom-1", "example.org", "pmabcdefghij", "PUBKEY", ids)
	want := []ports.DNSRecord{
		{ID: "rec-1", DomainID: "dom-1", Type: ports.RecordSPF, RecordType: "TXT", Host: "example.org",
			Value: "v=spf1 include:spf.postmill.test ~all", TTL: 3600, Required: true},
		{ID: "rec-2", DomainID: "dom-1", Type: ports.RecordDKIM, RecordType: "TXT", Host: "pmabcdefghij._domainkey.example.org",
			Value: "v=DKIM1; k=rsa; p=PUBKEY", TTL: 3600, Required: true},
		{ID: "rec-3", DomainID: "dom-1", Type: ports.RecordDMARC, RecordType: "TXT", Host: "_dmarc.example.org",
			Value: "v=DMARC1; p=quarantine; rua=mailto:dmarc@reports.postmill.test; fo=1", TTL: 3600, Required: false},
		{ID: "rec-4", DomainID: "dom-1", Type: ports.RecordReturnPath, RecordType: "CNAME", Host: "bounce.example.org",
			Value: "bounces.postmill.test", TTL: 3600, Required: true},
		{ID: "rec-5", DomainID: "dom-1", Type: ports.RecordTracking, RecordType: "CNAME", Host: "track.example.org",
			Value: "track.postmill.test", TTL: 3600, Required: false},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].CheckedAt != nil || got[i].Verified {
			t.Errorf("record %d starts checked: %+v", i, got[i])
		}
		got[i].CheckedAt = nil
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestNewSelector(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^pm[a-z2-7]{10}$`)
	seen := map[string]bool{}
	for range 100 {
		s := newSelector()
		if !re.MatchString(s) {
			t.Fatalf("selector %q is not pm + 10 lower-case base32 characters", s)
		}
		if seen[s] {
			t.Fatalf("selector %q repeated", s)
		}
		seen[s] = true
	}
}

func TestDKIMKeySealRoundTrip(t *testing.T) {
	t.Parallel()
	kr := mustKeyring(t)
	der, pub, err := newDKIMKey(1024)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := sealKey(kr, der, "domain-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) <= len(der) || string(sealed[len(sealed)-len(der):]) == string(der) {
		t.Fatal("sealed key is not encrypted")
	}

	key, err := openRSAKey(kr, ports.Domain{ID: "domain-a", DKIMPrivateKey: sealed})
	if err != nil {
		t.Fatal(err)
	}
	if key.N.BitLen() != 1024 {
		t.Errorf("key has %d bits", key.N.BitLen())
	}
	// The published p= value is the public half of the sealed private key.
	raw, err := base64.StdEncoding.DecodeString(pub)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := x509.ParsePKIXPublicKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(parsed.(*rsa.PublicKey)) {
		t.Fatal("published public key does not match the sealed private key")
	}

	// Bound to its domain: the same bytes on another domain's row do not open.
	if _, err := openRSAKey(kr, ports.Domain{ID: "domain-b", DKIMPrivateKey: sealed}); !errors.Is(err, secret.ErrOpen) {
		t.Fatalf("opened under another domain id: %v", err)
	}
}

func mustKeyring(tb testing.TB) *secret.Keyring {
	tb.Helper()
	kr, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		tb.Fatal(err)
	}
	return kr
}

// openRSAKey opens a sealed DKIM key through OpenKey and parses it as RSA.
func openRSAKey(k *secret.Keyring, d ports.Domain) (*rsa.PrivateKey, error) {
	der, err := OpenKey(k, d)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, err
	}
	key, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("dkim key is %T, not RSA", parsed)
	}
	return key, nil
}
