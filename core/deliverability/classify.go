package deliverability

import (
	"strings"

	"github.com/postmill/postmill/core/deliverability/bounceclass"
	"github.com/postmill/postmill/ports"
)

// DSN actions (RFC 3464 §2.3.3), lower-cased.
const (
	actionFailed    = "failed"
	actionDelayed   = "delayed"
	actionDelivered = "delivered"
	actionRelayed   = "relayed"
	actionExpanded  = "expanded"
)

// classification is what one per-recipient part of a bounce means to Postmill.
type classification struct {
	// Type is ports.BounceHard, ports.BounceSoft, or "" when the part reports no failure (delivered,
	// relayed, expanded, or nothing to judge by).
	Type string
	// Status is the RFC 3463 enhanced code the part gave, or the one found in its diagnostic code; "" when
	// there is none.
	Status string
	// Class is what the failure means (bounceclass.Classify of the Status and the diagnostic code); "" when
	// the part reports no failure.
	Class string
}

// classify decides whether one per-recipient part of a bounce is a hard bounce, a soft one, or no failure:
//
//   - Action delivered, relayed or expanded (RFC 3464 §2.3.3) reports success or a hand-over: nothing to
//     record, whatever the status says.
//   - Action delayed is soft whatever the status: the reporting MTA is still trying.
//   - Otherwise the status class decides (RFC 3463 §2): 5 (permanent failure) is hard, 4 (persistent
//     transient failure) is soft. Without a usable Status field, the class comes from the diagnostic code:
//     an enhanced code X.Y.Z in its text, else an SMTP reply code (RFC 5321 §4.2.1: 5yz permanent, 4yz
//     transient); an enhanced code found this way becomes the classification's Status.
//   - With no class at all, Action failed is hard: the reporter says it gave up on the address.
//
// Anything else (an unknown action with no code) is no failure: suppressing an address needs a reason.
//
// A failure's Class comes from the Status field, the diagnostic code's enhanced code and reply code, and
// its words (bounceclass.Classify): whether a hard bounce suppresses the address depends on it.
func classify(d ports.DSNRecipient) classification {
	action := strings.ToLower(strings.TrimSpace(d.Action))
	switch action {
	case actionDelivered, actionRelayed, actionExpanded:
		return classification{}
	}
	diag := diagnosticText(d.DiagnosticCode)
	reply := replyCode(diag)
	status := enhancedCode(strings.TrimSpace(d.Status), true)
	class := byte(0)
	if status != "" {
		class = status[0]
	} else if status = enhancedCode(diag, false); status != "" {
		class = status[0]
	} else if reply != "" {
		class = reply[0]
	}
	c := classification{Status: status}
	switch {
	case action == actionDelayed:
		c.Type = ports.BounceSoft
	case class == '5':
		c.Type = ports.BounceHard
	case class == '4':
		c.Type = ports.BounceSoft
	case action == actionFailed:
		c.Type = ports.BounceHard
	}
	if c.Type != "" {
		// A class-2 Status (a delayed part may carry one) tells nothing about the failure.
		s := status
		if s != "" && s[0] == '2' {
			s = ""
		}
		c.Class = bounceclass.Classify(bounceclass.Reply{Code: reply, Status: s, Text: diag})
	}
	return c
}

// classifyRecorded gives each bounce recorded before bounces had a class the class of what its record
// kept: the status and the diagnostic code.
func classifyRecorded(bounces []ports.Bounce) {
	for i, b := range bounces {
		if b.Class == "" {
			diag := diagnosticText(b.DiagnosticCode)
			bounces[i].Class = bounceclass.Classify(bounceclass.Reply{Code: replyCode(diag), Status: b.Status, Text: diag})
		}
	}
}

// severity orders classifications so that when one report says two things about one recipient, the
// stronger one wins: a hard bounce over a soft one over none.
func (c classification) severity() int {
	switch c.Type {
	case ports.BounceHard:
		return 2
	case ports.BounceSoft:
		return 1
	}
	return 0
}

// diagnosticText drops the diagnostic-type of a Diagnostic-Code value (RFC 3464 §2.3.6: "smtp; 550 ...",
// "X-Postfix; ..."), leaving the remote server's words.
func diagnosticText(s string) string {
	s = strings.TrimSpace(s)
	if typ, rest, ok := strings.Cut(s, ";"); ok && isDiagnosticType(strings.TrimSpace(typ)) {
		return strings.TrimSpace(rest)
	}
	return s
}

// isDiagnosticType reports whether s is an atom such as smtp or x-unix (RFC 3464 §2.3.6 diagnostic-type).
func isDiagnosticType(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// enhancedCode returns the first RFC 3463 §2 status code class.subject.detail in s: class 2, 4 or 5, subject
// and detail of one to three digits. whole requires s to begin with it (a Status field, which may carry a
// comment after the code); otherwise the code may stand anywhere in s, but not inside a longer dotted number
// such as an IP address. Class 2 counts only in a Status field: in free text only 4 and 5 say anything
// about a failure.
func enhancedCode(s string, whole bool) string {
	for i := 0; i < len(s); i++ {
		if i > 0 && (isDigit(s[i-1]) || s[i-1] == '.') {
			continue
		}
		c := s[i]
		if c != '4' && c != '5' && (c != '2' || !whole) {
			if whole {
				return ""
			}
			continue
		}
		j := i + 1
		ok := true
		for part := 0; part < 2 && ok; part++ {
			if j >= len(s) || s[j] != '.' {
				ok = false
				break
			}
			j++
			n := 0
			for j < len(s) && isDigit(s[j]) && n < 4 {
				j++
				n++
			}
			ok = n >= 1 && n <= 3
		}
		if ok && j < len(s) && (isDigit(s[j]) || s[j] == '.' && j+1 < len(s) && isDigit(s[j+1])) {
			ok = false
		}
		if ok {
			return s[i:j]
		}
		if whole {
			return ""
		}
	}
	return ""
}

// replyCode returns the first SMTP reply code 4yz or 5yz (RFC 5321 §4.2.1: y is 0-5) standing alone in s,
// that is not next to another digit, a dot or a letter.
func replyCode(s string) string {
	for i := 0; i+3 <= len(s); i++ {
		if i > 0 && (isAlnum(s[i-1]) || s[i-1] == '.') {
			continue
		}
		if (s[i] != '4' && s[i] != '5') || s[i+1] < '0' || s[i+1] > '5' || !isDigit(s[i+2]) {
			continue
		}
		if i+3 < len(s) && (isAlnum(s[i+3]) || s[i+3] == '.') {
			continue
		}
		return s[i : i+3]
	}
	return ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
