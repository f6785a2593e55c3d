package smtpd

import (
	"strings"
)

// MaxReplyText is how many octets of text ReplyText keeps: a reply line must fit RFC 5321 §4.5.3.1.5's 512
// octets, and this leaves room for the reply code, the enhanced status code (RFC 3463) and CRLF.
const MaxReplyText = 400

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
