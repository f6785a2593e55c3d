package mta

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxResponse bounds the stored text of one recipient's outcome (its providerResponse). RFC 5321
// §4.5.3.1.5 bounds a reply line at 512 octets; a multi-line reply joined on one line, with the MTA's own
// words around it, stays within this.
const maxResponse = 1000

// cleanText makes s safe to store and show: every byte a receiving server (or a DNS answer, or an error
// quoting one) chose is kept readable, and none can reach the store as a byte it refuses or a log or
// timeline as a line break or a control sequence. Control characters (C0, DEL, C1) and invalid UTF-8
// bytes are written as \xNN; Unicode format characters (bidirectional overrides, zero-width marks, ...)
// and the line and paragraph separators as \uNNNN. The result is valid UTF-8 without NUL — PostgreSQL
// refuses NUL in text (SQLSTATE 22021), and a refused report would have the job retried and the message
// sent again — and at most max bytes long, cut between whole characters or escapes.
func cleanText(s string, max int) string {
	if clean(s) && len(s) <= max {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), max))
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && w <= 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case r < 0x20 || r == 0x7f:
			piece = fmt.Sprintf(`\x%02x`, r)
		case r >= 0x80 && r < 0xa0, r == '\u2028', r == '\u2029', unicode.Is(unicode.Cf, r):
			piece = fmt.Sprintf(`\u%04x`, r)
		default:
			piece = s[i : i+w]
		}
		if b.Len()+len(piece) > max {
			break
		}
		b.WriteString(piece)
		i += w
	}
	return b.String()
}

// clean reports whether s needs no escaping: printable ASCII only, the usual form of an SMTP reply.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// cleanTextWithNote is cleanText for a response followed by the MTA's own note (already clean), which is
// kept whole: the response gives way first.
func cleanTextWithNote(s, note string, max int) string {
	if note == "" {
		return cleanText(s, max)
	}
	return cleanText(s, max-len(note)) + note
}
