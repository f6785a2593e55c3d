package sending

import (
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// A mailbox is an address as users and mail libraries write it (RFC 5322 §3.4): a bare address
// ("ada@example.org"), the same in angle brackets, or a display name with it ("Ada Lovelace
// <ada@example.org>", `"Lovelace, Ada" <ada@example.org>`, "=?utf-8?q?Ad=C3=A1?= <ada@example.org>"). Resend
// and Postmark accept these in every address field of a send, and Postmill does too: the address part alone
// is validated, compared against suppressions, grouped by domain and metered; the display name is kept for
// the To and Cc header fields (ports.Recipient.Name) or, for from and replyTo, stays in the value.

// msgDisplayName refuses a display name that could not be written as one header line.
const msgDisplayName = "display name must not contain control characters"

// maxMailboxInput bounds a value before it is parsed at all. It is far above what a valid mailbox needs,
// so that a canonical form (normaliseMailbox), which RFC 2047 makes up to about fourteen times as long as
// its name, validates again.
const maxMailboxInput = 16 << 10

// parseMailbox splits one mailbox into its decoded display name ("" when there is none) and its bare
// address. It fails for anything that is not exactly one mailbox: a list, a group, a value with CR, LF or
// NUL, one whose name and address would not fit a header line (RFC 5322 §2.1.1: 998 characters, counted
// on the decoded name so that every spelling of a mailbox is judged alike), one whose address fails
// validAddrSpec. nameOK is false when the display name decodes (RFC 2047) to control characters, which a
// header line cannot carry.
func parseMailbox(raw string) (name, addr string, ok, nameOK bool) {
	s := strings.TrimSpace(raw)
	if s == "" || len(s) > maxMailboxInput || !utf8.ValidString(s) || strings.ContainsAny(s, "\r\n\x00") {
		return "", "", false, false
	}
	name, addr, ok, nameOK = splitMailbox(s)
	if ok && mailboxLen(name, addr) > maxHeaderLineLen {
		return "", "", false, false
	}
	return name, addr, ok, nameOK
}

// mailboxLen is the length of a mailbox written plainly: the name, a space and the address in brackets.
func mailboxLen(name, addr string) int {
	n := utf8.RuneCountInString(addr)
	if name != "" {
		n += utf8.RuneCountInString(name) + 3
	}
	return n
}

// splitMailbox is parseMailbox without the bounds on the value as a whole: a canonical form
// (normaliseMailbox) may be longer than what the caller wrote, since RFC 2047 encoding grows a non-ASCII
// name, and must still split into the same name and address.
func splitMailbox(s string) (name, addr string, ok, nameOK bool) {
	if isGroup(s) {
		return "", "", false, false
	}
	a, err := mail.ParseAddress(s)
	if err != nil || !validAddrSpec(a.Address) {
		return "", "", false, false
	}
	return a.Name, a.Address, true, !strings.ContainsFunc(a.Name, unicode.IsControl)
}

// isGroup reports whether s is written as a group ("Friends: a@example.org;", RFC 5322 §3.4): a colon
// outside quoted strings, comments and angle brackets. net/mail takes a group of one member as that
// member, which would drop the group's name silently; a field of the send body names mailboxes only.
func isGroup(s string) bool {
	var quoted, escaped, angle bool
	comment := 0
	for _, r := range s {
		switch {
		case escaped:
			escaped = false
		case r == '\\' && (quoted || comment > 0):
			escaped = true
		case quoted:
			quoted = r != '"'
		case r == '"' && comment == 0:
			quoted = true
		case r == '(':
			comment++
		case r == ')' && comment > 0:
			comment--
		case comment > 0:
		case r == '<':
			angle = true
		case r == '>':
			angle = false
		case r == ':' && !angle:
			return true
		}
	}
	return false
}

// normaliseMailbox is the canonical form of a valid mailbox: the bare address when it has no display
// name, otherwise the name (quoted or RFC 2047-encoded as needed) with the address in angle brackets.
func normaliseMailbox(name, addr string) string {
	if name == "" {
		return addr
	}
	return (&mail.Address{Name: name, Address: addr}).String()
}

// recipientOf is the recipient of type typ for a to, cc or bcc value that validateSend accepted (and so
// normalised): its bare address and its display name.
func recipientOf(typ, value string) ports.Recipient {
	name, addr, ok, _ := splitMailbox(value)
	if !ok {
		return ports.Recipient{Type: typ, Address: value}
	}
	return ports.Recipient{Type: typ, Address: addr, Name: name}
}

// headerMailbox is how a recipient appears in the To or Cc header field of the delivered message.
func headerMailbox(r ports.Recipient) string {
	return normaliseMailbox(r.Name, r.Address)
}
