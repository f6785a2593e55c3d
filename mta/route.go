package mta

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/postmill/postmill/mta/tlspolicy"
	"github.com/postmill/postmill/ports"
	"github.com/postmill/postmill/ports/netguard"
)

// nullMXReply is the outcome for a domain that publishes a null MX: RFC 7505 §4.2 says such mail is
// refused at once, with this reply code and enhanced status code (§4.3 defines X.1.10).
const nullMXReply = "556 5.1.10 Recipient address has null MX"

// destination is one host to deliver to: an MX host, the domain itself (implicit MX), or the relay.
type destination struct {
	host  string       // the name presented to TLS (SNI, certificate check) and logged
	port  int          //
	addrs []netip.Addr // known addresses, already checked; nil = look host up (and check) when dialing
	relay bool
	// requireTLS refuses a session without TLS: no plaintext fallback after a failed STARTTLS.
	requireTLS bool
	// sec is the MTA-STS or DANE policy of this host for the recipient domain (security.go); nil: none.
	sec *tlspolicy.Host
}

// key names the destination's connection pool. Sessions that must be under TLS have a pool of their own,
// so a session that fell back to plaintext for one recipient domain is never reused for a domain that
// requires TLS.
func (d destination) key() string {
	k := net.JoinHostPort(d.host, strconv.Itoa(d.port))
	if d.requireTLS {
		k += " tls"
	}
	if d.sec != nil {
		k += d.sec.PoolKey()
	}
	return k
}

// forbiddenRouteCode is the enhanced status (RFC 3463 X.4.4, unable to route) of a recipient domain whose
// MX hosts have only forbidden addresses: a permanent failure, since no retry changes where they point
// without the domain's owner changing its DNS.
const forbiddenRouteCode = "5.4.4"

// permitted returns the addresses of host that the forbidden-address rule (ports/netguard, exempting
// Config.AllowNets) lets the MTA connect to, and the first refused one with why, for the outcome when none
// is left. A tenant chooses its recipient domains, and with them the MX records the MTA follows: without
// this a domain whose MX points at 10.0.0.5 or 169.254.169.254 would have the MTA speak SMTP inside
// Postmill's own network.
func (m *MTA) permitted(host string, addrs []netip.Addr) (ok []netip.Addr, refused string) {
	ok = make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if why, bad := netguard.Forbidden(a, m.cfg.AllowNets); bad {
			if refused == "" {
				refused = fmt.Sprintf("%s is %s", a, why)
			}
			m.metrics.forbidden.Inc()
			m.log.Warn("refusing a forbidden MX address", "host", host, "addr", a.String(), "reason", why)
			continue
		}
		ok = append(ok, a.Unmap().WithZone(""))
	}
	return ok, refused
}

// routeError is a routing decision that ends the attempt before any connection.
type routeError struct {
	kind     ports.DeliveryOutcomeKind
	response string
}

func (e *routeError) Error() string { return e.response }

