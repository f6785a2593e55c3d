package marketing

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// Violation messages: they say what is expected and never echo the value.
const (
	msgRequired     = "is required"
	msgEmail        = "must be a valid email address"
	msgNoCRLF       = "must not contain CR or LF"
	msgStorable     = "must be valid UTF-8 without NUL characters"
	msgConsent      = "must be one of subscribed, unsubscribed, pending"
	msgPropertyKind = "must be a string, number, boolean or null"
	msgImmutable    = "cannot be changed"
)

func maxChars(n int) string { return fmt.Sprintf("must be at most %d characters", n) }

// violations collects field violations in the order found.
type violations []ports.FieldViolation

func (v *violations) add(path, msg string) {
	*v = append(*v, ports.FieldViolation{Path: path, Message: msg})
}

func (v violations) err() error {
	if len(v) == 0 {
		return nil
	}
	return ports.ValidationError(v...)
}

// storable reports whether PostgreSQL can keep s as text.
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// checkText checks an optional string field against a length bound in characters.
func (v *violations) checkText(path string, s *string, limit int) {
	if s == nil {
		return
	}
	switch {
	case !storable(*s):
		v.add(path, msgStorable)
	case utf8.RuneCountInString(*s) > limit:
		v.add(path, maxChars(limit))
	}
}

// NormalizeEmail trims and lower-cases an address (SPEC §2 Contact).
func NormalizeEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// checkEmail checks a normalised address: required, at most 320 characters, no CR or LF, and one "@"
// between a local part and a domain without spaces or control characters.
func (v *violations) checkEmail(path, email string) {
	switch {
	case email == "":
		v.add(path, msgRequired)
	case strings.ContainsAny(email, "\r\n"):
		v.add(path, msgNoCRLF)
	case len(email) > ports.MaxContactEmailLen:
		v.add(path, maxChars(ports.MaxContactEmailLen))
	case !plausibleEmail(email):
		v.add(path, msgEmail)
	}
}

func plausibleEmail(s string) bool {
	if !storable(s) {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	if at < 1 || at == len(s)-1 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == '<' || r == '>' || r == ',' {
			return false
		}
	}
	domain := s[at+1:]
	return !strings.Contains(domain, "@") && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".")
}

func validConsent(s string) bool {
	return s == ports.ConsentSubscribed || s == ports.ConsentUnsubscribed || s == ports.ConsentPending
}

// checkContact checks every field bound of a contact body (SPEC §2 Contact) under prefix ("" or
// "contacts.3."). withEmail checks (and normalises) the email, as on create and import.
func checkContact(prefix string, in *ports.ContactInput, withEmail bool) violations {
	var v violations
	if withEmail {
		in.Email = NormalizeEmail(in.Email)
		v.checkEmail(prefix+"email", in.Email)
	}
	v.checkText(prefix+"firstName", in.FirstName, ports.MaxContactNameLen)
	v.checkText(prefix+"lastName", in.LastName, ports.MaxContactNameLen)
	v.checkText(prefix+"locale", in.Locale, ports.MaxContactLocaleLen)
	v.checkText(prefix+"timezone", in.Timezone, ports.MaxContactTimezoneLen)
	v.checkText(prefix+"source", in.Source, ports.MaxContactSourceLen)
	v.checkText(prefix+"consentSource", in.ConsentSource, ports.MaxConsentSourceLen)
	v.checkText(prefix+"consentIp", in.ConsentIP, ports.MaxConsentIPLen)
	if in.ConsentStatus != nil && !validConsent(*in.ConsentStatus) {
		v.add(prefix+"consentStatus", msgConsent)
	}
	v = append(v, checkProperties(prefix+"properties", in.Properties)...)
	return v
}

// checkProperties checks a properties map: at most 100 keys of 1-64 characters, values a string of at
// most 1024 characters, a finite number, a boolean or null.
func checkProperties(path string, props map[string]any) violations {
	var v violations
	if len(props) > ports.MaxContactProperties {
		v.add(path, fmt.Sprintf("must have at most %d keys", ports.MaxContactProperties))
		return v
	}
	for _, k := range slices.Sorted(maps.Keys(props)) {
		val := props[k]
		kp := path + "." + k
		if k == "" || utf8.RuneCountInString(k) > ports.MaxContactPropertyKey || !storable(k) {
			v.add(path, fmt.Sprintf("keys must be 1 to %d characters", ports.MaxContactPropertyKey))
			continue
		}
		switch x := val.(type) {
		case nil, bool:
		case string:
			if !storable(x) {
				v.add(kp, msgStorable)
			} else if utf8.RuneCountInString(x) > ports.MaxContactPropertyValue {
				v.add(kp, maxChars(ports.MaxContactPropertyValue))
			}
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				v.add(kp, msgPropertyKind)
			}
		case int:
			props[k] = float64(x)
		case int64:
			props[k] = float64(x)
		default:
			v.add(kp, msgPropertyKind)
		}
	}
	return v
}
