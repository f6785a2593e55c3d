package inbound

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// FuzzParse feeds arbitrary messages to the parsers: they must never panic, must refuse only with
// invalid_argument, and every report must respect the limits (recipient cap, bounded valid UTF-8 strings
// without NUL) so that whatever reaches the core can be stored.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.eml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no fixtures: %v", err)
	}
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, "")
		f.Add(toCRLF(raw), "MAILER-DAEMON@mail.example.net")
	}
	f.Add(dsn("Final-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.1.1\n", ""), "")
	f.Add([]byte("From: postmaster@x.example\n\n<a@example.org>:\n550 5.1.1 no\n"), "")
	f.Fuzz(func(t *testing.T, raw []byte, from string) {
		rep, err := parseReport(raw, envelope{from: from, rcpts: []string{"b-x@bounce.example.com"}})
		if err != nil {
			if ports.ErrorCode(err) != ports.CodeInvalidArgument {
				t.Fatalf("refused with %v, want invalid_argument", err)
			}
			return
		}
		checkString := func(what, s string) {
			if len(s) > maxValueBytes || !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				t.Fatalf("%s not clean: %d bytes %q", what, len(s), s[:min(len(s), 60)])
			}
		}
		switch rep.kind {
		case kindNone:
			if !reflect.DeepEqual(rep, report{}) {
				t.Fatalf("kindNone with content: %+v", rep)
			}
		case kindBounce:
			b := rep.bounce
			if len(b.Recipients) == 0 || len(b.Recipients) > maxReportRecipients {
				t.Fatalf("%d recipients", len(b.Recipients))
			}
			checkString("ReportingMTA", b.ReportingMTA)
			checkString("OriginalMessageID", b.OriginalMessageID)
			for _, r := range b.Recipients {
				if r.FinalRecipient == "" {
					t.Fatal("a recipient without an address")
				}
				for _, s := range []string{r.FinalRecipient, r.OriginalRecipient, r.Action, r.Status, r.DiagnosticCode, r.RemoteMTA} {
					checkString("recipient field", s)
				}
			}
		case kindComplaint:
			c := rep.complaint
			if c.FeedbackType == "" || len(c.OriginalRcptTo) > maxReportRecipients {
				t.Fatalf("complaint %+v", c)
			}
			for _, s := range append([]string{c.FeedbackType, c.UserAgent, c.OriginalMailFrom, c.OriginalMessageID, c.ReportedDomain, c.SourceIP}, c.OriginalRcptTo...) {
				checkString("complaint field", s)
			}
		default:
			t.Fatalf("unknown kind %d", rep.kind)
		}
	})
}
