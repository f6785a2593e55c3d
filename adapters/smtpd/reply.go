package smtpd

import (
	"strings"

	"github.com/postmill/postmill/ports"
)

// MaxReplyText is how many octets of text ReplyText keeps: a reply line must fit RFC 5321 §4.5.3.1.5's 512
// octets, and this leaves room for the reply code, the enhanced status code (RFC 3463) and CRLF.
const MaxReplyText = 400

// Describe is the human part of a reply for a ports error: its message with its field violations appended,
// e.g. "Validation failed (from: exactly one address)", so a sender sees what to fix without the API. The
// code stands in for an empty message. It does not decide whether the detail may be shown: a tier calls it
// only for codes whose message is meant for the client (never internal).
func Describe(pe *ports.Error) string {
	msg := pe.Message
	if msg == "" {
		msg = string(pe.Code)
	}
	if len(pe.Details) == 0 {
		return msg
	}
	parts := make([]string, 0, len(pe.Details))
	for _, d := range pe.Details {
		if d.Path == "" {
			parts = append(parts, d.Message)
			continue
		}
		parts = append(parts, d.Path+": "+d.Message)
	}
	return msg + " (" + strings.Join(parts, "; ") + ")"
}

// ReplyText makes a message safe for one reply line: printable US-ASCII (RFC 5321 §4.2), no line breaks,
// at most MaxReplyText octets followed by "..." when cut. Messages can echo what a client sent (an address,
// a header), and a CR or LF left in them would let that client write reply lines of its own.
func ReplyText(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= MaxReplyText {
			b.WriteString("...")
			break
		}
		switch {
		case r == '\r' || r == '\n' || r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f:
		case r > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
