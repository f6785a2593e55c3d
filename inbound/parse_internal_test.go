package inbound

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// MustReadFixture returns testdata/name.
func MustReadFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// toCRLF rewrites LF line endings as CRLF: the fixtures are stored with LF, mail travels with CRLF, and the
// parsers must read both.
func toCRLF(b []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
}

func ptrTime(t time.Time) *time.Time { return &t }

// nullPath is the envelope of a bounce: the null reverse path and the return path it was sent to.
var nullPath = envelope{rcpts: []string{"b-ok4rysuwisrgp327vvs5x4n75o5a12d41bc9@bounce.example.com"}}

func TestParseFixtures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file      string
		env       envelope
		kind      reportKind
		format    string
		bounce    ports.BounceReport
		complaint ports.ComplaintReport
	}{
		{
			file: "postfix-hard-511.eml", env: nullPath, kind: kindBounce, format: formatDSN,
			bounce: ports.BounceReport{
				ReportingMTA:      "mx.example.org",
				OriginalMessageID: "0190f3a2-5b7c-7d2e-9a41-3c5e8f1b2d60@example.com",
				Recipients: []ports.DSNRecipient{{
					FinalRecipient: "nobody@example.org", OriginalRecipient: "nobody@example.org",
					Action: "failed", Status: "5.1.1",
					DiagnosticCode: "smtp; 550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown in virtual mailbox table",
					RemoteMTA:      "mailstore.example.org",
				}},
			},
		},
		{
			file: "postfix-delayed-441.eml", env: nullPath, kind: kindBounce, format: formatDSN,
			bounce: ports.BounceReport{
				ReportingMTA:      "mx.example.org",
				OriginalMessageID: "0190f3a2-6c1d-7e3f-8b52-4d6f9a2c3e71@example.com",
				Recipients: []ports.DSNRecipient{{
					FinalRecipient: "slow@example.org", OriginalRecipient: "slow@example.org",
					Action: "delayed", Status: "4.4.1",
					DiagnosticCode: "X-Postfix; connect to mailstore.example.org[192.0.2.40]:25: Connection timed out",
				}},
			},
		},
		{
			// Exim writes Status 5.0.0 even when the remote reply carried 5.1.1: the field is taken as given.
			file: "exim-dsn.eml", env: nullPath, kind: kindBounce, format: formatDSN,
			bounce: ports.BounceReport{
				ReportingMTA:      "mx.example.net",
				OriginalMessageID: "0190f3a3-0a11-7b22-9c33-5d44e6f7a801@example.com",
				Recipients: []ports.DSNRecipient{{
					FinalRecipient: "gone@example.net", Action: "failed", Status: "5.0.0",
					DiagnosticCode: "smtp; 550 5.1.1 <gone@example.net>: Recipient address rejected: User unknown in local recipient table",
					RemoteMTA:      "mbox.example.net",
				}},
			},
		},
		{
			// Upper-case RFC822; and DNS; types, a first part without Content-Type.
			file: "sendmail-dsn.eml", env: nullPath, kind: kindBounce, format: formatDSN,
			bounce: ports.BounceReport{
				ReportingMTA:      "mail.example.org",
				OriginalMessageID: "0190f3a2-7d2e-7f40-8c63-5e7a0b3d4f82@example.com",
				Recipients: []ports.DSNRecipient{{
					FinalRecipient: "jdoe@example.org", Action: "failed", Status: "5.1.1",
					DiagnosticCode: "SMTP; 550 5.1.1 <jdoe@example.org>... User unknown",
					RemoteMTA:      "mailhub.example.org",
				}},
			},
		},
		{
			// A three-digit detail (RFC 3463 allows 1-3 digits), "dns;" without a space, the original as
			// message/rfc822 after a multipart/alternative notice.
			file: "exchange-online-ndr-5110.eml", env: nullPath, kind: kindBounce, format: formatDSN,
			bounce: ports.BounceReport{
				ReportingMTA:      "DM6PR12MB4321.namprd12.prod.outlook.example",
				OriginalMessageID: "0190f3a2-8e3f-7051-9d74-6f8b1c4e5a93@example.com",
				Recipients: []ports.DSNRecipient{{
					FinalRecipient: "nobody@contoso.example", Action: "failed", Status: "5.1.10",
					DiagnosticCode: "smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient nobody@contoso.example not found by SMTP address lookup",
					RemoteMTA:      "DM6PR12MB4321.namprd12.prod.outlook.example",
				}},
			},
		},
		{
			// Nested multipart/related and alternative before the report part; a Remote-MTA with a comment;
			// a diagnostic folded over several lines.
			file: "gmail-dsn-511.eml", env: nullPath, kind: kindBounce, format: formatDSN,
			bounce: ports.BounceReport{
				ReportingMTA:      "googlemail.example",
				OriginalMessageID: "0190f3a2-9f40-7162-ae85-7a9c2d5f6ba4@example.com",
				Recipients: []ports.DSNRecipient{{
					FinalRecipient: "nobody@gmail.example", Action: "failed", Status: "5.1.1",
					DiagnosticCode: "smtp; 550-5.1.1 The email account that you tried to reach does not exist. Please try " +
						"550-5.1.1 double-checking the recipient's email address for typos or 550-5.1.1 unnecessary spaces. " +
						"For more information, go to 550 5.1.1 https://support.google.example/mail/?p=NoSuchUser " +
						"a1b2c3d4e5f6a-5c8a1b2c3d4si1234567a.12 - gsmtp",
					RemoteMTA: "gmail-smtp-in.l.google.example",
				}},
			},
		},
		{
			file: "multi-recipient-dsn.eml", env: nullPath, kind: kindBounce, format: formatDSN,
			bounce: ports.BounceReport{
				ReportingMTA:      "mail.example.org",
				OriginalMessageID: "0190f3a5-1a2b-7c3d-8e4f-5a6b7c8d9e0f@example.com",
				Recipients: []ports.DSNRecipient{
					{FinalRecipient: "ann@example.org", OriginalRecipient: "Ann@Example.org", Action: "delivered", Status: "2.1.5"},
					{
						FinalRecipient: "ghost@example.org", Action: "failed", Status: "5.1.1",
						DiagnosticCode: "SMTP; 550 5.1.1 <ghost@example.org>... User unknown", RemoteMTA: "mailhub.example.org",
					},
				},
			},
		},
		{
			// UTF-8 addresses raw (Final-Recipient) and as RFC 6533 \x{HEX} escapes (Original-Recipient).
			file: "global-dsn-rfc6533.eml", env: nullPath, kind: kindBounce, format: formatGlobalDSN,
			bounce: ports.BounceReport{
				ReportingMTA:      "mail.example.net",
				OriginalMessageID: "0190f3a8-5e6f-7071-8283-9e0f1a2b3c4d@example.com",
				Recipients: []ports.DSNRecipient{{
					FinalRecipient: "δοκιμή@παράδειγμα.example", OriginalRecipient: "δοκιμή@παράδειγμα.example",
					Action: "failed", Status: "5.1.1",
					DiagnosticCode: "smtp; 550 5.1.1 <δοκιμή@παράδειγμα.example>: Recipient address rejected: User unknown",
					RemoteMTA:      "mx.παράδειγμα.example",
				}},
			},
		},
		{
			file: "qmail-bounce.eml", env: nullPath, kind: kindBounce, format: formatQmail,
			bounce: ports.BounceReport{
				ReportingMTA:      "mail.example.net",
				OriginalMessageID: "0190f3a6-2b3c-7d4e-9f50-6b7c8d9e0f1a@example.com",
				Recipients: []ports.DSNRecipient{
					{FinalRecipient: "nobody@example.net", Action: "failed", Status: "5.1.1", DiagnosticCode: "Sorry, no mailbox here by that name. (#5.1.1)"},
					{
						FinalRecipient: "former@example.org", Action: "failed", Status: "5.0.0", RemoteMTA: "192.0.2.77",
						DiagnosticCode: "192.0.2.77 does not like recipient. Remote host said: 550 Requested action not taken: mailbox unavailable Giving up on 192.0.2.77.",
					},
				},
			},
		},
		{
			file: "exim-plain-bounce.eml", env: nullPath, kind: kindBounce, format: formatExim,
			bounce: ports.BounceReport{
				ReportingMTA:      "mail.example.net",
				OriginalMessageID: "0190f3a4-3c4d-7e5f-a061-7c8d9e0f1a2b@example.com",
				Recipients: []ports.DSNRecipient{
					{
						FinalRecipient: "nobody@example.net", Action: "failed", Status: "5.1.1", RemoteMTA: "mbox.example.net",
						DiagnosticCode: "SMTP error from remote mail server after RCPT TO:<nobody@example.net>: host mbox.example.net [192.0.2.60]: " +
							"550 5.1.1 <nobody@example.net>: Recipient address rejected: User unknown in local recipient table",
					},
					{
						// No code at all in a permanent failure: 5.0.0.
						FinalRecipient: "retired@example.net", OriginalRecipient: "sales@example.net", Action: "failed", Status: "5.0.0",
						DiagnosticCode: "retry timeout exceeded",
					},
				},
			},
		},
		{
			file: "generic-failure-notice.eml", env: nullPath, kind: kindBounce, format: formatGeneric,
			bounce: ports.BounceReport{
				ReportingMTA:      "mta1000.mail.example.net",
				OriginalMessageID: "0190f3a7-4d5e-7f60-b172-8d9e0f1a2b3c@example.com",
				Recipients: []ports.DSNRecipient{{
					FinalRecipient: "nobody@example.org", Action: "failed", Status: "5.1.1",
					DiagnosticCode: "Remote host said: 550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown in relay recipient table [RCPT_TO]",
				}},
			},
		},
		{
			// No Original-Mail-From or Original-Rcpt-To: the returned message's Return-Path and To stand in;
			// the obsolete zone EST is -0500 (RFC 5322 §4.3).
			file: "arf-aol-abuse.eml", env: envelope{from: "scomp@aol.example", rcpts: []string{"fbl@feedback.example.com"}},
			kind: kindComplaint, format: formatARF,
			complaint: ports.ComplaintReport{
				FeedbackType: "abuse", UserAgent: "AOL SComp",
				OriginalMailFrom:  "b-ok4wftzbq3ozlcxqpi3poiohmk7q6d894680@bounce.example.com",
				OriginalRcptTo:    []string{"redacted@aol.example"},
				OriginalMessageID: "0190f3b0-7a81-7293-a4b5-1c2d3e4f5a6b@example.com",
				ReportedDomain:    "example.com", SourceIP: "198.51.100.7",
				ArrivalDate: ptrTime(time.Date(2026, 11, 17, 10, 14, 22, 0, time.UTC)),
			},
		},
		{
			// RFC 5965 Appendix B.1 as published: no optional fields, an unparseable To, a Message-ID without
			// brackets.
			file: "arf-rfc5965-b1.eml", env: envelope{from: "abusedesk@example.com", rcpts: []string{"abuse@example.net"}},
			kind: kindComplaint, format: formatARF,
			complaint: ports.ComplaintReport{
				FeedbackType: "abuse", UserAgent: "SomeGenerator/1.0",
				OriginalMessageID: "8787KJKJ3K4J3K4J3K4J3.mail@example.net",
			},
		},
		{
			file: "arf-yahoo-complete.eml", env: envelope{from: "feedbackloop@yahoo.example", rcpts: []string{"fbl@feedback.example.com"}},
			kind: kindComplaint, format: formatARF,
			complaint: ports.ComplaintReport{
				FeedbackType: "abuse", UserAgent: "Yahoo!-Mail-Feedback/2.0",
				OriginalMailFrom:  "b-oirbkr2rpf274q7l3t4ytcm4chsqdbd34046@bounce.example.com",
				OriginalRcptTo:    []string{"reader@yahoo.example", "reader.alias@yahoo.example"},
				OriginalMessageID: "0190f3b1-8b92-73a4-b5c6-2d3e4f5a6b7c@example.com",
				ReportedDomain:    "example.com", SourceIP: "198.51.100.7",
				ArrivalDate: ptrTime(time.Date(2026, 11, 17, 10, 58, 2, 0, time.UTC)),
			},
		},
		{
			// RFC 3834 §3.3 auto-replies use the null path, like bounces; the text has an address and a
			// number that looks like a reply code, and still it is no bounce.
			file: "out-of-office.eml", env: envelope{rcpts: []string{"b-okl64k6behqpvdidw2ozr3py3hzq4ddb3930@bounce.example.com"}},
			kind: kindNone,
		},
	}
	for _, c := range cases {
		for _, ending := range []string{"LF", "CRLF"} {
			t.Run(c.file+"/"+ending, func(t *testing.T) {
				t.Parallel()
				raw := MustReadFixture(t, c.file)
				if ending == "CRLF" {
					raw = toCRLF(raw)
				}
				got, err := parseReport(raw, c.env)
				if err != nil {
					t.Fatalf("parseReport: %v", err)
				}
				if got.kind != c.kind || got.format != c.format {
					t.Fatalf("kind %d format %q, want %d %q", got.kind, got.format, c.kind, c.format)
				}
				if !reflect.DeepEqual(got.bounce, c.bounce) {
					t.Errorf("bounce\n got %#v\nwant %#v", got.bounce, c.bounce)
				}
				if !reflect.DeepEqual(got.complaint, c.complaint) {
					t.Errorf("complaint\n got %#v\nwant %#v", got.complaint, c.complaint)
				}
			})
		}
	}
}