// routeHosts returns where mail for domain goes, in the order to try, before any MTA-STS or DANE policy
// (route, in security.go, applies those). Mail for the simulator's domain
// (Config.SimulatorDomain) goes to the simulator's address, before the relay and without DNS. With a
// relay, always the relay.
// Otherwise RFC 5321 §5.1: the MX records sorted by preference, equal preferences in random order; no MX
// records (the name has no MX data, or does not exist) → the domain itself as an implicit MX of
// preference 0, which must have an A or AAAA record outside the forbidden ranges (failed when every one is
// forbidden); a null MX (RFC 7505) → bounced; a DNS failure that may pass → deferred. Successful answers
// are reused for routeCacheTTL. Every destination requires TLS when Config.RequireTLS or Deps.TLSPolicy
// says so for domain.
func (m *MTA) routeHosts(ctx context.Context, domain string) ([]destination, *routeError) {
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	if d, ok := m.simulatorRoute(domain); ok {
		return []destination{d}, nil
	}
	requireTLS := m.cfg.RequireTLS || (m.deps.TLSPolicy != nil && m.deps.TLSPolicy.RequireTLS(ctx, domain))
	if m.relay != nil {
		d := *m.relay
		d.requireTLS = requireTLS
		return []destination{d}, nil
	}
	now := m.now()
	mxs, addrs, cached := m.routes.get(domain, now)
	if cached && len(mxs) == 0 {
		return []destination{{host: domain, port: m.cfg.Port, addrs: addrs, requireTLS: requireTLS}}, nil
	}
	var err error
	if !cached {
		mxs, err = m.deps.Resolver.LookupMX(ctx, domain)
	}
	switch kind := dnsKind(err); {
	case err == nil && len(mxs) > 0:
		if !cached {
			m.routes.put(domain, routeAnswer{mxs: mxs}, now)
		}
	case err == nil || kind == ports.DNSNoData || kind == ports.DNSNotFound:
		addrs, err := m.deps.Resolver.LookupIP(ctx, domain)
		switch kind := dnsKind(err); {
		case err == nil && len(addrs) > 0:
			ok, refused := m.permitted(domain, addrs)
			if len(ok) == 0 {
				return nil, &routeError{ports.OutcomeFailed, fmt.Sprintf("%s recipient domain %s has no MX and only forbidden addresses (%s)",
					forbiddenRouteCode, domain, refused)}
			}
			m.routes.put(domain, routeAnswer{addrs: ok}, now)
			return []destination{{host: domain, port: m.cfg.Port, addrs: ok, requireTLS: requireTLS}}, nil
		case err == nil || kind == ports.DNSNoData || kind == ports.DNSNotFound:
			return nil, &routeError{ports.OutcomeFailed, fmt.Sprintf("5.1.2 recipient domain %s has no MX and no address records", domain)}
		default:
			return nil, &routeError{ports.OutcomeDeferred, fmt.Sprintf("4.4.3 DNS lookup of %s failed: %v", domain, err)}
		}
	default:
		return nil, &routeError{ports.OutcomeDeferred, fmt.Sprintf("4.4.3 MX lookup of %s failed: %v", domain, err)}
	}

	if len(mxs) == 1 && strings.Trim(mxs[0].Host, ".") == "" {
		return nil, &routeError{ports.OutcomeBounced, nullMXReply}
	}
	mxs = slices.Clone(mxs)
	rand.Shuffle(len(mxs), func(i, j int) { mxs[i], mxs[j] = mxs[j], mxs[i] })
	slices.SortStableFunc(mxs, func(a, b ports.MX) int { return int(a.Preference) - int(b.Preference) })
	dests := make([]destination, 0, len(mxs))
	for _, mx := range mxs {
		host := strings.TrimSuffix(strings.ToLower(mx.Host), ".")
		if host == "" { // a null MX among real ones is meaningless (RFC 7505 §3): skip it
			continue
		}
		dests = append(dests, destination{host: host, port: m.cfg.Port, requireTLS: requireTLS})
	}
	if len(dests) == 0 {
		return nil, &routeError{ports.OutcomeBounced, nullMXReply}
	}
	return dests[:min(len(dests), maxMXHosts)], nil
}

// Bounds of one delivery attempt, whatever a recipient domain publishes. RFC 5321 §5.1 asks a client to
// try more than one address and to limit how many.
const (
	// maxMXHosts is how many MX hosts an attempt considers, the most preferred first: their TLS policies
	// (MTA-STS, DANE's TLSA records) are looked up for these alone, and their addresses as far as the
	// attempt gets. Large providers publish five or fewer.
	maxMXHosts = 10
	// maxAddressesPerAttempt is how many connections one attempt opens across all those hosts (Postfix's
	// smtp_mx_address_limit default); after that the attempt is deferred with the last failure and
	// retried on the job's schedule.
	maxAddressesPerAttempt = 5
)

