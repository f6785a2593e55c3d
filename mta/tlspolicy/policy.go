// Package tlspolicy decides what transport security the MTA owes each MX host of a recipient domain, and
// reports how it went:
//
//   - MTA-STS (RFC 8461): the domain's `_mta-sts` TXT record announces a policy, fetched over HTTPS from
//     mta-sts.<domain> through the forbidden-address rule, kept in a bounded cache until its max_age or a new
//     TXT id, and kept in use when a refresh fails. In enforce mode only MX hosts matching the policy are
//     used, and only over TLS with a certificate valid for the host under the Web PKI; testing mode checks
//     the same and reports failures without holding mail back.
//   - DANE (RFC 7672): when the resolver authenticated (AD bit) both the domain's MX records and a host's
//     TLSA records at _25._tcp.<host>, that host gets TLS verified against the TLSA records instead of the
//     Web PKI. DANE takes precedence over MTA-STS for that host (RFC 8461 §2).
//   - TLS-RPT (RFC 8460): every session attempted under a policy counts as a success or as a failure of an
//     RFC 8460 §4.3 result type, per policy domain and UTC day; the daily reports are written as RFC 8460
//     JSON files, each beside the rua destinations the domain publishes at _smtp._tls.<domain>.
//
// The MTA asks Engine.Hosts once per delivery; answers come from caches, so only the first delivery to a
// domain waits for DNS and HTTPS.
package tlspolicy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// RFC 8460 §4.3 result types Postmill reports.
const (
	ResultSTARTTLSNotSupported    = "starttls-not-supported"
	ResultCertificateHostMismatch = "certificate-host-mismatch"
	ResultCertificateExpired      = "certificate-expired"
	ResultCertificateNotTrusted   = "certificate-not-trusted"
	ResultValidationFailure       = "validation-failure"
	ResultTLSAInvalid             = "tlsa-invalid"
	ResultDNSSECInvalid           = "dnssec-invalid"
	ResultSTSPolicyFetchError     = "sts-policy-fetch-error"
	ResultSTSPolicyInvalid        = "sts-policy-invalid"
	ResultSTSWebPKIInvalid        = "sts-webpki-invalid"
)

// Mode is the transport security one MX host gets.
type Mode uint8

// Modes, weakest first.
const (
	// ModeNone: no policy applies; the MTA's own opportunistic TLS.
	ModeNone Mode = iota
	// ModeSTSTesting: an MTA-STS policy in testing mode. TLS is tried and checked like enforce, failures
	// are reported, and the mail goes as without a policy.
	ModeSTSTesting
	// ModeSTSEnforce: an MTA-STS policy in enforce mode: TLS with a Web PKI certificate valid for the host,
	// or no delivery.
	ModeSTSEnforce
	// ModeDANEEncrypt: the host has authenticated TLSA records but none usable for SMTP: TLS is still
	// required, without authentication (RFC 7672 §2.2: a secure but unusable TLSA RRset calls for
	// mandatory encryption).
	ModeDANEEncrypt
	// ModeDANE: the host has usable, authenticated TLSA records: TLS verified against them, or no delivery.
	ModeDANE
)

// String is the mode's name in pool keys and logs.
func (m Mode) String() string {
	switch m {
	case ModeSTSTesting:
		return "sts-testing"
	case ModeSTSEnforce:
		return "sts-enforce"
	case ModeDANEEncrypt:
		return "dane-encrypt"
	case ModeDANE:
		return "dane"
	}
	return "none"
}

