// Package rpctest gives tests of any module a throwaway certificate authority for the Connect hop between
// tiers: a CA, a server certificate for the core and client certificates for the tiers, made at test time
// and written as PEM files (what POSTMILL_RPC_TLS_CERT, _KEY and _CA name) to the test's temporary
// directory. Nothing is valid for more than a day, and the keys never leave that directory.
package rpctest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is one certificate authority and the directory its files are written to.
type PKI struct {
	// CAFile is the PEM file of the CA certificate: the bundle both ends verify the other against.
	CAFile string

	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Files are the PEM files of one certificate: its chain, its key and the CA it chains to.
type Files struct {
	Cert, Key, CA string
}

// MustPKI makes a new CA named name (files under a directory of tb's own).
func MustPKI(tb testing.TB, name string) *PKI {
	tb.Helper()
	key := mustKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	p := &PKI{dir: tb.TempDir(), cert: cert, key: key}
	p.CAFile = p.write(tb, name+"-ca.pem", "CERTIFICATE", der)
	return p
}

// Server issues the core's certificate, valid for 127.0.0.1, ::1 and localhost, whose extended key usage
// is server authentication.
func (p *PKI) Server(tb testing.TB) Files {
	tb.Helper()
	return p.issue(tb, "core", x509.ExtKeyUsageServerAuth, func(c *x509.Certificate) {
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		c.DNSNames = []string{"localhost"}
	})
}

// Client issues a tier's client certificate with common name name, whose extended key usage is client
// authentication.
func (p *PKI) Client(tb testing.TB, name string) Files {
	tb.Helper()
	return p.issue(tb, name, x509.ExtKeyUsageClientAuth, nil)
}

func (p *PKI) issue(tb testing.TB, name string, usage x509.ExtKeyUsage, edit func(*x509.Certificate)) Files {
	tb.Helper()
	key := mustKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return Files{
		Cert: p.write(tb, name+".pem", "CERTIFICATE", der),
		Key:  p.write(tb, name+"-key.pem", "PRIVATE KEY", keyDER),
		CA:   p.CAFile,
	}
}

func (p *PKI) write(tb testing.TB, name, typ string, der []byte) string {
	tb.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func mustKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
