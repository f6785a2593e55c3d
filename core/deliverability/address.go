package deliverability

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits of the names a suppression holds.
const (
	// maxLocalLen is RFC 5321 §4.5.3.1.1's 64-octet local part.
	maxLocalLen = 64
	// maxDomainLen and maxLabelLen are RFC 1035 §2.3.4's name and label limits.
	maxDomainLen = 253
	maxLabelLen  = 63
)

// Violation messages of the address field. They say what is expected and never echo the value.
const (
	msgAddressRequired  = "is required"
	msgAddressForm      = "must be an email address (local@domain) or a bare domain"
	msgBareDomainScope  = "must be a bare domain for scope domain"
	msgAddressScope     = "must be an email address (local@domain) for scope recipient"
	msgLocalPartTooLong = "local part must be at most 64 characters"
)

// normaliseAddress trims and lower-cases a suppression's address, the form in which the send path looks
// suppressions up (it lower-cases recipients and their domains before asking).
func normaliseAddress(raw string) string { return strings.ToLower(strings.TrimSpace(raw)) }

// checkSuppressionAddress returns why a normalised suppression address is neither an address nor a bare
// domain, or "" when it is one of them.
func checkSuppressionAddress(a string) string {
	if a == "" {
		return msgAddressRequired
	}
	if strings.Contains(a, "@") {
		return checkAddress(a)
	}
	if checkDomain(a) != "" {
		return msgAddressForm
	}
	return ""
}

// checkAddress returns why a lower-cased a is not local@domain, or "" when it is: exactly one "@", a local
// part that is an RFC 5322 §3.4.1 dot-atom (UTF-8 allowed, RFC 6532 §3.2) of at most 64 octets, and a domain
// in the send path's grammar (checkDomain). Quoted local parts are refused because the send path refuses
// them too: a suppression of an address that can never be sent to would only mislead.
func checkAddress(a string) string {
	local, domain, ok := strings.Cut(a, "@")
	if !ok || strings.Contains(domain, "@") || local == "" {
		return msgAddressForm
	}
	if len(local) > maxLocalLen {
		return msgLocalPartTooLong
	}
	if !dotAtom(local) {
		return msgAddressForm
	}
	if checkDomain(domain) != "" {
		return msgAddressForm
	}
	return ""
}

// dotAtom reports whether s is atext separated by single dots (RFC 5322 §3.2.3), where atext includes
// non-ASCII UTF-8 (RFC 6532 §3.2).
func dotAtom(s string) bool {
	if !utf8.ValidString(s) || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		if r >= utf8.RuneSelf {
			continue
		}
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-/=?^_`{|}~", r) {
			return false
		}
	}
	return true
}

// checkDomain returns why a lower-cased d breaks the send path's domain grammar, or "" when it does not:
// dot-separated labels of a-z, 0-9 and hyphen (RFC 1035 §2.3.1, RFC 1123 §2.1), 1-63 characters each, none
// starting or ending with a hyphen, at least one dot, at most 253 characters. Address literals and
// internationalised names are refused, as the send path refuses them.
func checkDomain(d string) string {
	if d == "" {
		return "is required"
	}
	if len(d) > maxDomainLen {
		return fmt.Sprintf("must be at most %d characters", maxDomainLen)
	}
	if !strings.Contains(d, ".") {
		return "must contain at least one dot"
	}
	for label := range strings.SplitSeq(d, ".") {
		if label == "" || len(label) > maxLabelLen {
			return fmt.Sprintf("each label must be 1 to %d characters", maxLabelLen)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "a label must not start or end with a hyphen"
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return "labels may contain only a-z, 0-9 and hyphen"
			}
		}
	}
	return ""
}