// Config tunes an Engine. Zero fields take the defaults.
type Config struct {
	// DisableSTS and DisableDANE turn a mechanism off (POSTMILL_MTA_TLS_POLICIES).
	DisableSTS  bool
	DisableDANE bool
	// RootCAs are the Web PKI roots for MX certificates under MTA-STS and for policy hosts
	// (POSTMILL_MTA_TLS_ROOTS); nil means the system's.
	RootCAs *x509.CertPool
	// AllowNets exempt policy host addresses from the forbidden-address rule (POSTMILL_MTA_ALLOW_NETS).
	AllowNets []netip.Prefix
	// HTTPSPort is the port policy hosts are fetched from: 443 (RFC 8461 §3.3); tests point it elsewhere.
	HTTPSPort int
	// FetchTimeout bounds one policy fetch, lookup to last byte (default 15 s).
	FetchTimeout time.Duration
	// Recheck is how long a domain's TXT answer (and a host's DANE answer) is trusted before it is asked
	// again (default 5 minutes); a failed lookup is asked again after a tenth of it.
	Recheck time.Duration
	// MaxDomains bounds the policies and MaxHosts the DANE answers kept (defaults 10,000 and 20,000).
	MaxDomains int
	MaxHosts   int
	// ReportDir receives the daily TLS-RPT reports (POSTMILL_DATA_DIR/tlsrpt); "" keeps the counts in
	// memory only.
	ReportDir string
	// Reporter names the sending MTA in report file names (RFC 8460 §5.1), usually the HELO name.
	Reporter string
	// Organization and Contact fill a report's organization-name and contact-info (RFC 8460 §4.4).
	Organization string
	Contact      string
	// Logger receives operational logs; nil discards.
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultRecheck    = 5 * time.Minute
	DefaultMaxDomains = 10000
	DefaultMaxHosts   = 20000
)

// Engine answers Hosts from its caches and keeps the TLS-RPT counts. It is safe for concurrent use.
type Engine struct {
	cfg      Config
	resolver ports.Resolver
	dnssec   ports.DNSSECResolver
	log      *slog.Logger

	policies *lru[*stsEntry]
	mxSecure *lru[timed[bool]]
	hosts    *lru[timed[daneAnswer]]
	flights  flight
	reports  *reports
}

// timed is a cached answer with the time it stops being trusted.
type timed[V any] struct {
	val     V
	expires time.Time
}

