// Package webhook posts webhook requests to customer endpoints through the SSRF guard of SPEC §6, so that
// a customer-supplied URL can never make Postmill reach its own network: loopback, private and link-local
// ranges (the cloud metadata service among them), and the IPv6 spellings of those.
//
// Before every attempt the URL's host is resolved through ports.Resolver (POSTMILL_DNS_RESOLVER), every A
// and AAAA answer is checked with Forbidden, and the connection is made to a checked address itself: the
// dialer never sees a name, so there is no second lookup for DNS rebinding to answer differently. Host
// header and TLS server name stay the URL's host. Redirects are not followed, proxies from the environment
// are not used (a proxy would connect to the name on our behalf), and the response body is drained up to a
// small cap and ignored (SPEC §6: any 2xx is success).
package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
	"github.com/postmill/postmill/ports/netguard"
)

// DefaultTimeout bounds one attempt, lookup to last body byte: SPEC §6 leaves the value open and the
// retry schedule counts a timeout as a failure, so ten seconds is long enough for a slow receiver and short
// enough that a dead one holds a dispatcher slot briefly.
const DefaultTimeout = 10 * time.Second

// DefaultMaxIdleConnsPerHost keeps enough warm connections per receiver address for the dispatcher's
// per-endpoint concurrency (16) several times over, so a busy endpoint does not reconnect per delivery.
const DefaultMaxIdleConnsPerHost = 64

// maxDrain is how much of a response body is read before closing it. The body is ignored (SPEC §6); reading
// a small one to the end lets the connection be reused, and the cap stops a receiver from making us read
// forever.
const maxDrain = 64 << 10

// maxHeaderBytes caps response headers, which are ignored too.
const maxHeaderBytes = 64 << 10

// idleTimeout closes idle connections, and drops the per-address pool that held them once nothing used it
// for as long.
const idleTimeout = 90 * time.Second

// Config tunes a Sender. The zero value means the defaults.
type Config struct {
	// AllowNets are prefixes exempt from the guard (POSTMILL_WEBHOOK_ALLOW_NETS), for receivers on a
	// private network the operator trusts. Default empty.
	AllowNets []netip.Prefix
	// Timeout bounds one attempt including the DNS lookup (default DefaultTimeout).
	Timeout time.Duration
	// MaxIdleConnsPerHost bounds the idle connections kept per receiver address (default
	// DefaultMaxIdleConnsPerHost).
	MaxIdleConnsPerHost int
	// TLSClientConfig is the base TLS configuration, for deployments whose receivers use a private CA; nil
	// means the system roots. ServerName is always replaced by the URL's host.
	TLSClientConfig *tls.Config
}

// Validate reports a Config that New cannot use.
func (c Config) Validate() error {
	if c.Timeout < 0 {
		return fmt.Errorf("webhook: negative timeout %s", c.Timeout)
	}
	if c.MaxIdleConnsPerHost < 0 {
		return fmt.Errorf("webhook: negative MaxIdleConnsPerHost %d", c.MaxIdleConnsPerHost)
	}
	for _, p := range c.AllowNets {
		if !p.IsValid() {
			return fmt.Errorf("webhook: invalid allow prefix %v", p)
		}
	}
	return nil
}

