// Package netguard is the forbidden-address rule shared by every part of Postmill that connects to an
// address a tenant can choose: webhook receivers (SPEC §6, adapters/webhook) and the MX hosts of recipient
// domains (the MTA). A tenant controls the URL of its webhook and, through a recipient domain it owns, the
// MX records the MTA follows; without this rule either would make Postmill connect to its own network
// (an internal relay, a database port, the cloud metadata service at 169.254.169.254).
//
// It lives in the ports module because both an adapter and a tier use it, and adapters may import
// neither each other nor a tier (STYLE.md §1); it is pure (net/netip only), so the policy is table-tested
// without sockets.
package netguard

import (
	"net/netip"
)

// addrClass is one forbidden range with the words that name it in a refusal.
type addrClass struct {
	prefix netip.Prefix
	reason string // "loopback (127.0.0.0/8)", Forbidden's terse form
	phrase string // "a loopback address", Explain's noun phrase
	source string // the RFC that defines the range
}

func class(name, phrase, cidr, source string) addrClass {
	p := netip.MustParsePrefix(cidr)
	return addrClass{prefix: p, reason: name + " (" + p.String() + ")", phrase: phrase, source: source}
}

// forbidden4 is SPEC §6's IPv4 list, plus 0.0.0.0/8: connecting to 0.0.0.0 reaches the local host on Linux
// and the BSDs, so "this network" is loopback in disguise. TEST-NET-1..3 (192.0.2.0/24, 198.51.100.0/24,
// 203.0.113.0/24, RFC 5737) are deliberately absent: they are not in SPEC §6, and tests use them as the
// "public" answer that the guard must accept.
var forbidden4 = []addrClass{
	// RFC 6890 §2.2.2, RFC 1122 §3.2.1.3.
	class("this network", `a "this network" address`, "0.0.0.0/8", "RFC 1122"),
	class("private", "a private address", "10.0.0.0/8", "RFC 1918"),
	class("shared address space", "a carrier-grade NAT address", "100.64.0.0/10", "RFC 6598"),
	// RFC 1122 §3.2.1.3, RFC 6890 §2.2.2.
	class("loopback", "a loopback address", "127.0.0.0/8", "RFC 1122"),
	// 169.254.169.254 is the cloud metadata service.
	class("link-local", "a link-local address", "169.254.0.0/16", "RFC 3927"),
	class("private", "a private address", "172.16.0.0/12", "RFC 1918"),
	class("IETF protocol assignments", "an IETF protocol assignment address", "192.0.0.0/24", "RFC 6890"),
	class("private", "a private address", "192.168.0.0/16", "RFC 1918"),
	// RFC 2544, RFC 6890 §2.2.2.
	class("benchmarking", "a benchmarking address", "198.18.0.0/15", "RFC 2544"),
	class("multicast", "a multicast address", "224.0.0.0/4", "RFC 5771"),
	// RFC 1112 §4, RFC 6890; holds the limited broadcast 255.255.255.255 (RFC 919).
	class("reserved", "a reserved address", "240.0.0.0/4", "RFC 1112"),
}

// forbidden6 is SPEC §6's IPv6 list (::1, fe80::/10, fc00::/7), plus the unspecified address :: (which, like
// 0.0.0.0, connects to the local host) and multicast ff00::/8, the IPv6 counterpart of 224.0.0.0/4.
var forbidden6 = []addrClass{
	class("unspecified", "the unspecified address", "::/128", "RFC 4291"), // §2.5.2
	class("loopback", "the loopback address", "::1/128", "RFC 4291"),      // §2.5.3
	class("link-local", "a link-local address", "fe80::/10", "RFC 4291"),  // §2.5.6
	class("unique local", "a unique local address", "fc00::/7", "RFC 4193"),
	class("multicast", "a multicast address", "ff00::/8", "RFC 4291"), // §2.7
}

