package inbound

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestParseMailFixtures: messages as real clients write them are read into decoded headers, bodies in
// UTF-8 and attachments with their names, inline flags and Content-IDs.
func TestParseMailFixtures(t *testing.T) {
	t.Parallel()
	type att struct {
		name, ctype, cid string
		inline           bool
	}
	tests := []struct {
		file                    string
		subject, fromName, from string
		text, html              string // substrings; "" means must be empty
		to, cc                  []string
		inReplyTo, references   string
		atts                    []att
	}{
		{file: "received-thunderbird-related.eml", subject: "Rechnung für März", fromName: "Ana Müller", from: "ana@example.org",
			html: "<p>Grüße,</p>", to: []string{"support@inbound.test"},
			atts: []att{{"logo.png", "image/png", "part1.logo@example.org", true}, {"Rechnung März.pdf", "application/pdf", "", false}}},
		{file: "received-outlook-winmail.eml", subject: "Réponse à votre demande", fromName: "François Lévêque", from: "francois@corp.example.com",
			text: "Voici le détail demandé. Cordialement, François", to: []string{"support@inbound.test"},
			cc: []string{"marie@corp.example.com", "ops@corp.example.com"}, inReplyTo: "<original-1@inbound.test>",
			references: "<original-0@inbound.test> <original-1@inbound.test>",
			atts:       []att{{"winmail.dat", "application/ms-tnef", "", false}}},
		{file: "received-applemail-shiftjis.eml", subject: "お問い合わせ", fromName: "山田 太郎", from: "taro@example.jp",
			text: "こんにちは。日本語のテストです。", html: "こんにちは", to: []string{"info@inbound.test"}},
		{file: "received-gmail-forward.eml", subject: "Fwd: Quarterly numbers", fromName: "Bob Smith", from: "bob.smith@gmail.com",
			text: "Forwarding as discussed.", html: `<div dir="ltr">Forwarding as discussed.</div>`, to: []string{"reports@inbound.test"},
			inReplyTo: "<orig@partner.example>", references: "<orig@partner.example>",
			atts: []att{{"Quarterly numbers.eml", "message/rfc822", "", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			m := parseMail(raw, "env@sender.test", []string{"x@inbound.test"})
			if m.Subject != tt.subject || m.FromName != tt.fromName || m.HeaderFrom != tt.from {
				t.Errorf("subject %q, from %q <%s>", m.Subject, m.FromName, m.HeaderFrom)
			}
			if (tt.text == "") != (m.Text == "") || !strings.Contains(m.Text, tt.text) {
				t.Errorf("text = %q, want it to contain %q", m.Text, tt.text)
			}
			if (tt.html == "") != (m.HTML == "") || !strings.Contains(m.HTML, tt.html) {
				t.Errorf("html = %q, want it to contain %q", m.HTML, tt.html)
			}
			if strings.Join(m.To, ",") != strings.Join(tt.to, ",") || strings.Join(m.Cc, ",") != strings.Join(tt.cc, ",") {
				t.Errorf("to %v cc %v", m.To, m.Cc)
			}
			if m.InReplyTo != tt.inReplyTo || m.References != tt.references {
				t.Errorf("in-reply-to %q references %q", m.InReplyTo, m.References)
			}
			if len(m.Attachments) != len(tt.atts) {
				t.Fatalf("%d attachments, want %d: %+v", len(m.Attachments), len(tt.atts), m.Attachments)
			}
			for i, w := range tt.atts {
				a := m.Attachments[i]
				if a.Filename != w.name || a.ContentType != w.ctype || a.ContentID != w.cid || a.Inline != w.inline || len(a.Data) == 0 {
					t.Errorf("attachment %d = %q %q %q inline=%v (%d bytes), want %+v", i, a.Filename, a.ContentType, a.ContentID, a.Inline, len(a.Data), w)
				}
			}
			if len(m.Headers["Message-Id"]) != 1 {
				t.Errorf("headers: %v", m.Headers)
			}
		})
	}
}

// TestParseMailBroken: a message whose MIME structure is broken still yields what could be read.
func TestParseMailBroken(t *testing.T) {
	t.Parallel()
	raw := []byte("Subject: half\r\nContent-Type: multipart/mixed; boundary=\"x\"\r\n\r\n--x\r\nContent-Type: text/plain\r\n\r\nhello\r\n")
	m := parseMail(raw, "", nil)
	if m.Subject != "half" || !strings.Contains(m.Text, "hello") {
		t.Fatalf("parsed %+v", m)
	}
	if m := parseMail([]byte("\x00\x01garbage"), "", nil); m.Raw == nil {
		t.Fatal("raw bytes lost")
	}
}

// TestParseMailHostile: whatever bytes a sender puts in a message, what is parsed out of it is valid UTF-8
// without NUL, header values are one line (no decoded CR or LF to inject a header into a forward), a raw
// 8-bit header reads as Latin-1 as mail clients show it, and the raw message stays as received.
func TestParseMailHostile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw         string
		subject, fromName string
		text, html        string
		filename, ctype   string
	}{
		{name: "latin-1 subject", raw: "From: a@example.org\r\nSubject: caf\xe9\r\n\r\nx\r\n", subject: "café", text: "x\r\n"},
		{name: "latin-1 display name", raw: "From: Jos\xe9 M\xfcller <Jose@Example.org>\r\nSubject: hi\r\n\r\nx\r\n",
			subject: "hi", fromName: "José Müller", text: "x\r\n"},
		{name: "nul in subject and body", raw: "Subject: a\x00b\r\n\r\nx\x00y\r\n", subject: "a b", text: "x\uFFFDy\r\n"},
		{name: "quoted-printable nul", raw: "Subject: qp\r\nContent-Type: text/plain; charset=utf-8\r\n" +
			"Content-Transfer-Encoding: quoted-printable\r\n\r\na=00b\r\n", subject: "qp", text: "a\uFFFDb\r\n"},
		{name: "encoded-word nul", raw: "Subject: =?utf-8?q?a=00b?=\r\n\r\nx\r\n", subject: "a b", text: "x\r\n"},
		{name: "encoded-word invalid utf-8", raw: "Subject: =?utf-8?q?a=FF=FEb?=\r\n\r\nx\r\n", subject: "a\uFFFDb", text: "x\r\n"},
		{name: "encoded-word crlf", raw: "From: =?utf-8?q?Eve=0D=0ABcc=3A_x=40evil.example?= <eve@example.org>\r\n" +
			"Subject: =?utf-8?q?fwd=0D=0ABcc:_x@evil.example?=\r\n\r\nx\r\n",
			subject: "fwd  Bcc: x@evil.example", fromName: "Eve  Bcc: x@evil.example", text: "x\r\n"},
		{name: "invalid utf-8 bodies", raw: "Subject: b\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: text/plain; charset=utf-8\r\n\r\nt\xff\x00\r\n--b\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" +
			"<p>\xfe\x00</p>\r\n--b--\r\n", subject: "b", text: "t\uFFFD\uFFFD", html: "<p>\uFFFD\uFFFD</p>"},
		{name: "attachment name", raw: "Subject: att\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: application/x-\x00bin\r\nContent-Disposition: attachment; filename=\"r\xe9sum\xe9=?utf-8?q?=00=0A?=.txt\"\r\n" +
			"Content-Id: <c\x00id>\r\n\r\ndata\r\n--b--\r\n", subject: "att", filename: "résumé  .txt", ctype: "application/x- bin"},
		{name: "encoded attachment name", raw: "Subject: att2\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: application/pdf; name=\"=?utf-8?q?a=00=FF=0D=0Ab.pdf?=\"\r\n\r\n%PDF\r\n--b--\r\n",
			subject: "att2", filename: "a \uFFFD  b.pdf", ctype: "application/pdf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := parseMail([]byte(tt.raw), "env\x00@sender.test", []string{"x\xff@inbound.test"})
			if string(m.Raw) != tt.raw {
				t.Error("the raw message changed")
			}
			if m.Subject != tt.subject || m.FromName != tt.fromName {
				t.Errorf("subject %q, from name %q; want %q, %q", m.Subject, m.FromName, tt.subject, tt.fromName)
			}
			if !strings.HasPrefix(m.Text, tt.text) || (tt.text == "") != (m.Text == "") || !strings.HasPrefix(m.HTML, tt.html) {
				t.Errorf("text %q html %q; want %q %q", m.Text, m.HTML, tt.text, tt.html)
			}
			if tt.filename != "" {
				if len(m.Attachments) != 1 || m.Attachments[0].Filename != tt.filename || m.Attachments[0].ContentType != tt.ctype {
					t.Errorf("attachments %+v; want %q %q", m.Attachments, tt.filename, tt.ctype)
				}
			}
			oneLine := []string{m.From, m.Subject, m.FromName, m.HeaderFrom, m.MessageID, m.InReplyTo, m.References}
			oneLine = append(append(append(oneLine, m.Rcpts...), m.To...), m.Cc...)
			for k, vs := range m.Headers {
				oneLine = append(append(oneLine, k), vs...)
			}
			for _, a := range m.Attachments {
				oneLine = append(oneLine, a.Filename, a.ContentType, a.ContentID)
			}
			for _, s := range oneLine {
				if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' }) {
					t.Errorf("header value %q is not one line of UTF-8", s)
				}
			}
			for _, s := range []string{m.Text, m.HTML} {
				if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
					t.Errorf("body %q is not UTF-8 without NUL", s)
				}
			}
		})
	}
}