// ParseAllowNets reads POSTMILL_WEBHOOK_ALLOW_NETS: CIDRs separated by commas or spaces; a bare address
// means just that address. Host bits are cleared (10.1.2.3/8 is 10.0.0.0/8).
func ParseAllowNets(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("webhook: allow net %q: %w", f, err)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("webhook: allow net %q: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Sender implements ports.WebhookSender. It is safe for concurrent use.
//
// Connections are pooled per (URL host, checked address): each pool's dialer can only ever reach its one
// address, and an attempt only uses pools of addresses it checked itself, so an idle connection made for an
// earlier attempt cannot carry a request to an address this attempt's lookup did not return. Two names on
// one address do not share connections either, so a TLS session verified for one name never serves another.
type Sender struct {
	cfg      Config
	resolver ports.Resolver
	dialer   net.Dialer
	tlsBase  *tls.Config

	mu    sync.Mutex
	pools map[poolKey]*pool
	swept time.Time
}

var _ ports.WebhookSender = (*Sender)(nil)

type poolKey struct {
	host string         // the URL's host name (or literal): Host header and TLS server name
	addr netip.AddrPort // the checked address, the only one the pool dials
}

type pool struct {
	client    *http.Client
	transport *http.Transport
	inflight  int
	lastUsed  time.Time
}

// New returns a Sender that resolves hosts with resolver. Errors: an invalid Config or a nil resolver.
func New(cfg Config, resolver ports.Resolver) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if resolver == nil {
		return nil, errors.New("webhook: nil resolver")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxIdleConnsPerHost == 0 {
		cfg.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	cfg.AllowNets = append([]netip.Prefix(nil), cfg.AllowNets...)
	for i, p := range cfg.AllowNets {
		cfg.AllowNets[i] = p.Masked()
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLSClientConfig != nil {
		base = cfg.TLSClientConfig.Clone()
	}
	return &Sender{
		cfg:      cfg,
		resolver: resolver,
		dialer:   net.Dialer{KeepAlive: 30 * time.Second},
		tlsBase:  base,
		pools:    map[poolKey]*pool{},
	}, nil
}

// Send makes one attempt: guard, then POST. A refusal is a response with Blocked set and no connection
// made; a temporary DNS failure, a connection failure, a timeout or a broken response is an error (a failed
// attempt, retried later); otherwise the response's status code, 3xx included since redirects are not
// followed.
func (s *Sender) Send(ctx context.Context, req ports.WebhookRequest) (ports.WebhookResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	u, host, port, reason := parseTarget(req.URL)
	if reason != "" {
		return blocked(reason), nil
	}
	addrs, reason, err := s.resolve(ctx, host)
	if err != nil {
		return ports.WebhookResponse{}, err
	}
	if reason != "" {
		return blocked(reason), nil
	}
	// Every answer is checked before any connection: one forbidden address blocks the URL, whatever the
	// others are, so a receiver cannot smuggle an internal address behind a public one.
	checked := make([]netip.AddrPort, 0, len(addrs))
	for _, a := range addrs {
		if what, bad := netguard.Explain(a, s.cfg.AllowNets); bad {
			return blocked(refusal(host, a, what)), nil
		}
		ap := netip.AddrPortFrom(a.Unmap().WithZone(""), port)
		if !containsAddrPort(checked, ap) {
			checked = append(checked, ap)
		}
	}

	var errs []error
	for _, ap := range checked {
		code, err := s.post(ctx, poolKey{host: host, addr: ap}, u, req)
		if err == nil {
			return ports.WebhookResponse{StatusCode: code}, nil
		}
		errs = append(errs, err)
		// Only a refused or unreachable address moves on to the next one: once a connection was made the
		// request may have been delivered, and sending it again elsewhere is the retry schedule's call.
		var de *dialError
		if !errors.As(err, &de) || ctx.Err() != nil {
			break
		}
	}
	return ports.WebhookResponse{}, fmt.Errorf("webhook: post %s: %w", u.Redacted(), errors.Join(errs...))
}

// CloseIdleConnections closes every idle connection and forgets the pools, as at shutdown.
func (s *Sender) CloseIdleConnections() {
	s.mu.Lock()
	pools := s.pools
	s.pools = map[poolKey]*pool{}
	s.mu.Unlock()
	for _, p := range pools {
		p.transport.CloseIdleConnections()
	}
}

func blocked(reason string) ports.WebhookResponse {
	return ports.WebhookResponse{Blocked: true, Reason: reason}
}

// AllowNetsVariable is the setting that exempts prefixes from the guard; a refusal names it, so whoever
// reads a blocked delivery learns how an operator lets a trusted private receiver through.
const AllowNetsVariable = "POSTMILL_WEBHOOK_ALLOW_NETS"

// refusal words a forbidden address for the endpoint's owner: which address (and which name resolved to
// it), which rule refused it, and the setting that would allow it, such as "hooks.example.com resolves to
// 10.0.0.5, a private address (10.0.0.0/8, RFC 1918); an operator can allow it with
// POSTMILL_WEBHOOK_ALLOW_NETS=10.0.0.5".
func refusal(host string, addr netip.Addr, what string) string {
	addr = addr.WithZone("")
	subject := addr.String() + " is " + what
	if lit, err := netip.ParseAddr(host); err != nil || lit.WithZone("") != addr {
		subject = host + " resolves to " + addr.String() + ", " + what
	}
	return subject + "; an operator can allow it with " + AllowNetsVariable + "=" + addr.String()
}

// parseTarget checks the URL's form: http or https (SPEC §6), a host, a port that fits 16 bits. A URL that
// fails here can never succeed, so the reason makes the attempt blocked rather than retried.
func parseTarget(raw string) (u *url.URL, host string, port uint16, reason string) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", 0, "invalid URL"
	}
	var def uint16
	switch strings.ToLower(u.Scheme) {
	case "http":
		def = 80
	case "https":
		def = 443
	default:
		return nil, "", 0, fmt.Sprintf("scheme %q is not http or https", u.Scheme)
	}
	host = u.Hostname()
	if host == "" {
		return nil, "", 0, "invalid URL: no host"
	}
	port = def
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return nil, "", 0, fmt.Sprintf("invalid URL: port %q", p)
		}
		port = uint16(n)
	}
	return u, host, port, ""
}

