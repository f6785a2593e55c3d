package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/postmill/postmill/ports"
)

// Defaults of AuthorityConfig.
const (
	// DefaultAuthorityCacheTTL is how long the records read for a name are reused. A domain created on the
	// instance is published within this time; a verify right after the creation is never answered from
	// an older read, because nothing asked about the name before it existed, and misses are kept only
	// for DefaultAuthorityMissTTL.
	DefaultAuthorityCacheTTL = 2 * time.Second
	// DefaultAuthorityMissTTL is how long "no such domain here" is reused.
	DefaultAuthorityMissTTL = 500 * time.Millisecond
	// authorityAnswerTTL is the TTL of every record served. Records of the instance change when domains
	// are created, so a client that caches (a browser, a recursive resolver someone put in front) should
	// not keep them long; the negative TTL of the SOA is shorter still (RFC 2308 §5).
	authorityAnswerTTL = 60
	authorityNegTTL    = 5
	// authorityStoreTimeout bounds one read of the store for a query; the client retries after SERVFAIL.
	authorityStoreTimeout = 2 * time.Second
	// maxAuthorityCache bounds the names whose reads are kept; past it the cache starts over.
	maxAuthorityCache = 4096
	// forwardTimeout bounds one forwarded question.
	forwardTimeout = 3 * time.Second
)

// AuthorityConfig configures local mode's DNS server.
type AuthorityConfig struct {
	// Addr is the host:port the server listens on, over UDP and TCP on the same port; port 0 picks one
	// free for both.
	Addr string
	// Domains reads the records of the instance's sending domains (required).
	Domains ports.LocalDNSStore
	// MailHost is the host every MX answer names, for any domain (the instance's and everyone else's),
	// unless a published domain carries MX records of its own; MailAddr is its address, served as its A
	// or AAAA record. This is how local mode makes the MTA deliver every message to the mail catcher.
	// An empty MailHost answers MX only for names the server is authoritative for.
	MailHost string
	MailAddr netip.Addr
	// Upstream is a host:port that questions about other names are forwarded to (the system's name
	// server, so webhooks to real hosts still resolve); "" refuses them.
	Upstream string
	// CacheTTL and MissTTL bound how long a read of the store is reused (defaults above).
	CacheTTL time.Duration
	MissTTL  time.Duration
	// Logger receives store failures; nil discards them.
	Logger *slog.Logger
}

// Authority is local mode's authoritative DNS server: it publishes the five records of every sending
// domain created on this instance (read from the store when asked, with a short cache, so a domain
// created a moment ago is already published), answers every MX question with the mail catcher, and
// forwards the rest. It exists so that domain verification and MX routing run their real code against
// real DNS answers on a machine where nobody can publish records.
type Authority struct {
	cfg     AuthorityConfig
	log     *slog.Logger
	servers []*mdns.Server
	addr    string
	udp     *mdns.Client
	tcp     *mdns.Client

	mu    sync.Mutex
	cache map[string]zoneRead
}

// zoneRead is what the store said about the names of one question.
type zoneRead struct {
	domains []ports.PublishedDomain
	expires time.Time
}

