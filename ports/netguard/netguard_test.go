package netguard_test

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports/netguard"
)

// TestForbidden walks every range of SPEC §6 (and the additions documented on Forbidden) at its first, a
// middle and its last address, the addresses just outside, the IPv6 spellings of IPv4 addresses, and
// public addresses that must pass. want is a word the reason must contain; "" means permitted.
func TestForbidden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want string
	}{
		// 0.0.0.0/8 "this network" (RFC 6890): 0.0.0.0 connects to the local host.
		{"0.0.0.0", "this network"},
		{"0.128.0.1", "this network"},
		{"0.255.255.255", "this network"},
		{"1.0.0.0", ""},
		// 10.0.0.0/8 (RFC 1918).
		{"9.255.255.255", ""},
		{"10.0.0.0", "private"},
		{"10.128.0.1", "private"},
		{"10.255.255.255", "private"},
		{"11.0.0.0", ""},
		// 100.64.0.0/10 shared address space (RFC 6598).
		{"100.63.255.255", ""},
		{"100.64.0.0", "shared address space"},
		{"100.96.0.1", "shared address space"},
		{"100.127.255.255", "shared address space"},
		{"100.128.0.0", ""},
		// 127.0.0.0/8 loopback: all of it, not only 127.0.0.1.
		{"126.255.255.255", ""},
		{"127.0.0.0", "loopback"},
		{"127.0.0.1", "loopback"},
		{"127.0.0.2", "loopback"},
		{"127.128.0.1", "loopback"},
		{"127.255.255.255", "loopback"},
		{"128.0.0.0", ""},
		// 169.254.0.0/16 link-local (RFC 3927), with the cloud metadata address.
		{"169.253.255.255", ""},
		{"169.254.0.0", "link-local"},
		{"169.254.169.254", "link-local"},
		{"169.254.255.255", "link-local"},
		{"169.255.0.0", ""},
		// 172.16.0.0/12 (RFC 1918).
		{"172.15.255.255", ""},
		{"172.16.0.0", "private"},
		{"172.24.0.1", "private"},
		{"172.31.255.255", "private"},
		{"172.32.0.0", ""},
		// 192.0.0.0/24 IETF protocol assignments (RFC 6890).
		{"191.255.255.255", ""},
		{"192.0.0.0", "IETF protocol assignments"},
		{"192.0.0.1", "IETF protocol assignments"},
		{"192.0.0.255", "IETF protocol assignments"},
		{"192.0.1.0", ""},
		// 192.168.0.0/16 (RFC 1918).
		{"192.167.255.255", ""},
		{"192.168.0.0", "private"},
		{"192.168.128.1", "private"},
		{"192.168.255.255", "private"},
		{"192.169.0.0", ""},
		// 198.18.0.0/15 benchmarking (RFC 2544).
		{"198.17.255.255", ""},
		{"198.18.0.0", "benchmarking"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"198.20.0.0", ""},
		// 224.0.0.0/4 multicast and 240.0.0.0/4 reserved, which meet at 240.0.0.0.
		{"223.255.255.255", ""},
		{"224.0.0.0", "multicast"},
		{"224.0.0.1", "multicast"},
		{"232.0.0.1", "multicast"},
		{"239.255.255.255", "multicast"},
		{"240.0.0.0", "reserved"},
		{"240.0.0.1", "reserved"},
		{"248.0.0.1", "reserved"},
		{"255.255.255.255", "reserved"},
		// Public, TEST-NET-1..3 (RFC 5737) included: the guard must let these through.
		{"192.0.2.1", ""},
		{"198.51.100.7", ""},
		{"203.0.113.254", ""},
		{"8.8.8.8", ""},
		{"223.255.255.254", ""},

		// IPv6: unspecified and loopback (RFC 4291 §2.5.2, §2.5.3).
		{"::", "unspecified"},
		{"::1", "loopback"},
		// fe80::/10 link-local (RFC 4291 §2.5.6); a zone changes nothing.
		{"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"fe80::", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"fea0::1", "link-local"},
		{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local"},
		{"fec0::1", ""}, // deprecated site-local (RFC 3879): not in SPEC §6
		// fc00::/7 unique local (RFC 4193).
		{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"fc00::", "unique local"},
		{"fc00::1", "unique local"},
		{"fd12::1", "unique local"},
		{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique local"},
		{"fe00::", ""},
		// ff00::/8 multicast (RFC 4291 §2.7).
		{"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"ff00::", "multicast"},
		{"ff02::1", "multicast"},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "multicast"},
		// Public IPv6, documentation 2001:db8::/32 included.
		{"2001:db8::1", ""},
		{"2001:db8::1%eth0", ""},
		{"2606:4700:4700::1111", ""},

		// IPv4-mapped (RFC 4291 §2.5.5.2), dotted and hex: the same address.
		{"::ffff:10.0.0.1", "IPv4-mapped"},
		{"::ffff:a00:1", "private"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:7f00:1", "IPv4-mapped"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:a9fe:a9fe", "link-local"},
		{"::ffff:0.0.0.0", "this network"},
		{"::ffff:0:0", "this network"},
		{"::ffff:ffff:ffff", "reserved"},
		{"::ffff:100.64.0.1", "shared address space"},
		{"::ffff:192.0.2.1", ""},
		{"::ffff:c000:201", ""},
		// IPv4-compatible (RFC 4291 §2.5.5.1, deprecated).
		{"::7f00:1", "IPv4-compatible"},
		{"::10.0.0.1", "private"},
		{"::2", "this network"},
		{"::c000:201", ""},
		// NAT64 well-known prefix (RFC 6052).
		{"64:ff9b::7f00:1", "NAT64"},
		{"64:ff9b::10.0.0.1", "private"},
		{"64:ff9b::a9fe:a9fe", "link-local"},
		{"64:ff9b::c000:201", ""},
		{"64:ff9b:0:0:1::7f00:1", ""}, // outside the /96: nothing embedded there
		// 6to4 (RFC 3056).
		{"2002:7f00:1::", "6to4"},
		{"2002:a00:1::1", "private"},
		{"2002:a9fe:a9fe:1::1", "link-local"},
		{"2002:c000:201::1", ""},
		// IPv4-translated (RFC 2765, SIIT).
		{"::ffff:0:7f00:2", "IPv4-translated"},
		{"::ffff:0:10.0.0.1", "private"},
		{"::ffff:0:c000:201", ""},
	}
	for _, tt := range tests {
		reason, forbidden := netguard.Forbidden(netip.MustParseAddr(tt.addr), nil)
		switch {
		case tt.want == "" && forbidden:
			t.Errorf("Forbidden(%s) = %q; want permitted", tt.addr, reason)
		case tt.want != "" && !forbidden:
			t.Errorf("Forbidden(%s) permitted; want %q", tt.addr, tt.want)
		case tt.want != "" && !strings.Contains(reason, tt.want):
			t.Errorf("Forbidden(%s) reason %q; want it to contain %q", tt.addr, reason, tt.want)
		}
	}

	if reason, forbidden := netguard.Forbidden(netip.Addr{}, nil); !forbidden {
		t.Errorf("Forbidden(zero Addr) permitted (%q)", reason)
	}
}

// TestForbiddenEveryForm checks each IPv4 range of SPEC §6 at its first, middle and last address in every
// spelling an attacker could choose: plain, IPv4-mapped, IPv4-compatible, NAT64, 6to4 and IPv4-translated.
func TestForbiddenEveryForm(t *testing.T) {
	t.Parallel()
	ranges := []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
	}
	for _, cidr := range ranges {
		p := netip.MustParsePrefix(cidr)
		for _, a := range firstMiddleLast(p) {
			v4 := a.As4()
			forms := map[string]netip.Addr{
				"plain":           a,
				"IPv4-mapped":     netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]}),
				"IPv4-compatible": netip.AddrFrom16([16]byte{12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]}),
				"NAT64":           netip.AddrFrom16([16]byte{1: 0x64, 2: 0xff, 3: 0x9b, 12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]}),
				"6to4":            netip.AddrFrom16([16]byte{0: 0x20, 1: 0x02, 2: v4[0], 3: v4[1], 4: v4[2], 5: v4[3], 15: 1}),
				"IPv4-translated": netip.AddrFrom16([16]byte{8: 0xff, 9: 0xff, 12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]}),
			}
			for form, addr := range forms {
				if reason, forbidden := netguard.Forbidden(addr, nil); !forbidden {
					t.Errorf("%s %s (%s of %s) permitted", cidr, addr, form, a)
				} else if form != "plain" && form != "IPv4-compatible" && !strings.Contains(reason, form) {
					// IPv4-compatible ::0.0.0.x is reported as what it is first (::, ::1).
					t.Errorf("%s: reason %q does not name the %s form", addr, reason, form)
				}
			}
		}
	}
}

