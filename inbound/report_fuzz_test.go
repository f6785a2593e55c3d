package inbound

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// FuzzParse (fuzz_internal_test.go) feeds whole messages through the MIME walk. The targets here start one
// step further in, at the machine-readable part, so the fuzzer spends its time in the field parsers rather
// than in finding a multipart/report; and besides the limits they check that a report written the way RFC
// 3464 and RFC 5965 say is read back field for field, also inside a whole message.

// reportSeeds returns the fixtures' parts of one content type (the DSN and ARF parts of testdata/*.eml)
// with the header of their returned message, as the MIME walk finds them.
func reportSeeds(tb testing.TB, pick func(*mimeParts) []byte) (parts, returned [][]byte) {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.eml"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no fixtures: %v", err)
	}
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		mp, err := walkMessage(raw)
		if err != nil || pick(mp) == nil {
			continue
		}
		var hdr []byte
		for _, f := range mp.returned {
			hdr = append(hdr, f.name+": "+f.value+"\r\n"...)
		}
		parts, returned = append(parts, pick(mp)), append(returned, hdr)
	}
	if len(parts) == 0 {
		tb.Fatal("no fixture has such a part")
	}
	return parts, returned
}

// FuzzParseDSN feeds parseDSN any delivery-status body and returned header. It refuses only with
// invalid_argument; a bounce it reads names 1 to maxReportRecipients recipients, each with an address, an
// RFC 3463 status or none, a lower-case action, and every string storable and bounded. And a DSN
// with the fuzzed address and diagnostic text, written as RFC 3464 §2 says (folded, CRLF or LF), is read
// back exactly, on its own and inside a multipart/report message.
func FuzzParseDSN(f *testing.F) {
	parts, returned := reportSeeds(f, func(mp *mimeParts) []byte { return mp.deliveryStatus })
	for i := range parts {
		f.Add(parts[i], returned[i], "alice@example.org", "550 5.1.1 <alice@example.org>: Recipient address rejected: User unknown in virtual mailbox table")
	}
	f.Add([]byte("Final-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.1.1\n"), []byte(nil), "b@x.example", "")
	f.Add([]byte("Reporting-MTA: dns; mx.example\nX-Original-Message-ID: <id@x>\nOriginal-Recipient: utf-8; j\\x{00F8}rn@example.org\n"+
		"Status: 4.4.7 (delayed)\nAction: Delayed (retrying)\nRemote-MTA: dns; mx2.example. (192.0.2.1)\n"),
		[]byte("Message-ID: <m1@sender.example>\n"), "user+tag@sub.example.co.uk", "4.7.0 try again later")
	f.Add([]byte("Final-Recipient: rfc822;\n\nFinal-Recipient: x; \x00\xff\nDiagnostic-Code: smtp;\n 550\n\t5.7.1\n"), []byte("Message-ID: x y\n"),
		"o'brien@example.org", "smtp; 550 5.7.1 Message rejected\tby policy")
	f.Fuzz(func(t *testing.T, status, ret []byte, addr, diag string) {
		mp := &mimeParts{deliveryStatus: status}
		if len(ret) > 0 {
			mp.returned, _ = readFields(ret)
			mp.hasReturned = true
		}
		b, err := parseDSN(mp)
		if err != nil {
			if ports.ErrorCode(err) != ports.CodeInvalidArgument || b.Recipients != nil || b.ReportingMTA != "" {
				t.Fatalf("parseDSN refused with %+v, %v; want a zero report and invalid_argument", b, err)
			}
		} else {
			checkBounce(t, b)
		}

		// A conforming DSN with the fuzzed address and diagnostic is read back as written.
		if addr == "" || addrRe.FindString(addr) != addr || len(addr) > maxAddressBytes || strings.ContainsAny(diag, "\r\n") || len(diag) > 800 {
			return
		}
		wantDiag := collapseSpace("smtp; " + diag)
		for _, eol := range []string{"\r\n", "\n"} {
			body := "Reporting-MTA: dns; mx.example.org" + eol + "Arrival-Date: Sat, 21 Nov 2026 09:00:00 +0000" + eol + eol +
				"Final-Recipient: rfc822; <" + addr + ">" + eol + "Original-Recipient: rfc822;" + addr + eol +
				"Action: failed" + eol + "Status: 5.1.1" + eol + "Remote-MTA: dns; mx.rcpt.example" + eol +
				fold("Diagnostic-Code: smtp; "+diag, eol) + eol
			want := ports.DSNRecipient{FinalRecipient: addr, OriginalRecipient: addr, Action: "failed", Status: "5.1.1",
				DiagnosticCode: wantDiag, RemoteMTA: "mx.rcpt.example"}
			got, err := parseDSN(&mimeParts{deliveryStatus: []byte(body)})
			if err != nil || len(got.Recipients) != 1 || got.Recipients[0] != want || got.ReportingMTA != "mx.example.org" {
				t.Fatalf("DSN\n%s\nread as %+v, %v; want %+v", body, got, err, want)
			}
			msg := "From: MAILER-DAEMON@mx.example.org" + eol + "To: b-x@bounce.example.com" + eol + "MIME-Version: 1.0" + eol +
				"Content-Type: multipart/report; report-type=delivery-status; boundary=\"=_B\"" + eol + eol +
				"--=_B" + eol + "Content-Type: text/plain" + eol + eol + "Delivery failed." + eol +
				"--=_B" + eol + "Content-Type: message/delivery-status" + eol + eol + body +
				"--=_B" + eol + "Content-Type: text/rfc822-headers" + eol + eol + "Message-ID: <m1@sender.example>" + eol +
				"--=_B--" + eol
			rep, err := parseReport([]byte(msg), envelope{from: "", rcpts: []string{"b-x@bounce.example.com"}})
			if err != nil || rep.kind != kindBounce || rep.format != formatDSN || len(rep.bounce.Recipients) != 1 ||
				rep.bounce.Recipients[0] != want || rep.bounce.OriginalMessageID != "m1@sender.example" {
				t.Fatalf("message\n%s\nread as %+v, %v; want %+v", msg, rep, err, want)
			}
		}
	})
}