// resolve returns host's addresses: an IP literal as is, a name through the resolver. No address at all
// (NXDOMAIN, NODATA, an empty answer) is a refusal (SPEC §6); a temporary failure is an error, so the
// attempt is retried.
func (s *Sender) resolve(ctx context.Context, host string) ([]netip.Addr, string, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, "", nil
	}
	addrs, err := s.resolver.LookupIP(ctx, host)
	if err != nil {
		if de, ok := errors.AsType[*ports.DNSError](err); ok && (de.Kind == ports.DNSNotFound || de.Kind == ports.DNSNoData) {
			return nil, fmt.Sprintf("no address for %s: %s", host, de.Kind), nil
		}
		return nil, "", fmt.Errorf("webhook: resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Sprintf("no address for %s", host), nil
	}
	return addrs, "", nil
}

// post sends the request through the pool that can only reach key.addr and returns the status code.
func (s *Sender) post(ctx context.Context, key poolKey, u *url.URL, req ports.WebhookRequest) (int, error) {
	p := s.acquire(key)
	defer s.release(p)

	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return 0, err
	}
	for k, v := range req.Headers {
		hr.Header.Set(k, v)
	}
	resp, err := p.client.Do(hr)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func (s *Sender) acquire(key poolKey) *pool {
	s.mu.Lock()
	now := time.Now()
	var stale []*pool
	if now.Sub(s.swept) > idleTimeout {
		s.swept = now
		for k, p := range s.pools {
			if p.inflight == 0 && now.Sub(p.lastUsed) > idleTimeout {
				delete(s.pools, k)
				stale = append(stale, p)
			}
		}
	}
	p := s.pools[key]
	if p == nil {
		p = s.newPool(key)
		s.pools[key] = p
	}
	p.inflight++
	s.mu.Unlock()
	for _, p := range stale {
		p.transport.CloseIdleConnections()
	}
	return p
}

func (s *Sender) release(p *pool) {
	s.mu.Lock()
	p.inflight--
	p.lastUsed = time.Now()
	s.mu.Unlock()
}

// newPool builds the transport for one (host, checked address). Its DialContext ignores the address the
// transport asks for (the URL's host:port) and dials key.addr, a literal, so no name is ever resolved
// below this point.
func (s *Sender) newPool(key poolKey) *pool {
	tlsConf := s.tlsBase.Clone()
	tlsConf.ServerName = key.host // SNI and certificate verification use the URL's host, not the address
	target := key.addr.String()
	t := &http.Transport{
		Proxy: nil, // a proxy would resolve and connect to the name itself
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := s.dialer.DialContext(ctx, "tcp", target)
			if err != nil {
				return nil, &dialError{addr: key.addr, err: err}
			}
			return c, nil
		},
		TLSClientConfig:        tlsConf,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           s.cfg.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:    s.cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        idleTimeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
		DisableCompression:     true, // the body is ignored
	}
	return &pool{
		transport: t,
		client: &http.Client{
			Transport: t,
			// SPEC §6: a redirect is not followed; its 3xx is the (non-2xx) answer. Following it would also
			// connect to a host that was never checked.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		lastUsed: time.Now(),
	}
}

// dialError marks a failure to connect to one checked address, after which the next one is tried.
type dialError struct {
	addr netip.AddrPort
	err  error
}

func (e *dialError) Error() string { return "connect " + e.addr.String() + ": " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func containsAddrPort(list []netip.AddrPort, ap netip.AddrPort) bool {
	for _, x := range list {
		if x == ap {
			return true
		}
	}
	return false
}
