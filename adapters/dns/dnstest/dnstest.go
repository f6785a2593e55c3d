// Package dnstest runs an authoritative DNS server inside a test process, on 127.0.0.1 over UDP and TCP on
// one port, whose records the test changes while it runs. Point the code under test at Addr (as
// POSTMILL_DNS_RESOLVER) and publish records the way a domain owner would.
//
// The server answers for every name: a name nothing was set at is NXDOMAIN, unless a name below it has
// records (an empty non-terminal such as example.org under _dmarc.example.org, RFC 8020 §2), and a name
// without the asked type is NODATA. A CNAME answers every type at its name and is followed to its target
// within the server (RFC 1034 §3.6.2, §4.3.2), as the authoritative server of both names would.
package dnstest

import (
	"encoding/hex"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	mdns "github.com/miekg/dns"
	"github.com/postmill/postmill/ports"
)

// ttl of every answer. Nothing in the tests caches, so its value only has to be valid.
const ttl = 60

// maxChain bounds CNAME following, so a loop a test sets up ends in SERVFAIL instead of hanging.
const maxChain = 8

// maxString is the longest character-string a TXT record can hold (RFC 1035 §3.3.14).
const maxString = 255

// Server is an in-process authoritative DNS server. Its setters may be called at any time, also while
// queries are answered; each takes effect for the next query.
type Server struct {
	addr string

	mu    sync.Mutex
	names map[string]*node // key: lower-case FQDN
	// secure are the zones (lower-case FQDNs) whose answers carry the AD bit, see SetSecure.
	secure map[string]bool
	// held are the names whose answers wait, see Hold.
	held map[string]*hold
}

// hold is one held name: asked is closed at its first query, answers wait for release.
type hold struct {
	asked, release chan struct{}
	once           sync.Once
}

type node struct {
	txt      [][]string // per record, its character-strings in presentation form
	cname    string     // FQDN, case kept as set
	mx       []ports.MX
	addrs    []netip.Addr
	tlsa     []ports.TLSA
	servfail bool
}

// New starts a server on 127.0.0.1 with a free port shared by UDP and TCP, and stops it when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	pc, ln := listen(tb)
	s := &Server{addr: pc.LocalAddr().String(), names: map[string]*node{}, secure: map[string]bool{}, held: map[string]*hold{}}
	handler := mdns.HandlerFunc(s.serve)
	servers := []*mdns.Server{
		{PacketConn: pc, Handler: handler},
		{Listener: ln, Handler: handler},
	}
	for _, srv := range servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		errc := make(chan error, 1)
		go func() { errc <- srv.ActivateAndServe() }()
		select {
		case <-started:
		case err := <-errc:
			tb.Fatalf("dnstest: serve: %v", err)
		}
	}
	tb.Cleanup(func() {
		for _, srv := range servers {
			_ = srv.Shutdown()
		}
	})
	return s
}

// listen binds UDP on a free port and TCP on the same one, trying again when another process holds the TCP
// side of the port the kernel picked for UDP.
func listen(tb testing.TB) (net.PacketConn, net.Listener) {
	tb.Helper()
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("dnstest: listen udp: %v", err)
		}
		ln, err := net.Listen("tcp4", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		lastErr = err
		_ = pc.Close()
	}
	tb.Fatalf("dnstest: no port free for both UDP and TCP: %v", lastErr)
	return nil, nil
}

// Addr is the server's host:port, the same for UDP and TCP.
func (s *Server) Addr() string { return s.addr }

// SetTXT replaces the TXT records at name with one record per value. A value longer than 255 bytes is split
// into several character-strings of one record, as DNS hosts publish DKIM keys (RFC 6376 §3.6.2.2), so
// clients must join them. With no values the name exists without TXT records (NODATA).
func (s *Server) SetTXT(name string, values ...string) {
	recs := make([][]string, 0, len(values))
	for _, v := range values {
		var chunks []string
		for len(v) > maxString {
			chunks = append(chunks, escape(v[:maxString]))
			v = v[maxString:]
		}
		recs = append(recs, append(chunks, escape(v)))
	}
	s.update(name, func(n *node) { n.txt = recs })
}

