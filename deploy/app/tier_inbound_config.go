package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
)

// InboundConfig is the inbound tier's and inbound mail's own configuration: STARTTLS on the MX listener and
// the spam check of received mail (docs/inbound.md).
type InboundConfig struct {
	// TLSCert and TLSKey are PEM files the MX listener offers STARTTLS with (POSTMILL_SMTP_TLS_CERT,
	// POSTMILL_SMTP_TLS_KEY); both or neither. Without them the listener offers no TLS.
	TLSCert string
	TLSKey  string
	// Spam is the spam checker of received mail (POSTMILL_SPAM): "ham" (every message ham; also the
	// meaning of empty) or "spamd", SpamAssassin's spamd at SpamdAddr (POSTMILL_SPAMD_ADDR, host:port).
	Spam      string
	SpamdAddr string
}

// loadInboundEnv reads the variables of InboundConfig; validate checks them.
func loadInboundEnv(getenv Getenv) InboundConfig {
	return InboundConfig{
		TLSCert:   strings.TrimSpace(getenv("POSTMILL_SMTP_TLS_CERT")),
		TLSKey:    strings.TrimSpace(getenv("POSTMILL_SMTP_TLS_KEY")),
		Spam:      strings.ToLower(strings.TrimSpace(getenv("POSTMILL_SPAM"))),
		SpamdAddr: strings.TrimSpace(getenv("POSTMILL_SPAMD_ADDR")),
	}
}

// validate reports settings that cannot work, before anything starts: an unknown spam checker, spamd
// without a host:port, and a certificate and key that are not both given or do not load.
func (c InboundConfig) validate() error {
	var errs []error
	switch c.Spam {
	case "", "ham":
		if c.SpamdAddr != "" {
			errs = append(errs, errors.New("POSTMILL_SPAMD_ADDR is set but POSTMILL_SPAM is not spamd"))
		}
	case "spamd":
		if _, _, err := net.SplitHostPort(c.SpamdAddr); err != nil {
			errs = append(errs, fmt.Errorf("POSTMILL_SPAM=spamd needs POSTMILL_SPAMD_ADDR as host:port (got %q)", c.SpamdAddr))
		}
	default:
		errs = append(errs, fmt.Errorf("POSTMILL_SPAM: %q is not ham or spamd", c.Spam))
	}
	if _, err := c.tlsConfig(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tlsConfig loads the MX listener's certificate for STARTTLS; nil without one.
func (c InboundConfig) tlsConfig() (*tls.Config, error) {
	if c.TLSCert == "" && c.TLSKey == "" {
		return nil, nil
	}
	if c.TLSCert == "" || c.TLSKey == "" {
		return nil, errors.New("POSTMILL_SMTP_TLS_CERT and POSTMILL_SMTP_TLS_KEY go together")
	}
	pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("POSTMILL_SMTP_TLS_CERT/POSTMILL_SMTP_TLS_KEY: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}