// NewAuthority checks cfg; Start then binds and serves.
func NewAuthority(cfg AuthorityConfig) (*Authority, error) {
	if cfg.Domains == nil {
		return nil, errors.New("dns authority: a LocalDNSStore is required")
	}
	if cfg.Addr == "" {
		return nil, errors.New("dns authority: no listen address")
	}
	if cfg.MailHost != "" {
		if _, ok := mdns.IsDomainName(cfg.MailHost); !ok || !cfg.MailAddr.IsValid() {
			return nil, fmt.Errorf("dns authority: mail host %q needs a valid name and address", cfg.MailHost)
		}
		cfg.MailHost = canonical(cfg.MailHost)
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = DefaultAuthorityCacheTTL
	}
	if cfg.MissTTL <= 0 {
		cfg.MissTTL = DefaultAuthorityMissTTL
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Authority{
		cfg:   cfg,
		log:   log.With(slog.String("service", "local-dns")),
		udp:   &mdns.Client{Net: "udp", Timeout: forwardTimeout, UDPSize: ednsUDPSize},
		tcp:   &mdns.Client{Net: "tcp", Timeout: forwardTimeout},
		cache: map[string]zoneRead{},
	}, nil
}

// Start binds UDP and TCP on one port and serves both until Shutdown. It returns the bound host:port.
func (a *Authority) Start() (string, error) {
	pc, ln, err := listenBoth(a.cfg.Addr)
	if err != nil {
		return "", fmt.Errorf("dns authority: %w", err)
	}
	a.addr = pc.LocalAddr().String()
	if a.cfg.Upstream != "" && withPort(a.cfg.Upstream) == a.addr {
		a.cfg.Upstream = "" // asking ourselves would loop
	}
	handler := mdns.HandlerFunc(a.serve)
	a.servers = []*mdns.Server{{PacketConn: pc, Handler: handler}, {Listener: ln, Handler: handler}}
	for _, srv := range a.servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		errc := make(chan error, 1)
		go func() { errc <- srv.ActivateAndServe() }()
		select {
		case <-started:
		case err := <-errc:
			_ = a.Shutdown(context.Background())
			return "", fmt.Errorf("dns authority: serve: %w", err)
		}
	}
	return a.addr, nil
}

// Addr is the bound host:port after Start.
func (a *Authority) Addr() string { return a.addr }

// Shutdown stops both listeners.
func (a *Authority) Shutdown(ctx context.Context) error {
	var errs []error
	for _, srv := range a.servers {
		if err := srv.ShutdownContext(ctx); err != nil && !strings.Contains(err.Error(), "not started") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// listenBoth binds UDP at addr and TCP on the same port. With port 0 the kernel picks the UDP port, and
// another is tried when the TCP side of it is taken.
func listenBoth(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	tries := 1
	if port == "0" {
		tries = 20
	}
	var lastErr error
	for range tries {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		_, bound, _ := net.SplitHostPort(pc.LocalAddr().String())
		ln, err := net.Listen("tcp", net.JoinHostPort(host, bound))
		if err == nil {
			return pc, ln, nil
		}
		lastErr = err
		_ = pc.Close()
	}
	return nil, nil, lastErr
}

// serve answers one message: a single question of class IN, from the instance's domains, the mail host,
// or the upstream server.
func (a *Authority) serve(w mdns.ResponseWriter, req *mdns.Msg) {
	_, udp := w.RemoteAddr().(*net.UDPAddr)
	var m *mdns.Msg
	switch {
	case req.Opcode != mdns.OpcodeQuery:
		m = reply(req, mdns.RcodeNotImplemented)
	case len(req.Question) != 1:
		m = reply(req, mdns.RcodeFormatError)
	case req.Question[0].Qclass != mdns.ClassINET:
		m = reply(req, mdns.RcodeRefused)
	default:
		m = a.answer(req, udp)
	}
	size := mdns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		// RFC 6891 §7: an EDNS query gets an OPT record back.
		if m.IsEdns0() == nil {
			m.SetEdns0(max(opt.UDPSize(), mdns.MinMsgSize), false)
		}
		size = int(max(opt.UDPSize(), mdns.MinMsgSize))
	}
	if udp {
		// An answer larger than the client's buffer is cut and marked TC, so the client asks again over
		// TCP (RFC 1035 §4.2.1, RFC 6891 §7). A 2048-bit DKIM key fits in EDNS's usual 1232 bytes.
		m.Truncate(size)
	}
	_ = w.WriteMsg(m)
}

// reply is an empty answer to req with rcode.
func reply(req *mdns.Msg, rcode int) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetRcode(req, rcode)
	return m
}

