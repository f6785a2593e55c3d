package mta

import (
	"mime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestCleanText: whatever bytes a server puts in a reply, the stored text is valid UTF-8 without control
// or format characters, each escaped readably, and bounded without splitting a character or an escape.
func TestCleanText(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"250 2.0.0 Ok: queued as 1234", "250 2.0.0 Ok: queued as 1234"},
		{"250 ok\x00", `250 ok\x00`},
		{"250 ok\r\nX-Injected: 1", `250 ok\x0d\x0aX-Injected: 1`},
		{"250 \x1b[31mred\x7f", `250 \x1b[31mred\x7f`},
		{"250 bad \xff\xfe utf-8", `250 bad \xff\xfe utf-8`},
		{"250 C1 \u0085 and \u009b", `250 C1 \u0085 and \u009b`},
		{"250 \u202egnp.exe", `250 \u202egnp.exe`},
		{"250 zero\u200bwidth, line\u2028sep", `250 zero\u200bwidth, line\u2028sep`},
		{"250 déjà vu ✓", "250 déjà vu ✓"},
	}
	for _, tc := range cases {
		if got := cleanText(tc.in, maxResponse); got != tc.want {
			t.Errorf("cleanText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{strings.Repeat("é", 800), strings.Repeat("\x00", 400), "250 " + strings.Repeat("x", 2000)} {
		got := cleanText(in, 100)
		if len(got) > 100 || !utf8.ValidString(got) || strings.ContainsRune(got, 0) {
			t.Errorf("cleanText of %d bytes = %q (%d bytes)", len(in), got, len(got))
		}
		if strings.HasSuffix(got, `\`) || strings.HasSuffix(got, `\x`) || strings.HasSuffix(got, `\x0`) {
			t.Errorf("cut inside an escape: %q", got)
		}
	}
	note := " (sent without TLS: handshake failed)"
	if got := cleanTextWithNote(strings.Repeat("y", 2000), note, maxResponse); len(got) != maxResponse || !strings.HasSuffix(got, note) {
		t.Errorf("the note did not survive the bound: %d bytes, %q…", len(got), got[len(got)-50:])
	}
}

// TestRedeliveryDelay: the delay doubles per delivery from RedeliveryBackoff up to MaxRedeliveryBackoff,
// jittered down by at most a quarter.
func TestRedeliveryDelay(t *testing.T) {
	t.Parallel()
	m := &MTA{cfg: Config{RedeliveryBackoff: 5 * time.Second, MaxRedeliveryBackoff: 15 * time.Minute}}
	for n, want := range map[int]time.Duration{
		1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 8: 640 * time.Second,
		9: 15 * time.Minute, 16: 15 * time.Minute, 1000: 15 * time.Minute,
	} {
		for range 50 {
			if got := m.redeliveryDelay(n); got > want || got < want*3/4 {
				t.Fatalf("redeliveryDelay(%d) = %v, want within [%v, %v]", n, got, want*3/4, want)
			}
		}
	}
}

// TestTextPartContentType: the Content-Type a text part carries is what mime.FormatMediaType (go-message's
// SetContentType) writes for it.
func TestTextPartContentType(t *testing.T) {
	t.Parallel()
	for _, mediaType := range []string{"text/plain", "text/html"} {
		want := mime.FormatMediaType(mediaType, map[string]string{"charset": "utf-8"})
		if got := textPart(mediaType, "x").header.Get("Content-Type"); got != want {
			t.Errorf("%s: Content-Type %q, want %q", mediaType, got, want)
		}
	}
}
