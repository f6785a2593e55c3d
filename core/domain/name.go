package domain

import (
	"fmt"
	"strings"

	"github.com/postmill/postmill/ports"
)

// Limits of the domain-name grammar (SPEC §4.3, following RFC 1035 §2.3.4 and RFC 1123 §2.1).
const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// normaliseName trims and lower-cases a requested domain and checks SPEC §4.3's grammar: dot-separated labels
// of a-z, 0-9 and hyphen, 1-63 characters each, none starting or ending with a hyphen, at least one dot, at
// most 253 characters in all. A violation is a validation error on the path "domain".
func normaliseName(raw string) (string, error) {
	name := strings.ToLower(strings.TrimSpace(raw))
	if msg := CheckName(name); msg != "" {
		return "", ports.ValidationError(ports.FieldViolation{Path: "domain", Message: msg})
	}
	return name, nil
}

// CheckName returns why name breaks SPEC §4.3's domain grammar, or "" when it does not. It expects a
// lower-cased name. Other areas that accept a domain (suppressions of a bare domain) use it, so one grammar
// holds everywhere.
func CheckName(name string) string {
	if name == "" {
		return "is required"
	}
	if len(name) > maxNameLen {
		return fmt.Sprintf("must be at most %d characters", maxNameLen)
	}
	if !strings.Contains(name, ".") {
		return "must contain at least one dot"
	}
	for label := range strings.SplitSeq(name, ".") {
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
