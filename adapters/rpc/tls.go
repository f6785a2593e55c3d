package rpc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSFiles names the PEM files of one end of the hop (POSTMILL_RPC_TLS_CERT, _KEY and _CA). The hop
// carries bearer credentials, passwords at login, DKIM private keys and whole messages, so between
// machines it should run over TLS, and with CA set on both ends over mutual TLS.
type TLSFiles struct {
	// Cert and Key are this end's certificate chain and private key: the core's server certificate, or
	// the client certificate a tier presents to a core that requires one.
	Cert, Key string
	// CA is the bundle the other end's certificate must chain to. On the core it makes client
	// certificates required; on a tier it replaces the system's roots for verifying the core.
	CA string
}

// Empty reports whether no file is named, that is whether the hop runs without TLS settings of its own.
func (f TLSFiles) Empty() bool { return f.Cert == "" && f.Key == "" && f.CA == "" }

// ServerTLS is the core's TLS configuration: its certificate, and, when CA is set, client certificates
// required and verified against CA (mutual TLS), so that a caller without one is refused during the
// handshake, before it can send a credential. Both ends are Postmill, so TLS 1.3 is the floor.
func ServerTLS(f TLSFiles) (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("rpc: a TLS server needs a certificate and its key")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("rpc: server certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	if f.CA != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientTLS is a tier's TLS configuration for reaching the core: the core's certificate verified
// against CA when it is set (the system's roots otherwise), and this tier's certificate presented when
// Cert and Key are set.
func ClientTLS(f TLSFiles) (*tls.Config, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("rpc: a client certificate needs its key, and a key its certificate")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("rpc: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if f.CA != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rpc: CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("rpc: CA bundle %s holds no PEM certificate", path)
	}
	return pool, nil
}
