package tlspolicy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// STS policy modes (RFC 8461 §3.2).
const (
	stsEnforce = "enforce"
	stsTesting = "testing"
	stsNone    = "none"
)

// maxMaxAge is the largest max_age a policy may give: one year (RFC 8461 §3.2).
const maxMaxAge = 31557600

// maxPolicyMX bounds the mx lines kept from one policy: a hostile policy host could send thousands, and
// every delivery to the domain matches its MX hosts against them.
const maxPolicyMX = 64

// stsPolicy is a parsed MTA-STS policy (RFC 8461 §3.2).
type stsPolicy struct {
	mode   string
	mx     []string // patterns, lower-case, without a trailing dot; "*.example.net" matches one label
	maxAge time.Duration
	text   []string // the policy's lines as fetched, for the TLS-RPT policy-string (RFC 8460 §4.4)
}

// stsRecordID returns the id of an MTA-STS TXT record set (RFC 8461 §3.1): records not starting with
// "v=STSv1;" are ignored, and anything but exactly one remaining, well-formed record means the domain has no
// policy available (ok false).
func stsRecordID(records []string) (id string, ok bool) {
	found := 0
	for _, r := range records {
		fields := strings.Split(r, ";")
		if strings.TrimSpace(fields[0]) != "v=STSv1" || !strings.HasPrefix(r, "v=STSv1") {
			continue
		}
		found++
		id = ""
		for _, f := range fields[1:] {
			k, v, has := strings.Cut(strings.TrimSpace(f), "=")
			if !has {
				if strings.TrimSpace(f) != "" {
					id = "" // a field that is not key=value: the record is invalid
					break
				}
				continue
			}
			if k == "id" {
				id = v
			}
		}
	}
	if found != 1 || !validID(id) {
		return "", false
	}
	return id, true
}

// validID checks sts-id = 1*32(ALPHA / DIGIT) (RFC 8461 §3.1).
func validID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// parseSTSPolicy parses a policy body (RFC 8461 §3.2): "key: value" lines separated by CRLF (a bare LF is
// accepted, as most senders do), unknown keys ignored. version must be STSv1, mode one of enforce, testing
// and none, max_age at most a year; enforce and testing need at least one mx.
func parseSTSPolicy(body string) (*stsPolicy, error) {
	p := &stsPolicy{maxAge: -1}
	var version string
	for line := range strings.SplitSeq(body, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %q is not key: value", clip(line))
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if len(p.text) < maxPolicyMX+8 {
			p.text = append(p.text, k+": "+v)
		}
		switch k {
		case "version":
			if version != "" {
				return nil, errors.New("version given twice")
			}
			version = v
		case "mode":
			if p.mode != "" {
				return nil, errors.New("mode given twice")
			}
			p.mode = v
		case "max_age":
			if p.maxAge >= 0 {
				return nil, errors.New("max_age given twice")
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || len(v) > 10 || n > maxMaxAge {
				return nil, fmt.Errorf("max_age %q is not a number of seconds up to %d", clip(v), maxMaxAge)
			}
			p.maxAge = time.Duration(n) * time.Second
		case "mx":
			pattern, err := mxPattern(v)
			if err != nil {
				return nil, err
			}
			if len(p.mx) >= maxPolicyMX {
				return nil, fmt.Errorf("more than %d mx lines", maxPolicyMX)
			}
			p.mx = append(p.mx, pattern)
		}
	}
	switch {
	case version != "STSv1":
		return nil, fmt.Errorf("version %q is not STSv1", clip(version))
	case p.mode != stsEnforce && p.mode != stsTesting && p.mode != stsNone:
		return nil, fmt.Errorf("mode %q is not enforce, testing or none", clip(p.mode))
	case p.maxAge < 0:
		return nil, errors.New("max_age missing")
	case p.mode != stsNone && len(p.mx) == 0:
		return nil, errors.New("no mx in a policy that is not mode none")
	}
	return p, nil
}

// mxPattern checks and normalizes one mx value: a host name, optionally with "*." in front (RFC 8461 §3.2).
func mxPattern(v string) (string, error) {
	v = strings.TrimSuffix(strings.ToLower(v), ".")
	host := strings.TrimPrefix(v, "*.")
	if !validHostname(host) || strings.Contains(host, "*") {
		return "", fmt.Errorf("mx %q is not a host name pattern", clip(v))
	}
	return v, nil
}

// validHostname accepts LDH host names of at least two labels (no IP literals, no empty labels).
func validHostname(h string) bool {
	if len(h) == 0 || len(h) > 253 || !strings.Contains(h, ".") {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// matches reports whether host (lower-case, no trailing dot) is one of the policy's MX patterns. A wildcard
// stands for exactly one leftmost label: "*.example.net" matches "mx1.example.net", not "example.net" nor
// "a.b.example.net" (RFC 8461 §4.1).
func (p *stsPolicy) matches(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, pat := range p.mx {
		if rest, wild := strings.CutPrefix(pat, "*."); wild {
			if first, parent, ok := strings.Cut(host, "."); ok && first != "" && parent == rest {
				return true
			}
			continue
		}
		if host == pat {
			return true
		}
	}
	return false
}

// clip bounds text taken from a peer before it goes into an error.
func clip(s string) string {
	const n = 64
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
