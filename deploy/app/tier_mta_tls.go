package app

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/mta/tlspolicy"
	"github.com/postmill/postmill/ports"
)

// MTATLSConfig is the outbound transport security of the MTA tier (docs/operations.md, "Outbound TLS:
// MTA-STS, DANE, TLS-RPT").
type MTATLSConfig struct {
	// STS and DANE say which policies the MTA honours (POSTMILL_MTA_TLS_POLICIES, default both).
	STS  bool
	DANE bool
	// RootsFile is a PEM bundle of the roots trusted for MX certificates and MTA-STS policy hosts
	// (POSTMILL_MTA_TLS_ROOTS); "" means the system's.
	RootsFile string
	// STSPort is the port MTA-STS policies are fetched from (POSTMILL_MTA_STS_PORT, default 443).
	STSPort int
}

// loadMTATLSEnv reads the variables of MTATLSConfig.
func loadMTATLSEnv(getenv Getenv) (MTATLSConfig, error) {
	c := MTATLSConfig{STS: true, DANE: true, RootsFile: strings.TrimSpace(getenv("POSTMILL_MTA_TLS_ROOTS")), STSPort: 443}
	var errs []error
	if v := strings.TrimSpace(getenv("POSTMILL_MTA_TLS_POLICIES")); v != "" {
		c.STS, c.DANE = false, false
		for _, p := range list(strings.ToLower(v)) {
			switch p {
			case "mta-sts":
				c.STS = true
			case "dane":
				c.DANE = true
			case "none":
			default:
				errs = append(errs, fmt.Errorf("POSTMILL_MTA_TLS_POLICIES: %q is not mta-sts, dane or none", p))
			}
		}
	}
	if v := strings.TrimSpace(getenv("POSTMILL_MTA_STS_PORT")); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("POSTMILL_MTA_STS_PORT: %q is not a port", v))
		} else {
			c.STSPort = p
		}
	}
	return c, errors.Join(errs...)
}

// mtaRoots reads POSTMILL_MTA_TLS_ROOTS: nil (the system's roots) when unset.
func (a *App) mtaRoots() (*x509.CertPool, error) {
	path := a.cfg.MTATLS.RootsFile
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("POSTMILL_MTA_TLS_ROOTS: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("POSTMILL_MTA_TLS_ROOTS: %s holds no PEM certificate", path)
	}
	return pool, nil
}

// mtaTransport builds the MTA's transport security: the roots for STARTTLS (set on cfg) and the MTA-STS
// and DANE engine, which writes its TLS-RPT reports under POSTMILL_DATA_DIR/tlsrpt. The engine is nil
// when both policies are off.
func (a *App) mtaTransport(cfg *mta.Config) (*tlspolicy.Engine, error) {
	roots, err := a.mtaRoots()
	if err != nil {
		return nil, err
	}
	if roots != nil {
		cfg.TLSConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	tc := a.cfg.MTATLS
	if !tc.STS && !tc.DANE {
		return nil, nil
	}
	return tlspolicy.New(tlspolicy.Config{
		DisableSTS: !tc.STS, DisableDANE: !tc.DANE, RootCAs: roots, AllowNets: cfg.AllowNets,
		HTTPSPort: tc.STSPort, ReportDir: filepath.Join(a.cfg.DataDir, "tlsrpt"), Reporter: a.cfg.MTAHelo,
		Logger: a.logger,
	}, a.dnsResolver(), a.dnssecResolver())
}

// dnssecResolver is the resolver of dnsResolver, for the lookups that read the AD bit (DANE).
func (a *App) dnssecResolver() ports.DNSSECResolver {
	a.dnsResolver()
	a.shared.mu.Lock()
	defer a.shared.mu.Unlock()
	return a.shared.resolver
}
