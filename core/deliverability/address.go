package deliverability

import (
	"strings"
	"unicode/utf8"

	domainname "github.com/postmill/postmill/core/domain"
)

// Limits of the names a suppression holds.
const (
	// maxLocalLen is RFC 5321 §4.5.3.1.1's 64-octet local part.
	maxLocalLen = 64
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
	if domainname.CheckName(a) != "" {
		return msgAddressForm
	}
	return ""
}

// checkAddress returns why a lower-cased a is not local@domain, or "" when it is: exactly one "@", a local
// part that is an RFC 5322 §3.4.1 dot-atom (UTF-8 allowed, RFC 6532 §3.2) of at most 64 octets, and a domain
// in the send path's grammar (domainname.CheckName). Quoted local parts are refused because the send path refuses
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
	if domainname.CheckName(domain) != "" {
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
