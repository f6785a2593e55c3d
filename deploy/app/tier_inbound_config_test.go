package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInboundConfigValidatedAtStart: POSTMILL_SPAM, POSTMILL_SPAMD_ADDR and POSTMILL_SMTP_TLS_CERT/KEY are
// read by LoadEnv and refused by Validate before anything starts.
func TestInboundConfigValidatedAtStart(t *testing.T) {
	t.Parallel()
	cert, key := writeSelfSigned(t)
	targets, err := ParseTargets("inbound")
	if err != nil {
		t.Fatal(err)
	}
	load := func(vars map[string]string) (Config, error) {
		t.Helper()
		base := map[string]string{"POSTMILL_SECRET_KEY": "0123456789abcdef0123", "POSTMILL_DATA_DIR": t.TempDir()}
		for k, v := range vars {
			base[k] = v
		}
		c, err := LoadEnv(func(k string) string { return base[k] })
		if err != nil {
			return c, err
		}
		return c, c.Validate(targets)
	}
	c, err := load(nil)
	if err != nil || c.Inbound != (InboundConfig{}) {
		t.Fatalf("defaults: %+v, %v", c.Inbound, err)
	}
	c, err = load(map[string]string{"POSTMILL_SPAM": "SpamD", "POSTMILL_SPAMD_ADDR": "127.0.0.1:783",
		"POSTMILL_SMTP_TLS_CERT": cert, "POSTMILL_SMTP_TLS_KEY": key})
	if err != nil || c.Inbound.Spam != "spamd" || c.Inbound.SpamdAddr != "127.0.0.1:783" || c.Inbound.TLSCert != cert {
		t.Fatalf("spamd and TLS: %+v, %v", c.Inbound, err)
	}
	if tc, err := c.Inbound.tlsConfig(); err != nil || tc == nil || len(tc.Certificates) != 1 {
		t.Fatalf("tlsConfig = %v, %v", tc, err)
	}
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"POSTMILL_SPAM": "rspamd"}, `POSTMILL_SPAM: "rspamd" is not ham or spamd`},
		{map[string]string{"POSTMILL_SPAM": "spamd"}, "POSTMILL_SPAM=spamd needs POSTMILL_SPAMD_ADDR"},
		{map[string]string{"POSTMILL_SPAM": "spamd", "POSTMILL_SPAMD_ADDR": "localhost"}, "needs POSTMILL_SPAMD_ADDR as host:port"},
		{map[string]string{"POSTMILL_SPAMD_ADDR": "127.0.0.1:783"}, "POSTMILL_SPAMD_ADDR is set but POSTMILL_SPAM is not spamd"},
		{map[string]string{"POSTMILL_SMTP_TLS_CERT": cert}, "POSTMILL_SMTP_TLS_CERT and POSTMILL_SMTP_TLS_KEY go together"},
		{map[string]string{"POSTMILL_SMTP_TLS_CERT": cert, "POSTMILL_SMTP_TLS_KEY": cert}, "POSTMILL_SMTP_TLS_CERT/POSTMILL_SMTP_TLS_KEY"},
		{map[string]string{"POSTMILL_SMTP_TLS_CERT": filepath.Join(t.TempDir(), "missing.pem"), "POSTMILL_SMTP_TLS_KEY": key},
			"POSTMILL_SMTP_TLS_CERT/POSTMILL_SMTP_TLS_KEY"},
	} {
		if _, err := load(tc.vars); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.vars, err, tc.want)
		}
	}
}

// writeSelfSigned writes a self-signed certificate and its key as PEM files and returns their paths.
func writeSelfSigned(t *testing.T) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mx.postmill.test"},
		DNSNames: []string{"mx.postmill.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
