package domain

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// recordCheck is one record's result in a verify run: whether it is published as expected, what DNS
// answered at its name (Found of ports.DNSRecord) and, when it is not published, why, in words that tell
// the domain's owner what to change (Problem).
type recordCheck struct {
	ok      bool
	found   []string
	problem string
}

// Bounds on what a verify answer repeats from DNS, which is the domain owner's (or anyone's) data: a name
// may hold many TXT records of any length, and each is shown back in the API.
const (
	maxFoundRecords = 8
	maxFoundBytes   = 1024
	snippetRunes    = 24
)

// lookupFailed words a lookup that returned no answer. NXDOMAIN and NODATA mean the record is not there;
// anything else (SERVFAIL, a timeout, a refusal) is a failure of the name servers, worth another run later.
func lookupFailed(rrType, host string, err error) recordCheck {
	var de *ports.DNSError
	kind := ports.DNSTemporary
	if errors.As(err, &de) {
		kind = de.Kind
	}
	switch kind {
	case ports.DNSNotFound:
		return recordCheck{problem: fmt.Sprintf("no %s record at %s: the name does not exist (NXDOMAIN); publish the record as shown", rrType, host)}
	case ports.DNSNoData:
		problem := fmt.Sprintf("no %s record at %s: the name exists but has no %s record; publish the record as shown", rrType, host, rrType)
		if rrType == ports.RRTypeCNAME {
			problem += " (an A record, or a CNAME your DNS host proxies or flattens, does not count)"
		}
		return recordCheck{problem: problem}
	default:
		return recordCheck{problem: fmt.Sprintf("the %s lookup at %s failed (SERVFAIL, timeout or refused); verify again later", rrType, host)}
	}
}

// checkSPF applies spfPublished and, when it fails, says which of its rules the name breaks: no SPF record,
// more than one (RFC 7208 §3.2), or one without want's include.
func checkSPF(host string, txts []string, want string) recordCheck {
	c := recordCheck{ok: spfPublished(txts, want), found: foundTXT(txts)}
	if c.ok {
		return c
	}
	var policies []string
	for _, t := range txts {
		if isSPFRecord(t) {
			policies = append(policies, t)
		}
	}
	include := strings.Join(spfIncludes(want), " include:")
	switch len(policies) {
	case 0:
		c.problem = fmt.Sprintf("no SPF record (v=spf1 ...) among the TXT records at %s; publish %q", host, want)
	case 1:
		c.problem = fmt.Sprintf("the SPF record at %s does not authorise Postmill; add include:%s to it (no qualifier, before the all mechanism)", host, include)
	default:
		c.problem = fmt.Sprintf("%d SPF records at %s, and a name may hold only one (RFC 7208 §3.2): merge them into one record with include:%s", len(policies), host, include)
	}
	return c
}

// checkTXT applies txtPublished to a DKIM or DMARC record and, when it fails, says how the closest TXT
// record differs from want: where the first difference is, or that the value was cut short, which is what
// a DNS host does to a long DKIM key it does not split into several strings (RFC 6376 §3.6.2.2).
func checkTXT(typ, host string, txts []string, want string) recordCheck {
	c := recordCheck{ok: txtPublished(txts, want), found: foundTXT(txts)}
	if c.ok {
		return c
	}
	version, _, _ := strings.Cut(want, ";") // v=DKIM1, v=DMARC1
	var candidate string
	found := false
	for _, t := range txts {
		if len(t) >= len(version) && strings.EqualFold(t[:len(version)], version) {
			candidate, found = t, true
			break
		}
	}
	if !found {
		c.problem = fmt.Sprintf("no %s record (%s; ...) among the TXT records at %s; publish the value as shown", typ, version, host)
		return c
	}
	at := firstDifference(candidate, want)
	switch {
	case at == len(candidate):
		c.problem = fmt.Sprintf("the %s record at %s is cut short after %d of %d characters; publish the whole value (a DNS host that limits strings to 255 characters must split it into several, not truncate it)",
			typ, host, len(candidate), len(want))
	case at == len(want):
		c.problem = fmt.Sprintf("the %s record at %s has extra text after the expected value: %q; publish the value exactly as shown", typ, host, snippet(candidate, at))
	default:
		c.problem = fmt.Sprintf("the %s record at %s differs from the expected value at character %d: found %q, expected %q; publish the value exactly as shown",
			typ, host, at+1, snippet(candidate, at), snippet(want, at))
	}
	return c
}

// checkCNAME applies sameHost and, when it fails, names the target found and the one expected.
func checkCNAME(host, target, want string) recordCheck {
	if strings.TrimSpace(target) == "" {
		return recordCheck{problem: fmt.Sprintf("no CNAME record at %s; publish the record as shown", host)}
	}
	c := recordCheck{ok: sameHost(target, want), found: []string{printable(target, maxFoundBytes)}}
	if !c.ok {
		c.problem = fmt.Sprintf("the CNAME at %s points to %q; point it to %s", host, printable(target, 255), want)
	}
	return c
}

// foundTXT is the bounded, printable copy of a name's TXT records that a verify answer shows; nil when
// the name has none.
func foundTXT(txts []string) []string {
	if len(txts) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(txts), maxFoundRecords))
	for _, t := range txts[:min(len(txts), maxFoundRecords)] {
		out = append(out, printable(t, maxFoundBytes))
	}
	return out
}

// firstDifference is the byte index where a and b first differ, or the length of the shorter one when
// one is a prefix of the other.
func firstDifference(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// snippet is a short, printable piece of s from byte at on (moved back to the start of its rune), for a
// problem's wording.
func snippet(s string, at int) string {
	for at > 0 && at < len(s) && !utf8.RuneStart(s[at]) {
		at--
	}
	s = s[at:]
	if utf8.RuneCountInString(s) > snippetRunes {
		s = string([]rune(s)[:snippetRunes]) + "..."
	}
	return printable(s, 4*snippetRunes+3)
}

// printable replaces control characters and invalid UTF-8 in what DNS answered and cuts it at max bytes on
// a rune boundary, so that a hostile answer can neither break a log line nor grow a response.
func printable(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
