package inbound

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
