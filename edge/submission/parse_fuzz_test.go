package submission

import (
	"bytes"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// FuzzParseMessage feeds parseMessage what an authenticated client may submit: any bytes after DATA and any
// envelope recipients. It must not panic and may refuse only with invalid_argument. What it accepts must be
// a send request the core can take as it is: From, Reply-To, To and Cc parse back as RFC 5322 mailboxes;
// exactly the envelope recipients receive the message, each once (RFC 5321 §3.3: the envelope, not the
// header, decides); custom headers are X- fields with send-API names and no Postmill-reserved ones; at most
// 20 attachments, whose filename, content id and content type are one line each; and text bodies are UTF-8.
func FuzzParseMessage(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.eml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no fixtures: %v", err)
	}
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, "bob@rcpt.example,carol@rcpt.example,dave@rcpt.example")
		f.Add([]byte(strings.ReplaceAll(string(raw), "\n", "\r\n")), "BOB@rcpt.example")
	}
	for _, seed := range []struct{ msg, rcpts string }{
		{"From: a@sender.example\r\nTo: undisclosed-recipients:;\r\nSubject: s\r\n\r\nx\r\n", "one@rcpt.example,two@rcpt.example,ONE@rcpt.example"},
		{"From: a@sender.example\r\nTo: x@rcpt.example, Y@rcpt.example\r\nTo: z@rcpt.example\r\nCc: x@rcpt.example\r\nSubject: s\r\n\r\nx\r\n", "y@rcpt.example,z@rcpt.example,x@rcpt.example"},
		{"From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\nContent-Type: text/plain; charset=windows-1252\r\n\r\ncaf\xe9 \x80", "b@rcpt.example"},
		{"From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\nContent-Type: text/plain; charset=koi8-r\r\n\r\n\xc1\xc2", "b@rcpt.example"},
		{"From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\nX-Mailer: client 1.0\r\nx-postmill-tenant: other\r\nX-Long: folded\r\n continued\r\nContent-Type: text/html\r\n\r\n<b>hi</b>", "b@rcpt.example"},
		{"From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n" +
			"--B\r\nContent-Type: text/plain\r\n\r\nbody\r\n" +
			"--B\r\nContent-Type: image/png\r\nContent-Disposition: inline; filename=a.png\r\n\r\npng\r\n" +
			"--B\r\nContent-Type: image/png; name*=utf-8''%0D%0Ab.png\r\nContent-ID: <b\r\n @x>\r\n\r\npng\r\n" +
			"--B\r\nContent-Type: message/rfc822\r\n\r\nFrom: x@y.example\r\n\r\nhi\r\n--B--\r\n", "b@rcpt.example"},
		{"From: a@sender.example, b@sender.example\r\n\r\n", "b@rcpt.example"},
		{"From: =?utf-8?q?A=0D=0AB?= <a@sender.example>\r\nSubject: =?utf-8?q?a=0D=0Ab?=\r\nReply-To: \"q\\\"x\" <r@sender.example>\r\n\r\n", ""},
		{"From: <a@sender.example>\r\nTo: group: m@rcpt.example;, \"Name, Last\" <n@rcpt.example>\r\n\r\n", "n@rcpt.example,m@rcpt.example"},
		{"Content-Type: multipart/alternative; boundary=\"x\"\r\nFrom: a@sender.example\r\n\r\n--x\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!!\r\n--x", "b@rcpt.example"},
		{"", ""},
	} {
		f.Add([]byte(seed.msg), seed.rcpts)
	}
	f.Fuzz(func(t *testing.T, raw []byte, rcpts string) {
		var envelope []string
		if rcpts != "" {
			envelope = strings.Split(rcpts, ",")
		}
		req, err := parseMessage(bytes.NewReader(raw), envelope)
		if err != nil {
			if ports.ErrorCode(err) != ports.CodeInvalidArgument {
				t.Fatalf("refused with %v, want invalid_argument", err)
			}
			return
		}

		mustMailbox := func(what, s string) string {
			a, err := mail.ParseAddress(s)
			if err != nil {
				t.Fatalf("%s %q does not parse back: %v", what, s, err)
			}
			return a.Address
		}
		mustMailbox("from", req.From)
		if req.ReplyTo != "" {
			mustMailbox("reply-to", req.ReplyTo)
		}

		want := map[string]bool{}
		for _, e := range envelope {
			want[strings.ToLower(e)] = true
		}
		got := map[string]bool{}
		place := func(addr string) {
			key := strings.ToLower(addr)
			if got[key] {
				t.Fatalf("%q receives the message twice: to=%q cc=%q bcc=%q", addr, req.To, req.Cc, req.Bcc)
			}
			if !want[key] {
				t.Fatalf("%q is not an envelope recipient %q: to=%q cc=%q bcc=%q", addr, envelope, req.To, req.Cc, req.Bcc)
			}
			got[key] = true
		}
		for _, s := range append(append([]string{}, req.To...), req.Cc...) {
			place(mustMailbox("to/cc", s))
		}
		for _, s := range req.Bcc {
			place(s)
		}
		if len(got) != len(want) {
			t.Fatalf("envelope %q, but to=%q cc=%q bcc=%q", envelope, req.To, req.Cc, req.Bcc)
		}

		if len(req.Headers) > ports.MaxHeaders {
			t.Fatalf("%d custom headers", len(req.Headers))
		}
		for name, value := range req.Headers {
			if !validHeaderName(name) || droppedHeader(strings.ToLower(name)) {
				t.Fatalf("custom header %q kept", name)
			}
			if strings.ContainsAny(value, "\r\n") || !utf8.ValidString(value) || len(name)+2+utf8.RuneCountInString(value) > ports.MaxHeaderLineChars {
				t.Fatalf("custom header %s: %q is not one line the send API takes", name, value)
			}
		}
		if len(req.Attachments) > ports.MaxAttachments {
			t.Fatalf("%d attachments", len(req.Attachments))
		}
		for _, a := range req.Attachments {
			if a.Filename == "" || a.ContentType == "" || a.Inline && a.ContentID == "" {
				t.Fatalf("attachment %q (%q, id %q, inline %v) incomplete", a.Filename, a.ContentType, a.ContentID, a.Inline)
			}
			values := []string{a.Filename, a.ContentID, a.ContentType}
			for _, s := range values {
				if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
					t.Fatalf("attachment value %q is not one line", s)
				}
			}
		}
		if !utf8.ValidString(req.Text) || !utf8.ValidString(req.HTML) {
			t.Fatal("a text body is not UTF-8")
		}
	})
}