// dsn builds a multipart/report with the given delivery-status body and an optional third part.
func dsn(status, third string) []byte {
	var b strings.Builder
	b.WriteString("From: MAILER-DAEMON@mx.example.org\nTo: b-x@bounce.example.com\nSubject: Undelivered Mail\n" +
		"MIME-Version: 1.0\nContent-Type: multipart/report; report-type=delivery-status; boundary=\"B\"\n\n" +
		"--B\nContent-Type: text/plain\n\nDelivery failed.\n\n--B\nContent-Type: message/delivery-status\n\n")
	b.WriteString(status)
	b.WriteString("\n")
	if third != "" {
		b.WriteString("--B\n" + third + "\n")
	}
	b.WriteString("--B--\n")
	return []byte(b.String())
}

func TestParseDSNVariants(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		raw  []byte
		want ports.BounceReport
	}{
		{
			// No blank line after the per-message fields, names in odd case, angle brackets and extra space
			// in the address, a comment after the status and the action, LF-only folding with a tab.
			name: "sloppy generator",
			raw: dsn("reporting-mta: DNS; relay.example.org\nFINAL-RECIPIENT: RFC822;  <Mixed.Case@Example.org> \n"+
				"ACTION: FAILED (permanent)\nstatus: 5.0.0 (permanent failure)\ndiagnostic-code: smtp;\n\t550 no such\n user\n", ""),
			want: ports.BounceReport{
				ReportingMTA: "relay.example.org",
				Recipients: []ports.DSNRecipient{{
					FinalRecipient: "Mixed.Case@Example.org", Action: "failed", Status: "5.0.0", DiagnosticCode: "smtp; 550 no such user",
				}},
			},
		},
		{
			name: "original recipient only, leading blank lines, unknown MTA type kept",
			raw: dsn("\n\nReporting-MTA: x-local; hub\n\nOriginal-Recipient: rfc822;who@example.org\nAction: delayed\nStatus: 4.2.2\n"+
				"Remote-MTA: x-local; store7\n", ""),
			want: ports.BounceReport{
				ReportingMTA: "x-local; hub",
				Recipients: []ports.DSNRecipient{{
					FinalRecipient: "who@example.org", OriginalRecipient: "who@example.org", Action: "delayed", Status: "4.2.2",
					RemoteMTA: "x-local; store7",
				}},
			},
		},
		{
			name: "status that is not a code, message id from X-Original-Message-ID",
			raw: dsn("Reporting-MTA: dns; mx.example.org\nX-Original-Message-ID: <m1@example.com>\n\n"+
				"Final-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 550\n", ""),
			want: ports.BounceReport{
				ReportingMTA: "mx.example.org", OriginalMessageID: "m1@example.com",
				Recipients: []ports.DSNRecipient{{FinalRecipient: "a@example.org", Action: "failed"}},
			},
		},
		{
			name: "the returned part wins over X-Original-Message-ID",
			raw: dsn("Reporting-MTA: dns; mx.example.org\nX-Original-Message-ID: <other@example.com>\n\n"+
				"Final-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.2.2\n",
				"Content-Type: text/rfc822-headers\n\nFrom: x@example.com\nMessage-Id:\n <m2@example.com>\n"),
			want: ports.BounceReport{
				ReportingMTA: "mx.example.org", OriginalMessageID: "m2@example.com",
				Recipients: []ports.DSNRecipient{{FinalRecipient: "a@example.org", Action: "failed", Status: "5.2.2"}},
			},
		},
		{
			name: "base64 delivery-status part",
			raw: []byte("From: MAILER-DAEMON@mx.example.org\nContent-Type: multipart/report; report-type=delivery-status; boundary=B\n\n" +
				"--B\nContent-Type: message/delivery-status\nContent-Transfer-Encoding: base64\n\n" +
				base64.StdEncoding.EncodeToString([]byte("Reporting-MTA: dns; b64.example.org\r\n\r\nFinal-Recipient: rfc822; z@example.org\r\nAction: failed\r\nStatus: 5.7.1\r\n")) +
				"\n--B--\n"),
			want: ports.BounceReport{
				ReportingMTA: "b64.example.org",
				Recipients:   []ports.DSNRecipient{{FinalRecipient: "z@example.org", Action: "failed", Status: "5.7.1"}},
			},
		},
		{
			// A bounce of a feedback report is a bounce: the returned message is not entered.
			name: "bounce of a feedback report",
			raw: dsn("Reporting-MTA: dns; mx.example.org\n\nFinal-Recipient: rfc822; abuse@example.org\nAction: failed\nStatus: 5.1.1\n",
				"Content-Type: message/rfc822\n\nMessage-ID: <arf1@example.com>\nContent-Type: multipart/report; report-type=feedback-report; boundary=C\n\n"+
					"--C\nContent-Type: message/feedback-report\n\nFeedback-Type: abuse\n\n--C--\n"),
			want: ports.BounceReport{
				ReportingMTA: "mx.example.org", OriginalMessageID: "arf1@example.com",
				Recipients: []ports.DSNRecipient{{FinalRecipient: "abuse@example.org", Action: "failed", Status: "5.1.1"}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseReport(c.raw, nullPath)
			if err != nil {
				t.Fatalf("parseReport: %v", err)
			}
			if got.kind != kindBounce || !reflect.DeepEqual(got.bounce, c.want) {
				t.Errorf("kind %d\n got %#v\nwant %#v", got.kind, got.bounce, c.want)
			}
		})
	}
}

