// Package bounceclass tells what a refusal of mail means, at a finer grain than hard and soft: a mailbox that
// does not exist, a full one, a spam block, a DMARC failure, throttling, ... (the ports.BounceClass* values).
// It knows the RFC 3463 enhanced status codes and the words the large mailbox providers and the common mail
// servers use, and it decides which classes mean that an address will never work (Suppresses).
//
// Both places that learn of a refusal use it: the delivery path (core/sending) for the SMTP reply the MTA
// reports, and the feedback path (core/deliverability) for each recipient of a delivery status notification.
// It is its own package because core/deliverability imports core/sending.
package bounceclass

import (
	"strings"

	"github.com/postmill/postmill/ports"
)

// Reply is what a receiving server said about one recipient: an SMTP reply, or a DSN's Status and
// Diagnostic-Code (RFC 3464 §2.3.4, §2.3.6).
type Reply struct {
	// Code is the basic SMTP reply code (RFC 5321 §4.2), such as "550"; "" when none is known.
	Code string
	// Status is the RFC 3463 enhanced status code, such as "5.1.1"; "" when none is known. An enhanced
	// code found in Text is considered after it.
	Status string
	// Text is the server's words, the codes included or not.
	Text string
}

// maxText bounds how much of a reply is matched: a reply is a line or a few (the MTA keeps 512 bytes of
// one), so a longer text is a peer's noise.
const maxText = 4096

// Parse splits an SMTP reply as the MTA reports it ("550 5.1.1 <a@b>: user unknown", "550-5.1.1 The email
// account ...", "4.4.2 connection failed: ...") into its reply code and enhanced status code, each "" when
// the reply does not begin with one. The whole reply is the text.
func Parse(s string) Reply {
	s = strings.TrimSpace(s)
	r := Reply{Text: s}
	rest := s
	if len(rest) >= 3 && (rest[0] == '4' || rest[0] == '5') && isDigit(rest[1]) && isDigit(rest[2]) &&
		(len(rest) == 3 || rest[3] == ' ' || rest[3] == '-') {
		r.Code = rest[:3]
		rest = strings.TrimLeft(rest[3:], " -")
	}
	if code, ok := leadingStatus(rest); ok {
		r.Status = code
	}
	return r
}

// ClassifyReply is Classify(Parse(reply)), for an SMTP reply as the MTA reports it.
func ClassifyReply(reply string) string { return Classify(Parse(reply)) }

// Classify returns the class of a refusal, one of the ports.BounceClass* values. The tiers, in order, each
// a table of rules.go:
//
//  1. statusRules: an enhanced status code whose subject and detail (RFC 3463 §3) say one thing and that
//     providers use for it, such as X.1.1 (bad destination mailbox) or X.2.2 (mailbox full); a rule may also
//     require words, for codes that one provider uses in its own way (Exchange Online's 5.4.1 "Recipient
//     address rejected: Access denied" is an unknown user). The Status field is looked at first, then an
//     enhanced code in the text.
//  2. textRules: the words of the large providers and of Postfix and Exim, for the many replies whose code
//     is generic (5.7.1, 5.0.0, 4.7.0) or absent.
//  3. subjectRules: what is left of the enhanced code's subject: X.4 routing, X.5 protocol, X.6 content,
//     X.7 policy.
//  4. codeRules: the basic reply code (RFC 5321 §4.2.3, RFC 7504): 552 mailbox full, 556 domain takes no
//     mail, 5yz syntax errors.
//  5. Otherwise transient for a 4 class (a temporary failure with nothing more said), unknown for the rest.
func Classify(r Reply) string {
	text := r.Text
	if len(text) > maxText {
		text = text[:maxText]
	}
	text = strings.ToLower(text)
	statuses := make([]string, 0, 2)
	if s := strings.TrimSpace(r.Status); validStatus(s) {
		statuses = append(statuses, s)
	}
	if s := statusIn(text); s != "" && (len(statuses) == 0 || s != statuses[0]) {
		statuses = append(statuses, s)
	}
	class := byte(0)
	switch {
	case len(statuses) > 0:
		class = statuses[0][0]
	case r.Code != "":
		class = r.Code[0]
	}

	for _, s := range statuses {
		for _, rl := range compiled.status {
			if rl.matchesStatus(s) && rl.matchesText(text) {
				return rl.class
			}
		}
	}
	for _, rl := range compiled.text {
		if (rl.only == 0 || rl.only == class) && rl.matchesText(text) {
			return rl.class
		}
	}
	for _, s := range statuses {
		for _, rl := range compiled.subject {
			if rl.matchesStatus(s) {
				return rl.class
			}
		}
	}
	if r.Code != "" {
		for _, rl := range compiled.code {
			if rl.code == r.Code || (len(rl.code) == 1 && rl.code[0] == r.Code[0]) {
				return rl.class
			}
		}
	}
	if class == '4' {
		return ports.BounceClassTransient
	}
	return ports.BounceClassUnknown
}

