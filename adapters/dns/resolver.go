// Package dns implements ports.Resolver and ports.DNSSECResolver with github.com/miekg/dns, asking one configured server
// (POSTMILL_DNS_RESOLVER) instead of the operating system's resolver so that tests and private deployments
// decide every answer, and so that NXDOMAIN, NODATA and failures stay distinguishable (net.Resolver folds
// them together).
//
// There is deliberately no cache: domain verification must see what is published now, and the server asked
// is expected to be a caching recursive resolver already.
package dns

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/postmill/postmill/ports"
)

// DefaultTimeout bounds one attempt of a query. Recursive resolvers answer from cache in milliseconds and
// resolve cold names in well under a second; three seconds leaves room for a slow authoritative server
// without holding a verify request or a delivery worker for long.
const DefaultTimeout = 3 * time.Second

// attempts is the first try plus one retry: a single lost UDP datagram should not turn into a "not
// published" or a deferred delivery, and more retries would only stretch the wait behind a dead server.
const attempts = 2

// ednsUDPSize is the EDNS(0) buffer size advertised (RFC 6891 §6.2.5), the value DNS Flag Day 2020 settled on
// to avoid IP fragmentation. Larger answers come back truncated and are asked again over TCP.
const ednsUDPSize = 1232

// resolvConf is where the system's name servers are listed (resolv.conf(5)).
const resolvConf = "/etc/resolv.conf"

// Options tune a Resolver. The zero value means the defaults.
type Options struct {
	// Timeout bounds each attempt of a query (default DefaultTimeout); a failed attempt is retried once, so
	// a silent server costs twice this.
	Timeout time.Duration
}

// Resolver asks one DNS server over UDP, falling back to TCP when an answer is truncated (RFC 7766 §5).
// It is safe for concurrent use.
type Resolver struct {
	server string
	udp    *mdns.Client
	tcp    *mdns.Client
}

var (
	_ ports.Resolver       = (*Resolver)(nil)
	_ ports.DNSSECResolver = (*Resolver)(nil)
)

// New returns a Resolver asking server, a host:port such as POSTMILL_DNS_RESOLVER ("host" alone means port
// 53). An empty server means the first nameserver of /etc/resolv.conf, or 127.0.0.1:53 when it lists none,
// which is what resolv.conf(5) prescribes.
func New(server string, opts Options) *Resolver {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if server == "" {
		server = systemServer(resolvConf)
	}
	return &Resolver{
		server: withPort(server),
		udp:    &mdns.Client{Net: "udp", Timeout: opts.Timeout, UDPSize: ednsUDPSize},
		tcp:    &mdns.Client{Net: "tcp", Timeout: opts.Timeout},
	}
}

// Server returns the host:port the Resolver asks, for logs and diagnostics.
func (r *Resolver) Server() string { return r.server }

// withPort adds DNS's port 53 to a server given without one.
func withPort(server string) string {
	if _, _, err := net.SplitHostPort(server); err == nil {
		return server
	}
	return net.JoinHostPort(strings.Trim(server, "[]"), "53")
}

// systemServer returns the first name server of a resolv.conf file as host:port.
func systemServer(path string) string {
	conf, err := mdns.ClientConfigFromFile(path)
	if err != nil || len(conf.Servers) == 0 {
		return "127.0.0.1:53"
	}
	port := conf.Port
	if port == "" {
		port = "53"
	}
	return net.JoinHostPort(conf.Servers[0], port)
}

// LookupTXT returns every TXT record at name, each with its character-strings joined in order: a value longer
// than 255 bytes (a 2048-bit DKIM key, RFC 6376 §3.6.2.2) is published as several strings of one record, and
// SPF evaluates the concatenation too (RFC 7208 §3.3). Records reached through a CNAME are included.
func (r *Resolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	rrs, err := r.query(ctx, name, mdns.TypeTXT)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		var b strings.Builder
		for _, s := range rr.(*mdns.TXT).Txt {
			b.WriteString(unescape(s))
		}
		out = append(out, b.String())
	}
	return out, nil
}

// LookupCNAME returns the target of the CNAME at name itself, without the trailing dot. It follows nothing:
// verification compares the first hop with the host it asked the customer to point at.
func (r *Resolver) LookupCNAME(ctx context.Context, name string) (string, error) {
	rrs, err := r.query(ctx, name, mdns.TypeCNAME)
	if err != nil {
		return "", err
	}
	for _, rr := range rrs {
		if strings.EqualFold(rr.Header().Name, mdns.Fqdn(name)) {
			return trimDot(rr.(*mdns.CNAME).Target), nil
		}
	}
	return "", &ports.DNSError{Kind: ports.DNSNoData, Name: name}
}