func TestParseRefusesBrokenReports(t *testing.T) {
	t.Parallel()
	for name, raw := range map[string][]byte{
		"DSN without recipients": dsn("Reporting-MTA: dns; mx.example.org\n\nAction: failed\nStatus: 5.1.1\n", ""),
		"delivery-status report without its part": []byte("From: a@example.org\nContent-Type: multipart/report; report-type=delivery-status; boundary=B\n\n" +
			"--B\nContent-Type: image/png\n\nxx\n--B--\n"),
		"feedback report without its part": []byte("From: fbl@example.net\nContent-Type: multipart/report; report-type=Feedback-Report; boundary=B\n\n" +
			"--B\nContent-Type: text/plain\n\nThis is a report.\n--B--\n"),
		"feedback report without Feedback-Type": []byte("From: fbl@example.net\nContent-Type: multipart/report; report-type=feedback-report; boundary=B\n\n" +
			"--B\nContent-Type: message/feedback-report\n\nUser-Agent: x/1\nVersion: 1\n\n--B--\n"),
		"no header at all": []byte("\r\n\r\nbody only\r\n"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := parseReport(raw, nullPath)
			if ports.ErrorCode(err) != ports.CodeInvalidArgument {
				t.Fatalf("got %v, want invalid_argument", err)
			}
		})
	}
}

