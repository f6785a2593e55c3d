package ports

import (
	"net/mail"
	"strings"
	"unicode/utf8"
)

const (
	// MaxAddressChars is RFC 5321 §4.5.3.1's 64-octet local part, "@" and 255-octet domain.
	MaxAddressChars = 320
	// maxDomainLen and maxLabelLen are RFC 1035 §2.3.4's name and label limits.
	maxDomainLen = 253
	maxLabelLen  = 63
)

// ValidAddrSpec accepts a bare addr-spec (RFC 5322 §3.4.1) that net/mail parses to itself, with no display
// name, angle brackets, comments or quoted local part, at most 320 characters, and a dotted host name
// domain (ValidDomain). It is the rule for the address part of every mailbox: that part is what is matched
// against suppressions, grouped by domain and stored as a recipient's address.
func ValidAddrSpec(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxAddressChars || strings.ContainsAny(s, "\r\n\x00") {
		return false
	}
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Name != "" || addr.Address != s {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	return at > 0 && ValidDomain(s[at+1:])
}

// ValidDomain accepts a dotted host name of ASCII letters, digits and hyphens (RFC 1035 §2.3.1 preferred name
// syntax, RFC 5321 §4.1.2 Domain): labels of 1-63 characters not starting or ending with a hyphen, at most
// 253 characters. Address literals ([192.0.2.1]) and internationalised names are refused: the MTA delivers
// to MX hosts of ASCII names only.
func ValidDomain(d string) bool {
	if len(d) == 0 || len(d) > maxDomainLen || !strings.Contains(d, ".") {
		return false
	}
	for label := range strings.SplitSeq(d, ".") {
		if len(label) == 0 || len(label) > maxLabelLen || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