// Suppresses reports whether a hard bounce of class means the address will never work, so that sending to
// it again only hurts the sender's reputation: the mailbox or the domain does not exist, or the mailbox was
// disabled. A spam or policy block, an authentication failure, a full mailbox or a refusal nobody can read
// says something about the message or the sender, not about the address: the recipient is bounced, the
// address is not suppressed.
func Suppresses(class string) bool {
	switch class {
	case ports.BounceClassBadMailbox, ports.BounceClassBadDomain, ports.BounceClassInactiveMailbox:
		return true
	}
	return false
}

// Classes lists every class Classify returns, in the order of ports.
func Classes() []string {
	return []string{
		ports.BounceClassBadMailbox, ports.BounceClassBadDomain, ports.BounceClassInactiveMailbox,
		ports.BounceClassMailboxFull, ports.BounceClassMessageTooLarge, ports.BounceClassPolicyBlock,
		ports.BounceClassSpamBlock, ports.BounceClassAuthentication, ports.BounceClassRateLimited,
		ports.BounceClassRouting, ports.BounceClassRelayDenied, ports.BounceClassProtocol,
		ports.BounceClassContent, ports.BounceClassTransient, ports.BounceClassUnknown,
	}
}

// leadingStatus returns the enhanced status code s begins with.
func leadingStatus(s string) (string, bool) {
	end := strings.IndexAny(s, " \t")
	if end < 0 {
		end = len(s)
	}
	code := s[:end]
	if validStatus(code) {
		return code, true
	}
	return "", false
}

// validStatus reports whether s is exactly class.subject.detail (RFC 3463 §2) with class 4 or 5: subject
// and detail of one to three digits.
func validStatus(s string) bool {
	if len(s) < 5 || (s[0] != '4' && s[0] != '5') || s[1] != '.' {
		return false
	}
	parts := strings.Split(s[2:], ".")
	if len(parts) != 2 {
		return false
	}
	for _, p := range parts {
		if len(p) < 1 || len(p) > 3 {
			return false
		}
		for i := 0; i < len(p); i++ {
			if !isDigit(p[i]) {
				return false
			}
		}
	}
	return true
}

// statusIn returns the first enhanced status code of class 4 or 5 standing alone in s: not inside a longer
// dotted number such as an IP address or Yahoo's "4.16.55.1", and not glued to a digit.
func statusIn(s string) string {
	for i := 0; i+5 <= len(s); i++ {
		if s[i] != '4' && s[i] != '5' {
			continue
		}
		if i > 0 && (isDigit(s[i-1]) || s[i-1] == '.') {
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
			for j < len(s) && isDigit(s[j]) {
				j++
				n++
			}
			ok = n >= 1 && n <= 3
		}
		if !ok {
			continue
		}
		if j < len(s) && (isDigit(s[j]) || s[j] == '.' && j+1 < len(s) && isDigit(s[j+1])) {
			continue
		}
		return s[i:j]
	}
	return ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