// FuzzParseARF feeds parseARF any feedback-report body and returned header. It refuses only with
// invalid_argument (a report without Feedback-Type); a complaint it reads has a lower-case feedback
// type, at most maxReportRecipients recipients, an arrival date in UTC or none, and every string
// storable and bounded. And a report with the fuzzed addresses, written as RFC 5965 §3 says, is read back
// exactly, on its own and inside a multipart/report message.
func FuzzParseARF(f *testing.F) {
	parts, returned := reportSeeds(f, func(mp *mimeParts) []byte { return mp.feedback })
	for i := range parts {
		f.Add(parts[i], returned[i], "b-ahq2e3x@bounce.example.com", "alice@example.org")
	}
	f.Add([]byte("Feedback-Type: abuse\nOriginal-Rcpt-To: <a@example.org>\nOriginal-Rcpt-To: b@example.org\n"+
		"Received-Date: Thu, 8 Mar 2005 14:00:00 EDT (comment)\n"), []byte("Return-Path: <b-x@bounce.example.com>\nTo: \"A, B\" <c@example.org>, d@example.org\n"),
		"news@acme.example", "x@example.org")
	f.Add([]byte("Feedback-Type:\n\nUser-Agent: x\n"), []byte("To: not an address list <<<\nMessage-ID: <\x00>\n"), "a@b.example", "c@d.example")
	f.Fuzz(func(t *testing.T, feedback, ret []byte, mailFrom, rcpt string) {
		mp := &mimeParts{feedback: feedback}
		if len(ret) > 0 {
			mp.returned, _ = readFields(ret)
			mp.hasReturned = true
		}
		c, err := parseARF(mp)
		if err != nil {
			if ports.ErrorCode(err) != ports.CodeInvalidArgument || c.FeedbackType != "" || c.OriginalRcptTo != nil {
				t.Fatalf("parseARF refused with %+v, %v; want a zero report and invalid_argument", c, err)
			}
		} else {
			checkComplaint(t, c)
		}

		// A conforming report with the fuzzed addresses is read back as written.
		for _, a := range []string{mailFrom, rcpt} {
			if a == "" || addrRe.FindString(a) != a || len(a) > maxAddressBytes {
				return
			}
		}
		for _, eol := range []string{"\r\n", "\n"} {
			body := "Feedback-Type: abuse" + eol + "User-Agent: SomeGenerator/1.0" + eol + "Version: 1" + eol +
				"Original-Mail-From: <" + mailFrom + ">" + eol + "Original-Rcpt-To: <" + rcpt + ">" + eol +
				"Arrival-Date: Thu, 8 Mar 2005 14:00:00 EDT" + eol + "Reported-Domain: acme.example" + eol +
				"Source-IP: 192.0.2.1" + eol
			arrival := time.Date(2005, 3, 8, 18, 0, 0, 0, time.UTC)
			check := func(what string, got ports.ComplaintReport, msgID string) {
				t.Helper()
				if got.FeedbackType != "abuse" || got.UserAgent != "SomeGenerator/1.0" || got.OriginalMailFrom != mailFrom ||
					len(got.OriginalRcptTo) != 1 || got.OriginalRcptTo[0] != rcpt || got.ArrivalDate == nil ||
					!got.ArrivalDate.Equal(arrival) || got.ReportedDomain != "acme.example" || got.SourceIP != "192.0.2.1" ||
					got.OriginalMessageID != msgID {
					t.Fatalf("%s\n%s\nread as %+v", what, body, got)
				}
			}
			got, err := parseARF(&mimeParts{feedback: []byte(body)})
			if err != nil {
				t.Fatalf("report\n%s\nrefused: %v", body, err)
			}
			check("report", got, "")
			msg := "From: feedback@isp.example" + eol + "To: fbl@bounce.example.com" + eol + "MIME-Version: 1.0" + eol +
				"Content-Type: multipart/report; report-type=feedback-report; boundary=\"=_B\"" + eol + eol +
				"--=_B" + eol + "Content-Type: text/plain" + eol + eol + "This is an email abuse report." + eol +
				"--=_B" + eol + "Content-Type: message/feedback-report" + eol + eol + body + eol +
				"--=_B" + eol + "Content-Type: message/rfc822" + eol + eol + "From: <" + mailFrom + ">" + eol +
				"Message-ID: <m1@sender.example>" + eol + eol + "Hello" + eol + "--=_B--" + eol
			rep, err := parseReport([]byte(msg), envelope{from: "feedback@isp.example", rcpts: []string{"fbl@bounce.example.com"}})
			if err != nil || rep.kind != kindComplaint || rep.format != formatARF {
				t.Fatalf("message\n%s\nread as %+v, %v", msg, rep, err)
			}
			check("message", rep.complaint, "m1@sender.example")
		}
	})
}