// firstMiddleLast returns the first, a middle and the last address of an IPv4 prefix.
func firstMiddleLast(p netip.Prefix) []netip.Addr {
	first := p.Masked().Addr()
	b := first.As4()
	n := binary.BigEndian.Uint32(b[:])
	size := uint32(1) << (32 - p.Bits())
	at := func(off uint32) netip.Addr {
		var out [4]byte
		binary.BigEndian.PutUint32(out[:], n+off)
		return netip.AddrFrom4(out)
	}
	return []netip.Addr{first, at(size/2 + 1), at(size - 1)}
}

// TestForbiddenAllowNets: the allow list (POSTMILL_WEBHOOK_ALLOW_NETS, POSTMILL_MTA_ALLOW_NETS) exempts exactly its prefixes, checked first.
func TestForbiddenAllowNets(t *testing.T) {
	t.Parallel()
	prefixes := func(s ...string) []netip.Prefix {
		out := make([]netip.Prefix, len(s))
		for i, c := range s {
			out[i] = netip.MustParsePrefix(c)
		}
		return out
	}
	tests := []struct {
		allow     []netip.Prefix
		addr      string
		forbidden bool
	}{
		{prefixes("127.0.0.1/32"), "127.0.0.1", false},
		{prefixes("127.0.0.1/32"), "::ffff:127.0.0.1", false}, // the same socket address
		{prefixes("127.0.0.1/32"), "::ffff:7f00:1", false},
		{prefixes("127.0.0.1/32"), "127.0.0.2", true},
		{prefixes("127.0.0.1/32"), "127.0.0.0", true},
		{prefixes("127.0.0.1/32"), "::1", true},
		{prefixes("127.0.0.1/32"), "10.0.0.1", true},
		{prefixes("127.0.0.1/32"), "64:ff9b::7f00:1", true}, // through a translator: not the allowed host
		{prefixes("127.0.0.1/32"), "2002:7f00:1::1", true},
		{prefixes("127.0.0.1/32"), "192.0.2.1", false},
		{prefixes("10.0.0.0/8"), "10.1.2.3", false},
		{prefixes("10.0.0.0/8"), "172.16.0.1", true},
		{prefixes("64:ff9b::/96"), "64:ff9b::7f00:1", false},
		{prefixes("fd00::/8"), "fd12::1", false},
		{prefixes("fd00::/8"), "fc00::1", true},
		{prefixes("fe80::/10"), "fe80::1%eth0", false},
		{prefixes("::ffff:10.0.0.0/104"), "10.0.0.1", true}, // a mapped prefix matches mapped addresses only
		{prefixes("::ffff:10.0.0.0/104"), "::ffff:10.0.0.1", false},
	}
	for _, tt := range tests {
		reason, forbidden := netguard.Forbidden(netip.MustParseAddr(tt.addr), tt.allow)
		if forbidden != tt.forbidden {
			t.Errorf("Forbidden(%s, %v) = %q, %v; want forbidden=%v", tt.addr, tt.allow, reason, forbidden, tt.forbidden)
		}
	}
}

