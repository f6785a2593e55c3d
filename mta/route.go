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

	"github.com/postmill/postmill/ports"
)

// nullMXReply is the outcome for a domain that publishes a null MX: RFC 7505 §4.2 says such mail is
// refused at once, with this reply code and enhanced status code (§4.3 defines X.1.10).
const nullMXReply = "556 5.1.10 Recipient address has null MX"

// destination is one host to deliver to: an MX host, the domain itself (implicit MX), or the relay.
type destination struct {
	host  string       // the name presented to TLS (SNI, certificate check) and logged
	port  int          //
	addrs []netip.Addr // known addresses; nil = look host up when dialing
	relay bool
}

// key names the destination's connection pool.
func (d destination) key() string { return net.JoinHostPort(d.host, strconv.Itoa(d.port)) }

// routeError is a routing decision that ends the attempt before any connection.
type routeError struct {
	kind     ports.DeliveryOutcomeKind
	response string
}

func (e *routeError) Error() string { return e.response }

// route returns where mail for domain goes, in the order to try. With a relay, always the relay.
// Otherwise RFC 5321 §5.1: the MX records sorted by preference, equal preferences in random order; no MX
// records (the name has no MX data, or does not exist) → the domain itself as an implicit MX of
// preference 0, which must have an A or AAAA record; a null MX (RFC 7505) → bounced; a DNS failure that
// may pass → deferred. Successful answers are reused for routeCacheTTL.
func (m *MTA) route(ctx context.Context, domain string) ([]destination, *routeError) {
	if m.relay != nil {
		return []destination{*m.relay}, nil
	}
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	now := m.now()
	mxs, addrs, cached := m.routes.get(domain, now)
	if cached && len(mxs) == 0 {
		return []destination{{host: domain, port: m.cfg.Port, addrs: addrs}}, nil
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
			m.routes.put(domain, routeAnswer{addrs: addrs}, now)
			return []destination{{host: domain, port: m.cfg.Port, addrs: addrs}}, nil
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
		dests = append(dests, destination{host: host, port: m.cfg.Port})
	}
	if len(dests) == 0 {
		return nil, &routeError{ports.OutcomeBounced, nullMXReply}
	}
	return dests, nil
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

// addresses returns the addresses to connect to for d.
func (m *MTA) addresses(ctx context.Context, d destination) ([]netip.Addr, error) {
	if d.addrs != nil {
		return d.addrs, nil
	}
	addrs, err := m.deps.Resolver.LookupIP(ctx, d.host)
	if err != nil {
		return nil, fmt.Errorf("4.4.3 address lookup of %s failed: %w", d.host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("4.4.3 %s has no address", d.host)
	}
	return addrs, nil
}

func dnsKind(err error) ports.DNSErrorKind {
	var de *ports.DNSError
	if errors.As(err, &de) {
		return de.Kind
	}
	return ""
}