// LookupMX returns the mail exchangers of name sorted by preference, lowest (most preferred) first, as
// RFC 5321 §5.1 orders delivery attempts; equal preferences keep the server's order. Targets lose the
// trailing dot, and the null MX of RFC 7505 ("0 .", the domain accepts no mail) becomes a record with Host "".
// NODATA is reported as such, so the caller can apply RFC 5321 §5.1's fallback to the address records.
func (r *Resolver) LookupMX(ctx context.Context, name string) ([]ports.MX, error) {
	rrs, err := r.query(ctx, name, mdns.TypeMX)
	if err != nil {
		return nil, err
	}
	return mxRecords(rrs), nil
}

// LookupMXAuthenticated is LookupMX asking with the DO bit (RFC 3225) and reporting the AD bit of the
// answer: whether the server, a validating resolver, authenticated the MX records (RFC 7672 §2.2.1).
func (r *Resolver) LookupMXAuthenticated(ctx context.Context, name string) ([]ports.MX, bool, error) {
	rrs, ad, err := r.ask(ctx, name, mdns.TypeMX, true)
	if err != nil {
		return nil, false, err
	}
	return mxRecords(rrs), ad, nil
}

// LookupTLSA returns the TLSA records at name (RFC 6698) and whether the answer was authenticated (the AD
// bit, asked for with the DO bit). Records with certificate data that is not hexadecimal are dropped: they
// cannot match anything.
func (r *Resolver) LookupTLSA(ctx context.Context, name string) ([]ports.TLSA, bool, error) {
	rrs, ad, err := r.ask(ctx, name, mdns.TypeTLSA, true)
	if err != nil {
		return nil, false, err
	}
	out := make([]ports.TLSA, 0, len(rrs))
	for _, rr := range rrs {
		t := rr.(*mdns.TLSA)
		data, err := hex.DecodeString(t.Certificate)
		if err != nil {
			continue
		}
		out = append(out, ports.TLSA{Usage: t.Usage, Selector: t.Selector, MatchingType: t.MatchingType, Data: data})
	}
	return out, ad, nil
}

// mxRecords converts MX answers, sorted by preference.
func mxRecords(rrs []mdns.RR) []ports.MX {
	out := make([]ports.MX, 0, len(rrs))
	for _, rr := range rrs {
		mx := rr.(*mdns.MX)
		out = append(out, ports.MX{Host: trimDot(mx.Mx), Preference: mx.Preference})
	}
	slices.SortStableFunc(out, func(a, b ports.MX) int { return int(a.Preference) - int(b.Preference) })
	return out
}