// TestExplain: the sentence a person reads names the range, its prefix and its RFC, and the IPv4 address
// behind an IPv6 spelling; it refuses exactly what Forbidden refuses.
func TestExplain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr  string
		allow []netip.Prefix
		want  string // "" means permitted
	}{
		{"10.0.0.5", nil, "a private address (10.0.0.0/8, RFC 1918)"},
		{"172.20.1.1", nil, "a private address (172.16.0.0/12, RFC 1918)"},
		{"127.0.0.1", nil, "a loopback address (127.0.0.0/8, RFC 1122)"},
		{"169.254.169.254", nil, "a link-local address (169.254.0.0/16, RFC 3927)"},
		{"100.64.0.1", nil, "a carrier-grade NAT address (100.64.0.0/10, RFC 6598)"},
		{"::1", nil, "the loopback address (::1/128, RFC 4291)"},
		{"fd12::1", nil, "a unique local address (fc00::/7, RFC 4193)"},
		{"::ffff:10.0.0.5", nil, "the IPv4-mapped form of 10.0.0.5, a private address (10.0.0.0/8, RFC 1918)"},
		{"64:ff9b::7f00:1", nil, "the NAT64 (64:ff9b::/96) form of 127.0.0.1, a loopback address (127.0.0.0/8, RFC 1122)"},
		{"2002:a00:1::1", nil, "the 6to4 (2002::/16) form of 10.0.0.1, a private address (10.0.0.0/8, RFC 1918)"},
		{"10.0.0.5", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, ""},
		{"192.0.2.1", nil, ""},
		{"2001:db8::1", nil, ""},
	}
	for _, tt := range tests {
		addr := netip.MustParseAddr(tt.addr)
		what, forbidden := netguard.Explain(addr, tt.allow)
		if what != tt.want || forbidden != (tt.want != "") {
			t.Errorf("Explain(%s, %v) = %q, %v; want %q", tt.addr, tt.allow, what, forbidden, tt.want)
		}
		if _, f := netguard.Forbidden(addr, tt.allow); f != forbidden {
			t.Errorf("Explain(%s) forbidden=%v but Forbidden says %v", tt.addr, forbidden, f)
		}
	}
	if what, forbidden := netguard.Explain(netip.Addr{}, nil); !forbidden || what == "" {
		t.Errorf("Explain(zero Addr) = %q, %v; want a refusal", what, forbidden)
	}
}