// embedding is an IPv6 range whose addresses carry an IPv4 address that the packets end up at (or that a
// stack may treat as the IPv4 destination itself).
type embedding struct {
	prefix netip.Prefix
	name   string
	offset int // index in As16 of the embedded address's first byte
}

// embeddings are the IPv6 forms of IPv4 addresses that are checked against forbidden4 through the address
// they embed. IPv4-mapped addresses (::ffff:0:0/96) are not listed: they are the IPv4 address itself to
// every socket API and are unmapped before any check (see Forbidden).
//
//   - IPv4-compatible ::a.b.c.d (::/96, RFC 4291 §2.5.5.1): deprecated, but some stacks still route them as
//     IPv4, so ::7f00:1 must not be a way to spell 127.0.0.1. :: and ::1 themselves are matched first by
//     forbidden6.
//   - NAT64 well-known prefix 64:ff9b::/96 (RFC 6052 §2.1, §2.2): on an IPv6-only network with DNS64 every
//     IPv4-only host resolves to this range and the translator connects to the embedded address, which may
//     be inside the translator's own network. A network-specific NAT64 prefix (RFC 6052 §2.2) cannot be
//     known here; such deployments must not put it in AllowNets wholesale.
//   - 6to4 2002::/16 (RFC 3056 §2): 2002:V4ADDR::/48 is encapsulated in IPv4 and sent to V4ADDR.
//   - IPv4-translated ::ffff:0:a.b.c.d (::ffff:0:0:0/96, RFC 2765 §2.1): a stateless IP/ICMP translator
//     (SIIT) sends packets for these to the embedded IPv4 address.
//
// Teredo (2001::/32, RFC 4380) is not covered: its packets go through a Teredo relay over UDP and only
// from hosts with a Teredo interface, which servers do not run.
var embeddings = []embedding{
	{prefix: netip.MustParsePrefix("::/96"), name: "IPv4-compatible", offset: 12},
	{prefix: netip.MustParsePrefix("64:ff9b::/96"), name: "NAT64", offset: 12},
	{prefix: netip.MustParsePrefix("2002::/16"), name: "6to4", offset: 2},
	{prefix: netip.MustParsePrefix("::ffff:0:0:0/96"), name: "IPv4-translated", offset: 12},
}

// Forbidden reports whether Postmill may not connect to addr on a tenant's behalf, and if so why, naming
// the address class: the SSRF guard of SPEC §6, applied to webhook receivers and to the addresses of MX
// hosts alike. It is pure, so the whole policy is table-tested without sockets.
//
// An address in one of allow's prefixes (POSTMILL_WEBHOOK_ALLOW_NETS for webhooks, POSTMILL_MTA_ALLOW_NETS
// for outbound SMTP) is permitted before anything else is checked. Otherwise forbidden are: loopback (127.0.0.0/8, ::1), private IPv4 (10.0.0.0/8, 172.16.0.0/12,
// 192.168.0.0/16, RFC 1918), shared address space (100.64.0.0/10, RFC 6598), link-local (169.254.0.0/16,
// RFC 3927, with the cloud metadata address 169.254.169.254; fe80::/10, RFC 4291), unique local fc00::/7
// (RFC 4193), multicast and reserved (224.0.0.0/4, 240.0.0.0/4, 192.0.0.0/24, 198.18.0.0/15, RFC 6890) —
// SPEC §6's list — and also 0.0.0.0/8, the unspecified ::, IPv6 multicast ff00::/8, and the IPv6 forms of
// forbidden IPv4 addresses:
//
//   - IPv4-mapped ::ffff:a.b.c.d (RFC 4291 §2.5.5.2), whether written dotted (::ffff:10.0.0.1) or in hex
//     (::ffff:a00:1) — both parse to the same netip.Addr, which is unmapped and checked as IPv4. A
//     prefix of allow matches a mapped address through its IPv4 form too, since both reach the same socket.
//   - IPv4-compatible (::/96), NAT64 (64:ff9b::/96, RFC 6052), 6to4 (2002::/16, RFC 3056) and
//     IPv4-translated (::ffff:0:0:0/96, RFC 2765): the embedded
//     IPv4 address is checked. allow exempts these only by their IPv6 form: a gateway stands between us and
//     the embedded address, and allow-listing 127.0.0.1 must not open 64:ff9b::7f00:1.
//
// An IPv6 zone is ignored: the caller dials the address without it. Public addresses, TEST-NET (RFC 5737)
// and documentation 2001:db8::/32 included, are permitted: plain http or SMTP to a public host is
// allowed.
func Forbidden(addr netip.Addr, allow []netip.Prefix) (reason string, forbidden bool) {
	v, forbidden := check(addr, allow)
	if !forbidden {
		return "", false
	}
	switch {
	case v.class == nil:
		return "invalid address", true
	case v.via != nil:
		return v.via.name + " (" + v.via.prefix.String() + ") form of " + v.v4.String() + ", " + v.class.reason, true
	case v.mapped:
		return "IPv4-mapped (::ffff:0:0/96) form of " + v.class.reason, true
	}
	return v.class.reason, true
}