// maxAddressBytes is RFC 5321 §4.5.3.1's limit on a path; the round trips keep to addresses within it.
const maxAddressBytes = 320

// statusRe is an RFC 3463 status code as statusCode returns it.
var statusRe = regexp.MustCompile(`^[245]\.[0-9]{1,3}\.[0-9]{1,3}$`)

// checkBounce fails unless b is a bounce the core can store.
func checkBounce(tb testing.TB, b ports.BounceReport) {
	tb.Helper()
	if len(b.Recipients) == 0 || len(b.Recipients) > maxReportRecipients {
		tb.Fatalf("%d recipients", len(b.Recipients))
	}
	mustBeStorable(tb, "Reporting-MTA", b.ReportingMTA)
	mustBeStorable(tb, "original Message-ID", b.OriginalMessageID)
	for _, r := range b.Recipients {
		if r.FinalRecipient == "" {
			tb.Fatalf("recipient %+v without an address", r)
		}
		if r.Status != "" && !statusRe.MatchString(r.Status) {
			tb.Fatalf("recipient %+v: status %q", r, r.Status)
		}
		if r.Action != strings.ToLower(r.Action) {
			tb.Fatalf("recipient %+v: action %q", r, r.Action)
		}
		for _, s := range []string{r.FinalRecipient, r.OriginalRecipient, r.Action, r.Status, r.DiagnosticCode, r.RemoteMTA} {
			mustBeStorable(tb, "recipient field", s)
		}
	}
}

// checkComplaint fails unless c is a complaint the core can store.
func checkComplaint(tb testing.TB, c ports.ComplaintReport) {
	tb.Helper()
	if c.FeedbackType == "" || c.FeedbackType != strings.ToLower(c.FeedbackType) {
		tb.Fatalf("feedback type %q", c.FeedbackType)
	}
	if len(c.OriginalRcptTo) > maxReportRecipients {
		tb.Fatalf("%d recipients", len(c.OriginalRcptTo))
	}
	if c.ArrivalDate != nil && c.ArrivalDate.Location() != time.UTC {
		tb.Fatalf("arrival date %v not in UTC", c.ArrivalDate)
	}
	for _, s := range append([]string{c.FeedbackType, c.UserAgent, c.OriginalMailFrom, c.OriginalMessageID, c.ReportedDomain, c.SourceIP}, c.OriginalRcptTo...) {
		mustBeStorable(tb, "complaint field", s)
	}
	for _, a := range c.OriginalRcptTo {
		if a == "" {
			tb.Fatal("an empty recipient")
		}
	}
}

// mustBeStorable fails unless s is what clean promises: valid UTF-8 of at most maxValueBytes, without
// control characters (NUL above all) and without leading white space.
func mustBeStorable(tb testing.TB, what, s string) {
	tb.Helper()
	r, _ := utf8.DecodeRuneInString(s)
	if len(s) > maxValueBytes || !utf8.ValidString(s) || strings.ContainsFunc(s, isControl) || s != "" && unicode.IsSpace(r) {
		tb.Fatalf("%s not clean: %d bytes %q", what, len(s), s[:min(len(s), 60)])
	}
}

// isControl is what clean replaces: the C0 controls and DEL.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// fold folds a field line at white space so that no line is much longer than 70 characters, as RFC 5322
// §2.2.3 lets a generator do: the line break goes before a space, which stays on the continuation line.
func fold(line, eol string) string {
	var b bytes.Buffer
	n := 0
	for i := 0; i < len(line); i++ {
		c := line[i]
		if (c == ' ' || c == '\t') && n >= 70 && i > 0 {
			b.WriteString(eol)
			n = 0
		}
		b.WriteByte(c)
		n++
	}
	return b.String()
}