// SetCNAME makes name an alias of target (kept in the case given, a trailing dot optional). The CNAME then
// answers queries of every type at name. An empty target removes the alias.
func (s *Server) SetCNAME(name, target string) {
	if target != "" {
		target = mdns.Fqdn(target)
	}
	s.update(name, func(n *node) { n.cname = target })
}

// SetMX replaces the MX records at name. A record with Host "" is the null MX "0 ." of RFC 7505.
func (s *Server) SetMX(name string, mx ...ports.MX) {
	s.update(name, func(n *node) { n.mx = append([]ports.MX(nil), mx...) })
}

// SetA replaces the address records at name: IPv4 addresses become A records, IPv6 ones AAAA records.
func (s *Server) SetA(name string, addrs ...netip.Addr) {
	s.update(name, func(n *node) { n.addrs = append([]netip.Addr(nil), addrs...) })
}

// SetTLSA replaces the TLSA records at name (RFC 6698), e.g. "_25._tcp.mx.example.org" for DANE SMTP.
func (s *Server) SetTLSA(name string, records ...ports.TLSA) {
	s.update(name, func(n *node) { n.tlsa = append([]ports.TLSA(nil), records...) })
}

// SetSecure makes the server answer for zone and every name below it as a validating resolver answers for a
// signed zone whose signatures it checked: with the AD bit set (RFC 4035 §3.2.3) when the query asked for
// DNSSEC (DO or AD bit, RFC 6840 §5.7). Nothing is signed or validated here; this stands in for a validating
// resolver so that code reading the AD bit can be tested over real sockets. secure false undoes it.
func (s *Server) SetSecure(zone string, secure bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if secure {
		s.secure[key(zone)] = true
	} else {
		delete(s.secure, key(zone))
	}
}

// isSecure reports whether name is at or below a zone set with SetSecure. The caller holds s.mu.
func (s *Server) isSecure(name string) bool {
	k := key(name)
	for {
		if s.secure[k] {
			return true
		}
		_, rest, ok := strings.Cut(k, ".")
		if !ok || rest == "" {
			return s.secure["."]
		}
		k = rest
	}
}

// SetServFail makes every query at name answer SERVFAIL, as a broken or unreachable authoritative server
// would, until Remove(name).
func (s *Server) SetServFail(name string) {
	s.update(name, func(n *node) { n.servfail = true })
}

// Remove deletes everything at name; it answers NXDOMAIN again (or NODATA while names below it have records).
func (s *Server) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, key(name))
}

func (s *Server) update(name string, f func(*node)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(name)
	n := s.names[k]
	if n == nil {
		n = &node{}
		s.names[k] = n
	}
	f(n)
}

func key(name string) string { return strings.ToLower(mdns.Fqdn(name)) }

// Hold makes queries for name wait for their answer until release is called (or the test ends): asked is
// closed when the first of them arrives. A test uses it to have the code under test wait in a lookup at a
// point it chooses.
func (s *Server) Hold(tb testing.TB, name string) (asked <-chan struct{}, release func()) {
	h := &hold{asked: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	s.held[key(name)] = h
	s.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(h.release) }) }
	tb.Cleanup(release)
	return h.asked, release
}

func (s *Server) serve(w mdns.ResponseWriter, req *mdns.Msg) {
	if len(req.Question) == 1 {
		s.mu.Lock()
		h := s.held[key(req.Question[0].Name)]
		s.mu.Unlock()
		if h != nil {
			h.once.Do(func() { close(h.asked) })
			<-h.release
		}
	}
	m := new(mdns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	m.RecursionAvailable = req.RecursionDesired
	switch {
	case req.Opcode != mdns.OpcodeQuery:
		m.Rcode = mdns.RcodeNotImplemented
	case len(req.Question) != 1:
		m.Rcode = mdns.RcodeFormatError
	default:
		s.answer(m, req.Question[0])
		if wantsDNSSEC(req) && m.Rcode != mdns.RcodeServerFailure {
			s.mu.Lock()
			m.AuthenticatedData = s.isSecure(req.Question[0].Name)
			s.mu.Unlock()
		}
	}

	size := mdns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		// RFC 6891 §7: answer an EDNS query with an OPT record.
		m.SetEdns0(max(opt.UDPSize(), mdns.MinMsgSize), opt.Do()) // RFC 3225 §3: the DO bit is copied
		size = int(opt.UDPSize())
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		// Over UDP an answer larger than the client's buffer is cut and marked TC, telling the client to ask
		// again over TCP (RFC 1035 §4.2.1, RFC 6891 §7).
		m.Truncate(size)
	}
	_ = w.WriteMsg(m)
}