func TestParseNonStandardRules(t *testing.T) {
	t.Parallel()
	const vrp = "b-okl64k6behqpvdidw2ozr3py3hzq4ddb3930@bounce.example.com"
	env := envelope{rcpts: []string{vrp}}
	cases := []struct {
		name   string
		env    envelope
		raw    string
		format string // "" when no bounce may be recognised
		want   []ports.DSNRecipient
	}{
		{
			name: "generic transcript: address on the line above, our return path never taken",
			env:  env,
			raw: "From: Mail Delivery Subsystem <postmaster@relay.example.net>\nSubject: Delivery failure\n\n" +
				"Your message from " + vrp + " could not be delivered.\n\n" +
				"While talking to mail.example.org about <kate@example.org>:\n" +
				"<<< 554 Transaction failed\n",
			format: formatGeneric,
			want:   []ports.DSNRecipient{{FinalRecipient: "kate@example.org", Action: "failed", Status: "5.0.0", DiagnosticCode: "<<< 554 Transaction failed"}},
		},
		{
			name: "generic delay notice from the null path with a bounce subject",
			env:  env,
			raw: "From: Mail System <mail@relay.example.net>\nSubject: =?utf-8?q?Delivery_delayed=3A_undelivered_mail?=\n\n" +
				"Delivery to tom@example.org is delayed; we will retry for 2 days.\n" +
				"tom@example.org: 451 4.7.1 Greylisted, try again later\n",
			format: formatGeneric,
			want: []ports.DSNRecipient{{
				FinalRecipient: "tom@example.org", Action: "delayed", Status: "4.7.1",
				DiagnosticCode: "tom@example.org: 451 4.7.1 Greylisted, try again later",
			}},
		},
		{
			name: "a mail system's notice with a phone number and an address is no bounce",
			env:  env,
			raw: "From: MAILER-DAEMON@relay.example.net\nSubject: Notice\n\n" +
				"Our service will change on Monday. Call 555 0100 or write help@example.net.\n",
		},
		{
			name: "a person's reply with a version number is no bounce",
			env:  env,
			raw: "From: Lee <lee@example.org>\nSubject: Re: your order\n\n" +
				"We upgraded to release 5.1.1 yesterday: 550 units shipped to depot@example.net\n",
		},
		{
			name: "a bounce subject from a real sender is no bounce",
			env:  envelope{from: "lee@example.org", rcpts: env.rcpts},
			raw: "From: Lee <lee@example.org>\nSubject: Undelivered parcel\n\n" +
				"The parcel to depot@example.net: 550 was not delivered.\n",
		},
		{
			name: "Exim delay warning",
			env:  env,
			raw: "From: Mail Delivery System <Mailer-Daemon@mail.example.net>\nSubject: Warning: message 1tCg3X-0003aB-2k delayed 24 hours\n\n" +
				"This message was created automatically by mail delivery software.\n\n" +
				"A message that you sent has not yet been delivered to one or more of its\n" +
				"recipients after more than 24 hours on the queue on mail.example.net.\n\n" +
				"The message identifier is:     1tCg3X-0003aB-2k\n\n" +
				"The address to which the message has not yet been delivered is:\n\n" +
				"  late@example.org\n" +
				"    host mx.example.org [192.0.2.70]\n" +
				"    Delay reason: SMTP error from remote mail server after RCPT TO:<late@example.org>:\n" +
				"    451 Temporary local problem - please try later\n\n" +
				"No action is required on your part. Delivery attempts will continue for\n" +
				"some time, and this warning may be repeated at intervals if the message\n" +
				"remains undelivered.\n",
			format: formatExim,
			want: []ports.DSNRecipient{{
				FinalRecipient: "late@example.org", Action: "delayed", Status: "4.0.0", RemoteMTA: "mx.example.org",
				DiagnosticCode: "host mx.example.org [192.0.2.70] Delay reason: SMTP error from remote mail server after RCPT TO:<late@example.org>: " +
					"451 Temporary local problem - please try later",
			}},
		},
		{
			name: "qmail text without address blocks falls through to no bounce",
			env:  envelope{from: "someone@example.net", rcpts: env.rcpts},
			raw:  "From: someone@example.net\nSubject: hello\n\nHi. This is the qmail-send program at mail.example.net.\nNothing else.\n",
		},
		{
			name: "HTML-only notices are not read",
			env:  env,
			raw: "From: MAILER-DAEMON@relay.example.net\nSubject: Undeliverable\nContent-Type: text/html\n\n" +
				"<p>nobody@example.org: 550 5.1.1 User unknown</p>\n",
		},
		{
			name: "a read receipt (RFC 8098) is no report",
			env:  env,
			raw: "From: reader@example.org\nContent-Type: multipart/report; report-type=disposition-notification; boundary=B\n\n" +
				"--B\nContent-Type: text/plain\n\nYour message was displayed.\n--B\nContent-Type: message/disposition-notification\n\n" +
				"Final-Recipient: rfc822; reader@example.org\nDisposition: manual-action/MDN-sent-manually; displayed\n--B--\n",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseReport([]byte(c.raw), c.env)
			if err != nil {
				t.Fatalf("parseReport: %v", err)
			}
			if c.format == "" {
				if got.kind != kindNone {
					t.Fatalf("recognised as %q: %+v", got.format, got.bounce)
				}
				return
			}
			if got.kind != kindBounce || got.format != c.format {
				t.Fatalf("kind %d format %q, want a %q bounce", got.kind, got.format, c.format)
			}
			if !reflect.DeepEqual(got.bounce.Recipients, c.want) {
				t.Errorf("\n got %#v\nwant %#v", got.bounce.Recipients, c.want)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	t.Parallel()
	var groups strings.Builder
	groups.WriteString("Reporting-MTA: dns; mx.example.org\n")
	for i := range 1500 {
		fmt.Fprintf(&groups, "\nFinal-Recipient: rfc822; r%d@example.org\nAction: failed\nStatus: 5.1.1\n", i)
	}
	got, err := parseReport(dsn(groups.String(), ""), nullPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.bounce.Recipients); n != maxReportRecipients {
		t.Errorf("%d recipients kept, want the cap %d", n, maxReportRecipients)
	}
	if last := got.bounce.Recipients[len(got.bounce.Recipients)-1].FinalRecipient; last != "r999@example.org" {
		t.Errorf("last recipient %q: the first ones must be kept", last)
	}

	// One enormous folded diagnostic with bytes PostgreSQL text refuses.
	long := "Diagnostic-Code: smtp; 550 " + strings.Repeat("x\xff\x00y ", 5000) + "\n" + strings.Repeat(" more words\n", 5000)
	got, err = parseReport(dsn("Reporting-MTA: dns; mx.example.org\n\nFinal-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.1.1\n"+long, ""), nullPath)
	if err != nil {
		t.Fatal(err)
	}
	d := got.bounce.Recipients[0].DiagnosticCode
	if len(d) > maxValueBytes || !strings.HasPrefix(d, "smtp; 550 x\uFFFD y ") || strings.ContainsRune(d, 0) {
		t.Errorf("diagnostic not bounded and cleaned: %d bytes %q...", len(d), d[:min(40, len(d))])
	}

	// Deeply nested multiparts are walked to a bounded depth only.
	var nested strings.Builder
	nested.WriteString("From: MAILER-DAEMON@mx.example.org\nContent-Type: multipart/mixed; boundary=b0\n\n")
	for i := range 50 {
		fmt.Fprintf(&nested, "--b%d\nContent-Type: multipart/mixed; boundary=b%d\n\n", i, i+1)
	}
	nested.WriteString("--b50\nContent-Type: message/delivery-status\n\nFinal-Recipient: rfc822; deep@example.org\nAction: failed\n")
	if got, err := parseReport([]byte(nested.String()), nullPath); err != nil || got.kind != kindNone {
		t.Errorf("a delivery-status part 50 levels deep was read: %d %v", got.kind, err)
	}
}

func TestFieldHelpers(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"rfc822; a@example.org":            "a@example.org",
		"RFC822;<a@example.org>":           "a@example.org",
		" rfc822 ;  <a@example.org>":       "a@example.org",
		"a@example.org":                    "a@example.org",
		`utf-8; \x{E9}t\x{E9}@example.org`: "été@example.org",
		`utf-8; bad\x{ZZ}@example.org`:     `bad\x{ZZ}@example.org`,
		`utf-8; big\x{110000}@example.org`: `big\x{110000}@example.org`,
		"":                                 "",
	} {
		if got := typedAddress(in); got != want {
			t.Errorf("typedAddress(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"dns; mx.example.org":              "mx.example.org",
		"DNS;mx.example.org.":              "mx.example.org",
		"dns; mx.example.org. (192.0.2.1)": "mx.example.org",
		"x-local; hub":                     "x-local; hub",
		"mx.example.org":                   "mx.example.org",
	} {
		if got := mtaName(in); got != want {
			t.Errorf("mtaName(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"5.1.1": "5.1.1", "4.4.7 (delivery time expired)": "4.4.7", "2.0.0": "2.0.0", "5.1.10": "5.1.10",
		"550": "", "15.1.1": "", "5.1.1234": "", "": "",
	} {
		if got := statusCode(in); got != want {
			t.Errorf("statusCode(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"said: 550 5.1.1 user unknown": "5.1.1", "(#5.7.1)": "5.7.1", "status 4.2.2.": "4.2.2",
		"version 5.1.1.4": "", "10.5.1.1": "", "2.0.0 ok": "", "192.0.2.5 refused": "",
	} {
		if got := findEnhancedCode(in); got != want {
			t.Errorf("findEnhancedCode(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"<abc@example.com>":          "abc@example.com",
		"  <abc@example.com> (note)": "abc@example.com",
		"abc@example.com":            "abc@example.com",
		"":                           "",
	} {
		if got := messageID(in); got != want {
			t.Errorf("messageID(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]*time.Time{
		"Tue, 17 Nov 2026 10:12:03 +0000 (UTC)": ptrTime(time.Date(2026, 11, 17, 10, 12, 3, 0, time.UTC)),
		"Tue, 17 Nov 2026 05:14:22 EST":         ptrTime(time.Date(2026, 11, 17, 10, 14, 22, 0, time.UTC)),
		"17 Nov 2026 03:00:00 PDT":              ptrTime(time.Date(2026, 11, 17, 10, 0, 0, 0, time.UTC)),
		"yesterday":                             nil,
		"":                                      nil,
	} {
		got := parseDate(in)
		if (got == nil) != (want == nil) || got != nil && !got.Equal(*want) {
			t.Errorf("parseDate(%q) = %v, want %v", in, got, want)
		}
	}

	block, rest := readFields([]byte("Subject: one\r\n two\r\nno colon here\r\n\tstray\r\nX-A : b\r\n\r\nbody"))
	if block.get("subject") != "one two" || block.get("X-A") != "b" || len(block) != 2 || string(rest) != "body" {
		t.Errorf("readFields: %#v rest %q", block, rest)
	}
	if got := clean("a\x00b\tc\xffd"); got != "a b c\uFFFDd" {
		t.Errorf("clean = %q", got)
	}
}

func TestQuoteLocalPart(t *testing.T) {
	for in, want := range map[string]string{
		"john@in.example":        "john@in.example",
		"j.o+tag@in.example":     "j.o+tag@in.example",
		"jöhn@in.example":        "jöhn@in.example",
		"john doe@in.example":    `"john doe"@in.example`,
		`a"b\c@in.example`:       `"a\"b\\c"@in.example`,
		".lead@in.example":       `".lead"@in.example`,
		"a..b@in.example":        `"a..b"@in.example`,
		"weird@local@in.example": `"weird@local"@in.example`,
		"postmaster":             "postmaster",
	} {
		if got := quoteLocalPart(in); got != want {
			t.Errorf("quoteLocalPart(%q) = %q, want %q", in, got, want)
		}
	}
}

// A message with more parts, or deeper nesting, than the walk reaches is reported as not whole: the parts
// past the bounds were neither read nor scanned, so the listener refuses it (errTooComplex).
func TestParseMailWholeReportsTheBounds(t *testing.T) {
	part := func(i int) string {
		return fmt.Sprintf("--B\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"f%d\"\r\n\r\nx\r\n", i)
	}
	flat := func(n int) []byte {
		var b strings.Builder
		b.WriteString("From: a@x.test\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary=\"B\"\r\n\r\n")
		for i := range n {
			b.WriteString(part(i))
		}
		b.WriteString("--B--\r\n")
		return []byte(b.String())
	}
	nested := func(depth int) []byte {
		body := "Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"deep\"\r\n\r\nx\r\n"
		for d := depth; d > 0; d-- {
			b := fmt.Sprintf("B%d", d)
			body = fmt.Sprintf("Content-Type: multipart/mixed; boundary=\"%s\"\r\n\r\n--%s\r\n%s--%s--\r\n", b, b, body, b)
		}
		return []byte("From: a@x.test\r\nSubject: s\r\n" + body)
	}
	for name, tc := range map[string]struct {
		raw   []byte
		whole bool
	}{
		"ten parts":      {flat(10), true},
		"600 parts":      {flat(600), false},
		"nested 5 deep":  {nested(5), true},
		"nested 12 deep": {nested(12), false},
	} {
		m, whole := parseMailWhole(tc.raw, "a@x.test", []string{"r@in.test"})
		if whole != tc.whole {
			t.Errorf("%s: whole = %v, want %v (%d attachments)", name, whole, tc.whole, len(m.Attachments))
		}
	}
}
