package tlspolicy

import (
	"crypto/sha256"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/postmill/postmill/mta/tlspolicy/tlspolicytest"
	"github.com/postmill/postmill/ports"
)

// handshake runs a real TLS handshake over loopback TCP against a server presenting cert and returns what
// the client saw, without any verification of its own.
func handshake(tb testing.TB, cert tls.Certificate, serverName string) tls.ConnectionState {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s := tls.Server(c, tlspolicytest.ServerTLS(cert))
		_ = s.Handshake()
		_ = s.Close()
	}()
	c := tls.Client(mustDial(tb, ln.Addr().String()), &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
	defer func() { _ = c.Close() }()
	if err := c.Handshake(); err != nil {
		tb.Fatal(err)
	}
	return c.ConnectionState()
}

func mustDial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func result(f *Failure) string {
	if f == nil {
		return "ok"
	}
	return f.Result
}

func TestVerifyWebPKI(t *testing.T) {
	t.Parallel()
	ca := tlspolicytest.NewCA(t)
	const host = "mx.example.test"
	cases := []struct {
		name string
		cert tls.Certificate
		want string
	}{
		{"valid for the host", ca.Issue(t, false, host), "ok"},
		{"wildcard for the host", ca.Issue(t, false, "*.example.test"), "ok"},
		{"another name", ca.Issue(t, false, "mx.elsewhere.test"), ResultCertificateHostMismatch},
		{"expired", ca.Issue(t, true, host), ResultCertificateExpired},
		{"self-signed", tlspolicytest.SelfSigned(t, host), ResultCertificateNotTrusted},
	}
	for _, tc := range cases {
		cs := handshake(t, tc.cert, host)
		if got := result(verifyWebPKI(cs, host, ca.Pool, time.Now())); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestVerifyDANE(t *testing.T) {
	t.Parallel()
	ca := tlspolicytest.NewCA(t)
	const host = "mx.example.test"
	leaf := ca.Issue(t, false, "unrelated.name") // DANE-EE ignores names and dates
	expired := tlspolicytest.SelfSigned(t, "x")
	named := ca.Issue(t, false, host)
	ee := func(c tls.Certificate) ports.TLSA {
		return ports.TLSA{Usage: 3, Selector: 1, MatchingType: 1, Data: tlspolicytest.SPKISHA256(c.Leaf)}
	}
	taSum := sha256.Sum256(ca.Cert.Raw)
	ta := ports.TLSA{Usage: 2, Selector: 0, MatchingType: 1, Data: taSum[:]}
	cases := []struct {
		name    string
		cert    tls.Certificate
		records []ports.TLSA
		want    string
	}{
		{"DANE-EE 3 1 1 matches the key", leaf, []ports.TLSA{ee(leaf)}, "ok"},
		{"DANE-EE 3 0 1 matches the certificate", leaf, []ports.TLSA{{Usage: 3, Selector: 0, MatchingType: 1, Data: sum(leaf.Leaf.Raw)}}, "ok"},
		{"DANE-EE 3 0 0 full certificate", leaf, []ports.TLSA{{Usage: 3, Selector: 0, MatchingType: 0, Data: leaf.Leaf.Raw}}, "ok"},
		{"DANE-EE of another key", leaf, []ports.TLSA{ee(expired)}, ResultTLSAInvalid},
		{"one of several records matches", leaf, []ports.TLSA{ee(expired), ee(leaf)}, "ok"},
		{"DANE-TA names the issuer", named, []ports.TLSA{ta}, "ok"},
		{"DANE-TA but the leaf names another host", leaf, []ports.TLSA{ta}, ResultCertificateHostMismatch},
		{"DANE-TA of a self-signed server", expired, []ports.TLSA{ta}, ResultTLSAInvalid},
	}
	for _, tc := range cases {
		cs := handshake(t, tc.cert, host)
		if got := result(verifyDANE(cs, host, usableTLSA(tc.records), time.Now())); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

func TestUsableTLSA(t *testing.T) {
	t.Parallel()
	d32, d64 := make([]byte, 32), make([]byte, 64)
	got := usableTLSA([]ports.TLSA{
		{Usage: 3, Selector: 1, MatchingType: 1, Data: d32}, // usable
		{Usage: 2, Selector: 0, MatchingType: 2, Data: d64}, // usable
		{Usage: 1, Selector: 1, MatchingType: 1, Data: d32}, // PKIX-EE: not for SMTP (RFC 7672 §3.1.3)
		{Usage: 0, Selector: 0, MatchingType: 1, Data: d32}, // PKIX-TA: neither
		{Usage: 3, Selector: 2, MatchingType: 1, Data: d32}, // unknown selector
		{Usage: 3, Selector: 1, MatchingType: 3, Data: d32}, // unknown matching type
		{Usage: 3, Selector: 1, MatchingType: 1, Data: d64}, // wrong digest length
	})
	if len(got) != 2 || got[0].Usage != 3 || got[1].Usage != 2 {
		t.Fatalf("usable %+v", got)
	}
}
