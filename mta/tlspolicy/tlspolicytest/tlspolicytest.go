// Package tlspolicytest gives tests of transport security what a real deployment has: a certificate
// authority issuing certificates at test time, and an HTTPS server on 127.0.0.1 publishing MTA-STS policies
// (RFC 8461 §3.3) for any number of domains, whose answers the test changes while it runs.
package tlspolicytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// CA is a certificate authority trusted by Pool alone.
type CA struct {
	Cert *x509.Certificate
	Pool *x509.CertPool
	key  *ecdsa.PrivateKey
}

// NewCA makes a root certificate authority.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	key := newKey(tb)
	tpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Postmill test root"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Pool: pool, key: key}
}

// Issue returns a server certificate for names (DNS names or IP addresses) signed by ca, valid from an hour
// ago for a day; expired makes it one that ended an hour ago. The chain holds the leaf and the root.
func (ca *CA) Issue(tb testing.TB, expired bool, names ...string) tls.Certificate {
	tb.Helper()
	return issue(tb, ca.Cert, ca.key, expired, names)
}

// SelfSigned returns a certificate for names that signs itself: no root vouches for it.
func SelfSigned(tb testing.TB, names ...string) tls.Certificate {
	tb.Helper()
	return issue(tb, nil, nil, false, names)
}

func issue(tb testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, expired bool, names []string) tls.Certificate {
	key := newKey(tb)
	tpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if expired {
		tpl.NotBefore, tpl.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tpl.IPAddresses = append(tpl.IPAddresses, ip)
		} else {
			tpl.DNSNames = append(tpl.DNSNames, n)
		}
	}
	if parent == nil {
		parent, parentKey = tpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	chain := [][]byte{der}
	if parent != tpl {
		chain = append(chain, parent.Raw)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}
}

// SPKISHA256 is the digest a "3 1 1" (DANE-EE, SPKI, SHA-256) TLSA record publishes for cert.
func SPKISHA256(cert *x509.Certificate) []byte {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return sum[:]
}

// DANEZone returns the records of a test zone with three domains, each with one MX host on 127.0.0.1:
// good, whose host has a TLSA record (3 1 1) of key's certificate; wrong, whose record is of other's; and
// bogus, with good's record at the name returned as corrupt, whose signature the signed zone is to corrupt
// (dnstest.NewValidating's corrupt argument).
func DANEZone(key, other *x509.Certificate) (records []string, corrupt string) {
	tlsa := func(c *x509.Certificate) string { return "3 1 1 " + hex.EncodeToString(SPKISHA256(c)) }
	return []string{
		"good IN MX 10 mx.good",
		"mx.good IN A 127.0.0.1",
		"_25._tcp.mx.good IN TLSA " + tlsa(key),
		"wrong IN MX 10 mx.wrong",
		"mx.wrong IN A 127.0.0.1",
		"_25._tcp.mx.wrong IN TLSA " + tlsa(other),
		"bogus IN MX 10 mx.bogus",
		"mx.bogus IN A 127.0.0.1",
		"_25._tcp.mx.bogus IN TLSA " + tlsa(key),
	}, "_25._tcp.mx.bogus"
}

// ServerTLS is a server configuration presenting cert.
func ServerTLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// PolicyServer is an HTTPS server on 127.0.0.1 answering GET /.well-known/mta-sts.txt per Host header.
type PolicyServer struct {
	Port int

	mu      sync.Mutex
	answers map[string]answer // key: host without port
	fetches map[string]int
}

type answer struct {
	status   int
	body     string
	location string
}

// ServePolicies starts a PolicyServer presenting cert (which should name every mta-sts.<domain> host the
// test publishes) and stops it when the test ends.
func ServePolicies(tb testing.TB, cert tls.Certificate) *PolicyServer {
	tb.Helper()
	ps := &PolicyServer{answers: map[string]answer{}, fetches: map[string]int{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(ps.serve))
	srv.TLS = ServerTLS(cert)
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ps.Port, _ = strconv.Atoi(port)
	return ps
}

// Set publishes body with status 200 as the policy of domain (served at mta-sts.<domain>).
func (ps *PolicyServer) Set(domain, body string) { ps.SetAnswer(domain, http.StatusOK, body, "") }

// SetAnswer makes the policy host of domain answer status with body, and with a Location header when
// location is not empty (a redirect).
func (ps *PolicyServer) SetAnswer(domain string, status int, body, location string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.answers["mta-sts."+domain] = answer{status: status, body: body, location: location}
}

// Fetches counts the policy requests for domain so far.
func (ps *PolicyServer) Fetches(domain string) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.fetches["mta-sts."+domain]
}

func (ps *PolicyServer) serve(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	ps.mu.Lock()
	a, ok := ps.answers[host]
	ps.fetches[host]++
	ps.mu.Unlock()
	if !ok || r.URL.Path != "/.well-known/mta-sts.txt" {
		http.NotFound(w, r)
		return
	}
	if a.location != "" {
		w.Header().Set("Location", a.location)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(a.status)
	_, _ = w.Write([]byte(a.body))
}

// Policy renders an MTA-STS policy body (RFC 8461 §3.2) with CRLF line ends.
func Policy(mode string, maxAge int, mx ...string) string {
	lines := []string{"version: STSv1", "mode: " + mode}
	for _, m := range mx {
		lines = append(lines, "mx: "+m)
	}
	lines = append(lines, "max_age: "+strconv.Itoa(maxAge))
	return strings.Join(lines, "\r\n") + "\r\n"
}
