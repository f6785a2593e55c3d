package account

import (
	"net/mail"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// Field bounds of SPEC §4.1 and §2.
const (
	maxEmailLen       = 320 // RFC 5321 §4.5.3.1: 64-octet local part, @, 255-octet domain
	minPasswordLen    = 8
	maxPasswordLen    = 1024 // argon2 hashes any length; the cap only bounds request work
	maxOrgNameLen     = 120
	maxSlugLen        = 63 // fits a DNS label (RFC 1035 §2.3.4), should a slug ever become one
	maxAPIKeyNameLen  = 100
	fallbackSlug      = "org"
	totpDigits        = 6
	violationEmail    = "must be a valid email address"
	violationPassword = "must be 8 to 1024 characters"
)

// normaliseEmail trims and lower-cases an address and accepts it only when it is a bare addr-spec
// (RFC 5322 §3.4.1) that net/mail parses, with a dotted domain, at most 320 characters and no CR or LF.
// Lower-casing the whole address is a product rule (SPEC §2): one person, one account, whatever the case.
func normaliseEmail(raw string) (string, bool) {
	if !utf8.ValidString(raw) { // checked first: ToLower would turn invalid bytes into U+FFFD
		return "", false
	}
	s := strings.ToLower(strings.TrimSpace(raw))
	if s == "" || utf8.RuneCountInString(s) > maxEmailLen || strings.ContainsAny(s, "\r\n") {
		return "", false
	}
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Name != "" || addr.Address != s {
		return "", false
	}
	at := strings.LastIndexByte(s, '@')
	if at <= 0 {
		return "", false
	}
	domain := s[at+1:]
	if !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") ||
		strings.Contains(domain, "..") || strings.ContainsAny(domain, "[]") {
		return "", false
	}
	return s, true
}

// validPassword bounds a password's length in characters. No composition rules: length is what resists
// guessing, and the argon2id hash does the rest.
func validPassword(p string) bool {
	n := utf8.RuneCountInString(p)
	return n >= minPasswordLen && n <= maxPasswordLen
}

// validText accepts a trimmed, valid UTF-8 string of min..max characters without control characters, which
// PostgreSQL text columns (NUL) and dashboards (CR, LF) cannot carry safely.
func validText(s string, minLen, maxLen int) bool {
	if !utf8.ValidString(s) {
		return false
	}
	n := utf8.RuneCountInString(s)
	if n < minLen || n > maxLen {
		return false
	}
	return strings.IndexFunc(s, unicode.IsControl) < 0
}

// organizationNameAndSlug picks the new organization's name and slug. An empty requested name means none was
// given: the name is then the email's local part (SPEC §4.1). The slug always follows from the name.
func organizationNameAndSlug(requested, email string) (name, slug string, ok bool) {
	if requested == "" {
		local := email[:strings.LastIndexByte(email, '@')]
		name = truncateRunes(local, maxOrgNameLen)
		return name, slugify(name), true
	}
	name = strings.TrimSpace(requested)
	if !validText(name, 1, maxOrgNameLen) {
		return "", "", false
	}
	return name, slugify(name), true
}

// slugify reduces a name to lower-case ASCII letters and digits joined by single hyphens, at most 63
// characters, never starting or ending with a hyphen. A name with nothing usable gets "org"; uniqueness is the
// store's business (constraint organizations_slug_key), not a retry loop here.
func slugify(name string) string {
	var b strings.Builder
	pendingHyphen := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if pendingHyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			pendingHyphen = false
			b.WriteRune(r)
			continue
		}
		pendingHyphen = true
	}
	s := b.String()
	if len(s) > maxSlugLen {
		s = strings.TrimRight(s[:maxSlugLen], "-")
	}
	if s == "" {
		return fallbackSlug
	}
	return s
}

func truncateRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// normaliseScopes applies SPEC §5 rule 9: nil means the default scopes, every member must be in the vocabulary
// or "*", and duplicates are dropped keeping the first occurrence so the stored order is the caller's.
func normaliseScopes(scopes []string) ([]string, []ports.FieldViolation) {
	if scopes == nil {
		return append([]string(nil), ports.DefaultScopes...), nil
	}
	out := make([]string, 0, len(scopes))
	seen := make(map[string]bool, len(scopes))
	var violations []ports.FieldViolation
	for i, s := range scopes {
		if !ports.ValidScope(s) {
			violations = append(violations, ports.FieldViolation{
				Path:    "scopes." + strconv.Itoa(i),
				Message: "unknown scope",
			})
			continue
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, violations
}

// validTOTPCode accepts exactly six ASCII digits (RFC 6238 §5.3 with the 6-digit truncation of RFC 4226 §5.3).
func validTOTPCode(code string) bool {
	if len(code) != totpDigits {
		return false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < '0' || code[i] > '9' {
			return false
		}
	}
	return true
}
