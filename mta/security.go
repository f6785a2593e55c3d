package mta

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"strings"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/mta/tlspolicy"
	"github.com/postmill/postmill/ports"
)

// TransportPolicy decides the transport security of each MX host of a recipient domain: MTA-STS (RFC
// 8461) and DANE (RFC 7672), with every session under them counted for TLS-RPT (RFC 8460).
// tlspolicy.Engine implements it.
type TransportPolicy interface {
	// Hosts returns one tlspolicy.Host per host (the domain's MX hosts in the order they are tried,
	// lower-case, without the trailing dot), in the same order. It is called once per delivery and should
	// answer from a cache.
	Hosts(ctx context.Context, domain string, hosts []string) []tlspolicy.Host
}

var _ TransportPolicy = (*tlspolicy.Engine)(nil)

// The TLS a mail transaction went over, as the timeline and postmill_mta_tls_total name it.
const (
	tlsNone          = "none"          // plaintext
	tlsOpportunistic = "opportunistic" // encrypted, the server not authenticated
	tlsVerified      = "verified"      // the certificate checked under the Web PKI (MTA-STS, or the default check)
	tlsDANE          = "dane"          // the certificate checked against DANE TLSA records
)

// errNoSTARTTLS is what a host under a policy that does not offer STARTTLS counts as in TLS-RPT.
var errNoSTARTTLS = tlspolicy.Fail(tlspolicy.ResultSTARTTLSNotSupported, "the server does not offer STARTTLS")

// route returns where mail for domain goes (routeHosts) with each MX host's MTA-STS or DANE policy
// (Deps.Transport) attached. A host a policy refuses (an MX outside an enforced MTA-STS policy, a failed
// TLSA lookup in a signed zone) is left out; when that leaves none, the delivery is deferred with the
// reason (RFC 8461 §5.1: a policy failure is temporary), and retried until the message's age runs out. A
// host whose policy requires TLS gets no plaintext session. The relay and the simulator carry no policy:
// they are not the recipient domain's MX hosts.
func (m *MTA) route(ctx context.Context, domain string) ([]destination, *routeError) {
	dests, rerr := m.routeHosts(ctx, domain)
	if rerr != nil || m.deps.Transport == nil || len(dests) == 0 || dests[0].relay {
		return dests, rerr
	}
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	if _, simulated := m.simulatorRoute(domain); simulated {
		return dests, nil
	}
	names := make([]string, len(dests))
	for i, d := range dests {
		names[i] = d.host
	}
	hosts := m.deps.Transport.Hosts(ctx, domain, names)
	if len(hosts) != len(dests) {
		return dests, nil
	}
	kept := make([]destination, 0, len(dests))
	refused := ""
	for i, d := range dests {
		h := &hosts[i]
		if h.Refused != "" {
			refused = cmp.Or(refused, h.Refused)
			m.log.Warn("MX host refused by the domain's transport security policy", "domain", domain, "host", d.host, "reason", h.Refused)
			continue
		}
		if h.Mode != tlspolicy.ModeNone {
			d.sec = h
			d.requireTLS = d.requireTLS || h.RequireTLS()
		}
		kept = append(kept, d)
	}
	if len(kept) == 0 {
		return nil, &routeError{ports.OutcomeDeferred, refused}
	}
	return kept, nil
}

// tlsConfig returns the STARTTLS configuration for d. Under a policy the certificate is checked by the
// policy (the TLSA records for DANE, the Web PKI for MTA-STS, nothing beyond encryption for a host whose
// TLSA records are all unusable) instead of by the default check; without one, Config.tlsConfig's.
func (m *MTA) tlsConfig(d destination) *tls.Config {
	t := m.cfg.tlsConfig(d.host)
	if d.sec == nil {
		return t
	}
	t.InsecureSkipVerify = true // replaced by VerifyConnection, which always runs
	t.VerifyConnection = d.sec.Verify
	return t
}

// tlsAttempt counts one attempt to bring a session with d under TLS for the TLS-RPT report of d's policy
// domain: err nil is a success; a refused STARTTLS and a server without it are starttls-not-supported; a
// failed certificate check counts under its own result type.
func (m *MTA) tlsAttempt(d destination, err error) {
	if d.sec == nil {
		return
	}
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		err = tlspolicy.Fail(tlspolicy.ResultSTARTTLSNotSupported, "STARTTLS refused: "+tlsFailure(se))
	}
	d.sec.Result(err)
	if err != nil {
		m.log.Warn("transport security check failed", "host", d.host, "policy", d.sec.Mode.String(), "error", err)
	}
}

// tlsNote is what the outcome of a transaction over s says about its TLS, and it counts the transaction
// in postmill_mta_tls_total: "(tls: verified)" and the like for a session under TLS, the reason for a
// downgrade to plaintext, nothing for a server that offered no STARTTLS.
func (m *MTA) tlsNote(d destination, s *session) string {
	mode := tlsMode(d, s)
	m.metrics.tls.WithLabelValues(mode).Inc()
	switch {
	case s.downgrade != "":
		return " (sent without TLS: " + cleanText(s.downgrade, maxNote) + ")"
	case mode == tlsNone:
		return ""
	}
	return " (tls: " + mode + ")"
}

// tlsMode names the TLS of s, opened for d. Sessions are pooled per policy (destination.key), so d's
// policy is the one s was checked under.
func tlsMode(d destination, s *session) string {
	if !s.tls {
		return tlsNone
	}
	if d.sec != nil {
		switch {
		case d.sec.Mode == tlspolicy.ModeDANE:
			return tlsDANE
		case d.sec.Authenticates():
			return tlsVerified
		}
		return tlsOpportunistic
	}
	if c, ok := s.conn.(interface{ ConnectionState() tls.ConnectionState }); ok && len(c.ConnectionState().VerifiedChains) > 0 {
		return tlsVerified
	}
	return tlsOpportunistic
}