// New returns an Engine looking up TXT and address records with resolver and, unless nil (which turns DANE
// off), MX and TLSA records with their AD bit through dnssec.
func New(cfg Config, resolver ports.Resolver, dnssec ports.DNSSECResolver) (*Engine, error) {
	if resolver == nil {
		return nil, errors.New("tlspolicy: a resolver is required")
	}
	if cfg.HTTPSPort < 0 || cfg.HTTPSPort > 65535 {
		return nil, fmt.Errorf("tlspolicy: HTTPS port %d out of range", cfg.HTTPSPort)
	}
	if cfg.HTTPSPort == 0 {
		cfg.HTTPSPort = 443
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = fetchTimeoutDefault
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.MaxDomains <= 0 {
		cfg.MaxDomains = DefaultMaxDomains
	}
	if cfg.MaxHosts <= 0 {
		cfg.MaxHosts = DefaultMaxHosts
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Organization == "" {
		cfg.Organization = "Postmill"
	}
	if cfg.Reporter == "" {
		cfg.Reporter = "postmill"
	}
	if dnssec == nil {
		cfg.DisableDANE = true
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, resolver: resolver, dnssec: dnssec, log: log.With("component", "tlspolicy"),
		policies: newLRU[*stsEntry](cfg.MaxDomains), mxSecure: newLRU[timed[bool]](cfg.MaxDomains),
		hosts: newLRU[timed[daneAnswer]](cfg.MaxHosts)}
	e.reports = newReports(e)
	return e, nil
}

// Host is what delivery to one MX host must meet, as Hosts decided it.
type Host struct {
	Name string
	Mode Mode
	// Refused, when set, says why the host must not be used at all (an MX host outside an enforced
	// MTA-STS policy, a TLSA lookup that failed for a signed zone); it starts with an RFC 3463 status.
	Refused string
	domain  string
	tlsa    []ports.TLSA
	policy  []string // the policy-string for TLS-RPT
	e       *Engine
}

// RequireTLS reports whether the host gets no plaintext session.
func (h *Host) RequireTLS() bool { return h.Mode >= ModeSTSEnforce }

// PoolKey distinguishes the host's sessions from sessions checked under another policy, and from another
// domain's, so that every session counts for one policy domain in TLS-RPT. "" for ModeNone.
func (h *Host) PoolKey() string {
	if h.Mode == ModeNone {
		return ""
	}
	return " " + h.Mode.String() + " " + h.domain
}

// Authenticates reports whether a TLS session that passed Verify authenticated the server (MTA-STS or
// DANE), as opposed to only encrypting (ModeDANEEncrypt).
func (h *Host) Authenticates() bool { return h.Mode != ModeNone && h.Mode != ModeDANEEncrypt }

// Verify checks the server's certificates after a TLS handshake with the host, as its mode requires: the
// TLSA records for ModeDANE, the Web PKI for the MTA-STS modes, nothing for ModeDANEEncrypt. A non-nil
// result is a *Failure.
func (h *Host) Verify(cs tls.ConnectionState) error {
	now := h.e.cfg.Now()
	var f *Failure
	switch h.Mode {
	case ModeDANE:
		f = verifyDANE(cs, h.Name, h.tlsa, now)
	case ModeSTSEnforce, ModeSTSTesting:
		f = verifyWebPKI(cs, h.Name, h.e.cfg.RootCAs, now)
	}
	if f != nil {
		return f
	}
	return nil
}

// Result records one session attempted with the host for TLS-RPT: err nil is a success (for ModeDANEEncrypt
// a tlsa-invalid failure: the session is encrypted but the TLSA records could not authenticate it); a
// *Failure counts under its result type; any other error (a broken handshake) as validation-failure.
func (h *Host) Result(err error) {
	if h.Mode == ModeNone {
		return
	}
	switch f := (*Failure)(nil); {
	case err == nil && h.Mode == ModeDANEEncrypt:
		h.e.reports.add(h, ResultTLSAInvalid, "no usable TLSA record")
	case err == nil:
		h.e.reports.add(h, "", "")
	case errors.As(err, &f):
		h.e.reports.add(h, f.Result, f.Reason)
	default:
		h.e.reports.add(h, ResultValidationFailure, err.Error())
	}
}

// policyType is the policy-type of the host's TLS-RPT policy (RFC 8460 §4.4).
func (h *Host) policyType() string {
	if h.Mode >= ModeDANEEncrypt {
		return "tlsa"
	}
	return "sts"
}

// Hosts returns what delivery of domain's mail must meet at each of hosts (its MX hosts, lower-case,
// without the trailing dot), in the same order. DANE applies to a host when the resolver authenticated the
// domain's MX records and the host's TLSA records; otherwise the domain's MTA-STS policy applies, if any.
func (e *Engine) Hosts(ctx context.Context, domain string, hosts []string) []Host {
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	out := make([]Host, len(hosts))
	var sts *stsPolicy
	if !e.cfg.DisableSTS {
		sts = e.stsFor(ctx, domain)
	}
	secure := !e.cfg.DisableDANE && e.mxAuthenticated(ctx, domain)
	for i, name := range hosts {
		h := Host{Name: name, domain: domain, e: e}
		if secure {
			a := e.dane(ctx, name)
			switch {
			case a.failed != "":
				h.Mode, h.policy = ModeDANE, nil
				h.Refused = "4.7.5 " + a.failed
				h.Result(Fail(ResultDNSSECInvalid, a.failed))
				out[i] = h
				continue
			case len(a.usable) > 0:
				h.Mode, h.tlsa, h.policy = ModeDANE, a.usable, a.text
				out[i] = h
				continue
			case a.present:
				h.Mode, h.policy = ModeDANEEncrypt, a.text
				out[i] = h
				continue
			}
		}
		if sts != nil && sts.mode != stsNone {
			h.Mode, h.policy = ModeSTSTesting, sts.text
			if sts.mode == stsEnforce {
				h.Mode = ModeSTSEnforce
			}
			if !sts.matches(name) {
				reason := fmt.Sprintf("MX host %s does not match the MTA-STS policy of %s", name, domain)
				h.Result(Fail(ResultValidationFailure, reason))
				if h.Mode == ModeSTSEnforce {
					h.Refused = "4.7.5 " + reason // RFC 8461 §4.1: not a valid MX candidate
				}
			}
		}
		out[i] = h
	}
	return out
}

// Run writes the TLS-RPT reports every interval until ctx ends, then once more. It returns the last
// write's error. Without Config.ReportDir it only waits.
func (e *Engine) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return e.Flush(context.WithoutCancel(ctx))
		case <-t.C:
			if err := e.Flush(ctx); err != nil {
				e.log.Warn("writing TLS-RPT reports failed", "error", err)
			}
		}
	}
}

// Flush writes every report that changed since the last write (see reports.flush).
func (e *Engine) Flush(ctx context.Context) error { return e.reports.flush(ctx) }