// LookupIP returns the IPv4 then the IPv6 addresses of host, asking for A and AAAA at the same time. An IP
// literal is returned as is (RFC 5321 §4.1.3 address literals, relay settings). When neither type has an
// address the error is temporary if either query failed temporarily, otherwise NXDOMAIN if the name does not
// exist, otherwise NODATA.
func (r *Resolver) LookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	var (
		wg         sync.WaitGroup
		v4, v6     []mdns.RR
		err4, err6 error
	)
	wg.Go(func() { v4, err4 = r.query(ctx, host, mdns.TypeA) })
	wg.Go(func() { v6, err6 = r.query(ctx, host, mdns.TypeAAAA) })
	wg.Wait()

	var out []netip.Addr
	for _, rr := range v4 {
		if ip, ok := netip.AddrFromSlice(rr.(*mdns.A).A); ok {
			out = append(out, ip.Unmap())
		}
	}
	for _, rr := range v6 {
		if ip, ok := netip.AddrFromSlice(rr.(*mdns.AAAA).AAAA); ok {
			out = append(out, ip)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	for _, kind := range []ports.DNSErrorKind{ports.DNSTemporary, ports.DNSNotFound} {
		for _, err := range []error{err4, err6} {
			if e, ok := errors.AsType[*ports.DNSError](err); ok && e.Kind == kind {
				return nil, e
			}
		}
	}
	if err4 != nil {
		return nil, err4
	}
	return nil, &ports.DNSError{Kind: ports.DNSNoData, Name: host}
}

// query asks for one type at name and returns the answer records of that type, or a *ports.DNSError:
// NXDOMAIN → DNSNotFound; NOERROR without a record of the type → DNSNoData (RFC 2308 §2.2); SERVFAIL,
// REFUSED, any other rcode and every transport failure → DNSTemporary.
func (r *Resolver) query(ctx context.Context, name string, qtype uint16) ([]mdns.RR, error) {
	rrs, _, err := r.ask(ctx, name, qtype, false)
	return rrs, err
}

// ask is query, optionally asking for DNSSEC (dnssec: the DO bit of RFC 3225 and the AD bit of RFC 6840
// §5.7) and returning the AD bit of the answer. A server that drops EDNS on a FORMERR retry cannot have
// authenticated anything for us, so its answer counts as not authenticated.
func (r *Resolver) ask(ctx context.Context, name string, qtype uint16, dnssec bool) ([]mdns.RR, bool, error) {
	fqdn := mdns.Fqdn(name)
	if _, ok := mdns.IsDomainName(fqdn); !ok || name == "" || name == "." {
		// A name that cannot be encoded cannot exist.
		return nil, false, &ports.DNSError{Kind: ports.DNSNotFound, Name: name, Err: errors.New("invalid domain name")}
	}
	m := new(mdns.Msg)
	m.SetQuestion(fqdn, qtype)
	m.RecursionDesired = true
	m.AuthenticatedData = dnssec
	m.SetEdns0(ednsUDPSize, dnssec)

	resp, err := r.exchange(ctx, r.udp, m)
	if err == nil && resp.Rcode == mdns.RcodeFormatError {
		// RFC 6891 §7: a server that does not understand EDNS answers FORMERR; ask again without it.
		m.Extra = nil
		resp, err = r.exchange(ctx, r.udp, m)
	}
	if err == nil && resp.Truncated {
		resp, err = r.exchange(ctx, r.tcp, m)
	}
	if err != nil {
		return nil, false, &ports.DNSError{Kind: ports.DNSTemporary, Name: name, Err: err}
	}
	switch resp.Rcode {
	case mdns.RcodeSuccess:
	case mdns.RcodeNameError:
		return nil, false, &ports.DNSError{Kind: ports.DNSNotFound, Name: name}
	default:
		return nil, false, &ports.DNSError{Kind: ports.DNSTemporary, Name: name,
			Err: fmt.Errorf("server %s answered %s", r.server, rcodeName(resp.Rcode))}
	}
	// Only records at the name asked for count, or at the names its CNAMEs in the answer lead to (RFC 1034
	// §5.3.3; RFC 5452 §9.1): a record for another name is not an answer to this question, whatever a
	// misbehaving or spoofing server put in the section.
	owners := answerOwners(fqdn, resp.Answer)
	var out []mdns.RR
	for _, rr := range resp.Answer {
		h := rr.Header()
		if h.Rrtype == qtype && h.Class == mdns.ClassINET && owners[strings.ToLower(h.Name)] {
			out = append(out, rr)
		}
	}
	if len(out) == 0 {
		return nil, false, &ports.DNSError{Kind: ports.DNSNoData, Name: name}
	}
	return out, dnssec && resp.AuthenticatedData && m.IsEdns0() != nil, nil
}

// maxCNAMEChain bounds how many CNAMEs of one answer are followed (a loop or a long chain in the answer
// section ends there).
const maxCNAMEChain = 8

// answerOwners is the set of lower-case owner names whose records answer a question for fqdn: fqdn and
// the targets of the CNAME chain that starts at it within answer.
func answerOwners(fqdn string, answer []mdns.RR) map[string]bool {
	owners := map[string]bool{strings.ToLower(fqdn): true}
	name := strings.ToLower(fqdn)
	for range maxCNAMEChain {
		next := ""
		for _, rr := range answer {
			if c, ok := rr.(*mdns.CNAME); ok && strings.ToLower(c.Hdr.Name) == name {
				next = strings.ToLower(c.Target)
				break
			}
		}
		if next == "" || owners[next] {
			break
		}
		owners[next], name = true, next
	}
	return owners
}

// exchange sends m with c, retrying once after a transport failure (a lost datagram, a timeout, a garbled
// or mismatched reply). Each attempt gets a fresh message id, so a late reply to the first one is not
// mistaken for the second's (RFC 5452 §9.2).
func (r *Resolver) exchange(ctx context.Context, c *mdns.Client, m *mdns.Msg) (*mdns.Msg, error) {
	var err error
	for range attempts {
		m.Id = mdns.Id()
		var resp *mdns.Msg
		resp, _, err = c.ExchangeContext(ctx, m, r.server)
		if err == nil {
			return resp, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
	}
	return nil, fmt.Errorf("%s %s: %w", c.Net, r.server, err)
}

func rcodeName(rcode int) string {
	if s, ok := mdns.RcodeToString[rcode]; ok {
		return s
	}
	return fmt.Sprintf("rcode %d", rcode)
}

// trimDot removes the root's trailing dot; the root itself (a null MX target) becomes "".
func trimDot(name string) string { return strings.TrimSuffix(name, ".") }

// unescape turns miekg/dns's presentation form of a character-string back into its bytes: miekg escapes '"'
// and '\' with a backslash and unprintable bytes as \DDD (RFC 1035 §5.1) when it unpacks a TXT record.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b = append(b, c)
			continue
		}
		if i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
			b = append(b, (s[i+1]-'0')*100+(s[i+2]-'0')*10+(s[i+3]-'0'))
			i += 3
			continue
		}
		b = append(b, s[i+1])
		i++
	}
	return string(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