func (s *Server) answer(m *mdns.Msg, q mdns.Question) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.Qclass != mdns.ClassINET {
		m.Rcode = mdns.RcodeRefused
		return
	}
	name := q.Name
	for range maxChain {
		n, ok := s.names[key(name)]
		if !ok {
			if !s.hasBelow(key(name)) {
				m.Rcode = mdns.RcodeNameError
			}
			return
		}
		if n.servfail {
			m.Answer = nil
			m.Rcode = mdns.RcodeServerFailure
			return
		}
		if n.cname != "" {
			m.Answer = append(m.Answer, &mdns.CNAME{Hdr: header(name, mdns.TypeCNAME), Target: n.cname})
			if q.Qtype == mdns.TypeCNAME {
				return
			}
			name = n.cname
			continue
		}
		m.Answer = append(m.Answer, n.records(name, q.Qtype)...)
		return
	}
	m.Answer = nil
	m.Rcode = mdns.RcodeServerFailure
}

// wantsDNSSEC reports whether a query asked for DNSSEC: the DO bit (RFC 3225) or the AD bit (RFC 6840 §5.7).
func wantsDNSSEC(req *mdns.Msg) bool {
	if req.AuthenticatedData {
		return true
	}
	opt := req.IsEdns0()
	return opt != nil && opt.Do()
}

// hasBelow reports whether some name below k has been set, which makes k an empty non-terminal.
func (s *Server) hasBelow(k string) bool {
	for other := range s.names {
		if strings.HasSuffix(other, "."+k) {
			return true
		}
	}
	return false
}

func (n *node) records(name string, qtype uint16) []mdns.RR {
	var out []mdns.RR
	switch qtype {
	case mdns.TypeTXT:
		for _, t := range n.txt {
			out = append(out, &mdns.TXT{Hdr: header(name, qtype), Txt: t})
		}
	case mdns.TypeMX:
		for _, mx := range n.mx {
			out = append(out, &mdns.MX{Hdr: header(name, qtype), Preference: mx.Preference, Mx: mdns.Fqdn(mx.Host)})
		}
	case mdns.TypeTLSA:
		for _, t := range n.tlsa {
			out = append(out, &mdns.TLSA{Hdr: header(name, qtype), Usage: t.Usage, Selector: t.Selector,
				MatchingType: t.MatchingType, Certificate: hex.EncodeToString(t.Data)})
		}
	case mdns.TypeA:
		for _, a := range n.addrs {
			if a.Unmap().Is4() {
				ip := a.Unmap().As4()
				out = append(out, &mdns.A{Hdr: header(name, qtype), A: net.IP(ip[:])})
			}
		}
	case mdns.TypeAAAA:
		for _, a := range n.addrs {
			if a.Is6() && !a.Is4In6() {
				ip := a.As16()
				out = append(out, &mdns.AAAA{Hdr: header(name, qtype), AAAA: net.IP(ip[:])})
			}
		}
	}
	return out
}

func header(name string, rrtype uint16) mdns.RR_Header {
	return mdns.RR_Header{Name: name, Rrtype: rrtype, Class: mdns.ClassINET, Ttl: ttl}
}

// escape writes raw bytes in the presentation form miekg/dns packs TXT strings from: '"' and '\' behind a
// backslash, unprintable bytes as \DDD (RFC 1035 §5.1).
func escape(raw string) string {
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c > '~':
			b.WriteByte('\\')
			d := strconv.Itoa(int(c))
			b.WriteString(strings.Repeat("0", 3-len(d)) + d)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