// Explain is Forbidden for a person who has to act on the refusal: it describes a forbidden addr as a noun
// phrase naming the range, its prefix and the RFC that defines it, such as "a private address (10.0.0.0/8,
// RFC 1918)" or "the NAT64 (64:ff9b::/96) form of 10.0.0.5, a private address (10.0.0.0/8, RFC 1918)", so
// a caller can write "10.0.0.5 is " + what. It refuses exactly what Forbidden refuses.
func Explain(addr netip.Addr, allow []netip.Prefix) (what string, forbidden bool) {
	v, forbidden := check(addr, allow)
	if !forbidden {
		return "", false
	}
	if v.class == nil {
		return "not a valid IP address", true
	}
	what = v.class.phrase + " (" + v.class.prefix.String() + ", " + v.class.source + ")"
	switch {
	case v.via != nil:
		what = "the " + v.via.name + " (" + v.via.prefix.String() + ") form of " + v.v4.String() + ", " + what
	case v.mapped:
		what = "the IPv4-mapped form of " + v.v4.String() + ", " + what
	}
	return what, true
}

// verdict is what check found: the forbidden range, and the IPv6 form the address was written in when
// the range is an IPv4 one reached through it. A forbidden verdict without a class is an invalid address.
type verdict struct {
	class  *addrClass
	v4     netip.Addr // the IPv4 address checked, for mapped and embedded forms
	mapped bool       // written as IPv4-mapped IPv6
	via    *embedding // written in an IPv6 form that embeds v4
}

// check applies the rule documented on Forbidden.
func check(addr netip.Addr, allow []netip.Prefix) (verdict, bool) {
	if !addr.IsValid() {
		return verdict{}, true
	}
	addr = addr.WithZone("")
	plain := addr.Unmap()
	for _, p := range allow {
		if p.Contains(addr) || p.Contains(plain) {
			return verdict{}, false
		}
	}
	if plain.Is4() {
		c := forbiddenIPv4(plain)
		return verdict{class: c, v4: plain, mapped: addr.Is4In6()}, c != nil
	}
	for i := range forbidden6 {
		if forbidden6[i].prefix.Contains(plain) {
			return verdict{class: &forbidden6[i]}, true
		}
	}
	for i := range embeddings {
		e := &embeddings[i]
		if !e.prefix.Contains(plain) {
			continue
		}
		b := plain.As16()
		v4 := netip.AddrFrom4([4]byte(b[e.offset : e.offset+4]))
		if c := forbiddenIPv4(v4); c != nil {
			return verdict{class: c, v4: v4, via: e}, true
		}
	}
	return verdict{}, false
}

func forbiddenIPv4(a netip.Addr) *addrClass {
	for i := range forbidden4 {
		if forbidden4[i].prefix.Contains(a) {
			return &forbidden4[i]
		}
	}
	return nil
}