// simulatorRoute is the destination of the simulator's domain: the simulator's loopback address, set as
// the destination's only address, so it is neither looked up nor checked against the forbidden-address
// rule (that exemption covers exactly this address, which Validate holds to loopback). The session never
// requires TLS: the simulator offers none, and nothing it carries crosses a network.
func (m *MTA) simulatorRoute(domain string) (destination, bool) {
	if !m.cfg.SimulatorAddr.IsValid() || domain != strings.TrimSuffix(strings.ToLower(m.cfg.SimulatorDomain), ".") {
		return destination{}, false
	}
	a := m.cfg.SimulatorAddr
	return destination{host: domain, port: int(a.Port()), addrs: []netip.Addr{a.Addr().Unmap()}}, true
}

// Bounds of routeCache.
const (
	// routeCacheTTL is how long a recipient domain's MX answer is reused. Answers carry no TTL through
	// ports.Resolver, so this is short next to usual MX TTLs (an hour or more): a changed MX is followed
	// within seconds, and a domain receiving many messages costs one lookup per interval, not one per job.
	routeCacheTTL = 30 * time.Second
	// maxCachedRoutes bounds the domains remembered; past it the cache starts over.
	maxCachedRoutes = 10000
)

// routeCache keeps recent successful MX (or implicit-MX address) answers per recipient domain. Failures
// are never kept: a domain whose lookup failed is asked again on its next job.
type routeCache struct {
	mu      sync.Mutex
	answers map[string]routeAnswer
}

// routeAnswer is either the MX records of a domain or, when it has none, its addresses (RFC 5321 §5.1
// implicit MX).
type routeAnswer struct {
	mxs     []ports.MX
	addrs   []netip.Addr
	expires time.Time
}

// get returns the answer kept for domain, if it has not expired at now.
func (c *routeCache) get(domain string, now time.Time) ([]ports.MX, []netip.Addr, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.answers[domain]
	if !ok || !now.Before(a.expires) {
		return nil, nil, false
	}
	return a.mxs, a.addrs, true
}

// put keeps a for routeCacheTTL from now. The slices are kept as given: route never modifies them.
func (c *routeCache) put(domain string, a routeAnswer, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answers == nil || len(c.answers) >= maxCachedRoutes {
		c.answers = make(map[string]routeAnswer)
	}
	a.expires = now.Add(routeCacheTTL)
	c.answers[domain] = a
}

// relayDestination parses Config.Relay.
func relayDestination(relay string) (*destination, error) {
	host, p, err := net.SplitHostPort(relay)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, err
	}
	d := &destination{host: strings.ToLower(host), port: port, relay: true}
	if ip, err := netip.ParseAddr(host); err == nil {
		d.addrs = []netip.Addr{ip.Unmap()}
	}
	return d, nil
}

// addresses returns the addresses to connect to for d: its known ones, or the answer to a lookup of its
// host without the forbidden addresses (the relay's are trusted). The caller dials exactly these, so
// nothing is resolved twice between the check and the connection.
func (m *MTA) addresses(ctx context.Context, d destination) ([]netip.Addr, error) {
	if d.addrs != nil {
		return d.addrs, nil
	}
	addrs, err := m.deps.Resolver.LookupIP(ctx, d.host)
	if err != nil {
		return nil, &dialError{response: fmt.Sprintf("4.4.3 address lookup of %s failed: %v", d.host, err)}
	}
	if len(addrs) == 0 {
		return nil, &dialError{response: fmt.Sprintf("4.4.3 %s has no address", d.host)}
	}
	if d.relay {
		return addrs, nil
	}
	ok, refused := m.permitted(d.host, addrs)
	if len(ok) == 0 {
		return nil, &dialError{response: fmt.Sprintf("%s MX host %s has only forbidden addresses (%s)", forbiddenRouteCode, d.host, refused), forbidden: true}
	}
	return ok, nil
}

func dnsKind(err error) ports.DNSErrorKind {
	var de *ports.DNSError
	if errors.As(err, &de) {
		return de.Kind
	}
	return ""
}
