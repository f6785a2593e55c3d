package smtpd_test

import (
	"strings"
	"testing"

	"github.com/postmill/postmill/adapters/smtpd"
)

func TestReplyText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 1000)
	for _, c := range []struct {
		name, in, want string
	}{
		{"plain", "Rate limit exceeded", "Rate limit exceeded"},
		{"line breaks cannot start a reply line of their own", "bad\r\n250 Injected", "bad  250 Injected"},
		{"tab becomes a space", "a\tb", "a b"},
		{"other controls are dropped", "a\x00b\x1bc\x7fd", "abcd"},
		{"non-ASCII becomes ?", "naïve ✓", "na?ve ?"},
		{"cut after MaxReplyText octets", long, long[:smtpd.MaxReplyText] + "..."},
		{"exactly MaxReplyText octets is kept whole", long[:smtpd.MaxReplyText], long[:smtpd.MaxReplyText]},
		{"empty", "", ""},
	} {
		if got := smtpd.ReplyText(c.in); got != c.want {
			t.Errorf("%s: ReplyText(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// TestReplyTextFitsOneReplyLine checks the bound RFC 5321 §4.5.3.1.5 sets: 512 octets for a reply line with
// its code, enhanced code and CRLF, whatever the input.
func TestReplyTextFitsOneReplyLine(t *testing.T) {
	t.Parallel()
	for _, in := range []string{strings.Repeat("✓", 600), strings.Repeat("ab\r\n", 300), strings.Repeat("x", 5000)} {
		line := "550 5.7.1 " + smtpd.ReplyText(in) + "\r\n"
		if len(line) > 512 {
			t.Errorf("reply line of %d octets", len(line))
		}
		if strings.ContainsAny(line[:len(line)-2], "\r\n") {
			t.Errorf("reply text holds a line break: %q", line)
		}
	}
}