// answer decides who answers the question: the mail host's own address, a zone of the instance, the
// catcher for MX questions about any other name, or the upstream server.
func (a *Authority) answer(req *mdns.Msg, udp bool) *mdns.Msg {
	q := req.Question[0]
	name := canonical(q.Name)
	if _, ok := mdns.IsDomainName(q.Name); !ok || name == "" {
		return reply(req, mdns.RcodeFormatError)
	}
	if a.cfg.MailHost != "" && name == a.cfg.MailHost {
		return a.mailHostAnswer(req, q)
	}
	domains, err := a.zonesFor(name)
	if err != nil {
		a.log.Warn("reading published domains failed", slog.String("name", name), slog.String("error", err.Error()))
		return reply(req, mdns.RcodeServerFailure)
	}
	if zone, ok := longestZone(name, domains); ok {
		return a.zoneAnswer(req, q, name, zone, domains)
	}
	if q.Qtype == mdns.TypeMX && a.cfg.MailHost != "" {
		m := authoritative(req)
		m.Answer = []mdns.RR{&mdns.MX{Hdr: rrHeader(q.Name, mdns.TypeMX), Preference: 10, Mx: mdns.Fqdn(a.cfg.MailHost)}}
		return m
	}
	return a.forward(req, udp)
}

// mailHostAnswer serves the catcher's address at MailHost.
func (a *Authority) mailHostAnswer(req *mdns.Msg, q mdns.Question) *mdns.Msg {
	m := authoritative(req)
	addr := a.cfg.MailAddr.Unmap()
	switch {
	case q.Qtype == mdns.TypeA && addr.Is4():
		ip := addr.As4()
		m.Answer = []mdns.RR{&mdns.A{Hdr: rrHeader(q.Name, mdns.TypeA), A: net.IP(ip[:])}}
	case q.Qtype == mdns.TypeAAAA && addr.Is6():
		ip := addr.As16()
		m.Answer = []mdns.RR{&mdns.AAAA{Hdr: rrHeader(q.Name, mdns.TypeAAAA), AAAA: net.IP(ip[:])}}
	default:
		m.Ns = []mdns.RR{soa(a.cfg.MailHost)}
	}
	return m
}

// forward asks the upstream server the same question over the transport the client used, and relays its
// answer; without an upstream the question is refused.
func (a *Authority) forward(req *mdns.Msg, udp bool) *mdns.Msg {
	if a.cfg.Upstream == "" {
		return reply(req, mdns.RcodeRefused)
	}
	c := a.tcp
	if udp {
		c = a.udp
	}
	out := req.Copy()
	out.Id = mdns.Id()
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	resp, _, err := c.ExchangeContext(ctx, out, withPort(a.cfg.Upstream))
	if err != nil {
		return reply(req, mdns.RcodeServerFailure)
	}
	resp.Id = req.Id
	return resp
}

func authoritative(req *mdns.Msg) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	return m
}

func rrHeader(name string, rrtype uint16) mdns.RR_Header {
	return mdns.RR_Header{Name: name, Rrtype: rrtype, Class: mdns.ClassINET, Ttl: authorityAnswerTTL}
}

// soa is the start of authority of zone, put in the authority section of negative answers so clients know
// how long the absence holds (RFC 2308 §3).
func soa(zone string) mdns.RR {
	return &mdns.SOA{
		Hdr:     mdns.RR_Header{Name: mdns.Fqdn(zone), Rrtype: mdns.TypeSOA, Class: mdns.ClassINET, Ttl: authorityNegTTL},
		Ns:      "ns.postmill.localhost.",
		Mbox:    "hostmaster.postmill.localhost.",
		Serial:  1,
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  authorityNegTTL,
	}
}

// canonical is a name lower-cased without the root's trailing dot, the form domains are stored in.
func canonical(name string) string { return strings.TrimSuffix(strings.ToLower(name), ".") }
