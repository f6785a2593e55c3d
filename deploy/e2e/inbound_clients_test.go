package e2e

import (
	"net"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitReceived polls the received-mail list until an email to rcpt with subject arrives and returns its
// detail.
func (w *inboundWorld) waitReceived(t *testing.T, rcpt, subject string) resp {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := expect(t, w.get("/v1/received-emails?limit=100", w.key), 200)
		for _, d := range l.body["data"].([]any) {
			m := d.(map[string]any)
			if m["to"] == rcpt && m["subject"] == subject {
				return expect(t, w.get("/v1/received-emails/"+m["id"].(string), w.key), 200)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no email to %s with subject %q within 30s: %s", rcpt, subject, l.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func attachmentNames(d resp) []string {
	var out []string
	for _, a := range d.body["attachments"].([]any) {
		out = append(out, a.(map[string]any)["filename"].(string))
	}
	return out
}

// TestInboundRealSenders: real MTAs and clients deliver into the MX listener (swaks, Python's smtplib, a
// private Postfix relaying to it) and messages as real mail clients write them come out parsed.
func TestInboundRealSenders(t *testing.T) {
	t.Parallel()
	w := mustInboundWorld(t)
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "catch_all", "action": "store"}), 201)
	host, port, _ := net.SplitHostPort(w.app.InboundAddr())

	t.Run("swaks", func(t *testing.T) {
		if _, err := exec.LookPath("swaks"); err != nil {
			missingEngine(t, "swaks is not installed")
		}
		att := filepath.Join(t.TempDir(), "report.csv")
		if err := os.WriteFile(att, []byte("a,b\n1,2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rcpt := "swaks@" + w.domain
		out, err := exec.Command("swaks", "--server", host, "--port", port, "--from", "tester@sender.example", "--to", rcpt,
			"--header", "Subject: via swaks", "--body", "sent by swaks", "--attach-type", "text/csv", "--attach-name", "report.csv",
			"--attach", "@"+att).CombinedOutput()
		if err != nil {
			t.Fatalf("swaks: %v\n%s", err, out)
		}
		d := w.waitReceived(t, rcpt, "via swaks")
		if !strings.Contains(d.str("text"), "sent by swaks") || strings.Join(attachmentNames(d), ",") != "report.csv" {
			t.Errorf("swaks message: text %q, attachments %v", d.str("text"), attachmentNames(d))
		}
	})

	t.Run("python smtplib", func(t *testing.T) {
		py, err := exec.LookPath("python3")
		if err != nil {
			missingEngine(t, "python3 is not installed")
		}
		rcpt := "python@" + w.domain
		script := `
import smtplib, sys
from email.message import EmailMessage
m = EmailMessage()
m["From"] = "Zoë <zoe@sender.example>"
m["To"] = sys.argv[3]
m["Subject"] = "via smtplib ✓"
m.set_content("Grüße aus Python", charset="iso-8859-1")
m.add_alternative("<p>Grüße</p>", subtype="html")
m.add_attachment(b"%PDF-1.4 test", maintype="application", subtype="pdf", filename="Übersicht.pdf")
with smtplib.SMTP(sys.argv[1], int(sys.argv[2])) as s:
    s.send_message(m)
`
		if out, err := exec.Command(py, "-c", script, host, port, rcpt).CombinedOutput(); err != nil {
			t.Fatalf("python: %v\n%s", err, out)
		}
		d := w.waitReceived(t, rcpt, "via smtplib ✓")
		if strings.TrimSpace(d.str("text")) != "Grüße aus Python" || !strings.Contains(d.str("html"), "<p>Grüße</p>") ||
			strings.Join(attachmentNames(d), ",") != "Übersicht.pdf" || d.str("headerFromName") != "Zoë" {
			t.Errorf("python message: %s", d.raw)
		}
	})

	t.Run("postfix", func(t *testing.T) {
		pf := MustPostfix(t, postfixConfig{Transports: map[string]string{w.domain: smtpNexthop(w.app.InboundAddr())}})
		rcpt := "relay@" + w.domain
		msg := "From: a@sender.example\r\nTo: " + rcpt + "\r\nSubject: via postfix\r\nMessage-ID: <pf@sender.example>\r\n\r\nrelayed\r\n"
		if err := smtp.SendMail(pf.addr, nil, "a@sender.example", []string{rcpt}, []byte(msg)); err != nil {
			t.Fatalf("postfix: %v\n%s", err, pf.log())
		}
		d := w.waitReceived(t, rcpt, "via postfix")
		if strings.TrimSpace(d.str("text")) != "relayed" {
			t.Errorf("postfix message text %q", d.str("text"))
		}
		if h, _ := d.body["headers"].(map[string]any); h["Received"] == nil {
			t.Errorf("no Received header from Postfix: %v", h)
		}
		// Postfix logs the hand-over to Postmill's MX listener as delivered.
		pf.waitLog(t, 10*time.Second, "status=sent", rcpt)
	})

	t.Run("client fixtures", func(t *testing.T) {
		for _, f := range []struct{ file, rcpt, subject, text string }{
			{"received-thunderbird-related.eml", "support@" + w.domain, "Rechnung für März", ""},
			{"received-outlook-winmail.eml", "support@" + w.domain, "Réponse à votre demande", "Voici le détail demandé"},
			{"received-applemail-shiftjis.eml", "info@" + w.domain, "お問い合わせ", "日本語のテスト"},
			{"received-gmail-forward.eml", "reports@" + w.domain, "Fwd: Quarterly numbers", "Forwarding as discussed."},
		} {
			raw, err := os.ReadFile(filepath.Join("..", "..", "inbound", "testdata", f.file))
			if err != nil {
				t.Fatal(err)
			}
			if _, derr := w.send(t, "sender@example.org", []string{f.rcpt}, string(raw)); derr != nil {
				t.Fatalf("%s: %v", f.file, derr)
			}
			d := w.waitReceived(t, f.rcpt, f.subject)
			if !strings.Contains(d.str("text"), f.text) {
				t.Errorf("%s: text %q", f.file, d.str("text"))
			}
			if f.file == "received-outlook-winmail.eml" && strings.Join(attachmentNames(d), ",") != "winmail.dat" {
				t.Errorf("winmail.dat not kept as an attachment: %v", attachmentNames(d))
			}
		}
	})
}

// TestInboundHostileMessages: mail with bytes PostgreSQL text refuses (NUL, invalid UTF-8), raw Latin-1
// headers as legacy software writes them, and encoded-words that decode to NUL, invalid UTF-8 or a line
// break is accepted (250, never a 451 the sender would retry for days), stored with UTF-8 values on one
// line, and its raw message is kept byte for byte.
func TestInboundHostileMessages(t *testing.T) {
	t.Parallel()
	w := mustInboundWorld(t)
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "catch_all", "action": "store"}), 201)
	host, port, _ := net.SplitHostPort(w.app.InboundAddr())

	// The audit's reproduction: Python's smtplib sends a raw Latin-1 Subject; a 4xx raises SMTPDataError.
	py, err := exec.LookPath("python3")
	if err != nil {
		missingEngine(t, "python3 is not installed")
	}
	script := `
import smtplib, sys
msg = b"From: Jos\xe9 M\xfcller <jose@sender.example>\r\nTo: " + sys.argv[3].encode() + b"\r\nSubject: caf\xe9\r\n\r\ncaf\xe9 cr\xe8me\r\n"
with smtplib.SMTP(sys.argv[1], int(sys.argv[2])) as s:
    s.sendmail("jose@sender.example", [sys.argv[3]], msg)
`
	if out, err := exec.Command(py, "-c", script, host, port, "latin1@"+w.domain).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	d := w.waitReceived(t, "latin1@"+w.domain, "café")
	if d.str("headerFromName") != "José Müller" || d.str("headerFrom") != "jose@sender.example" || d.str("text") != "caf\uFFFD cr\uFFFDme\r\n" ||
		d.body["headers"].(map[string]any)["Subject"] != "café" {
		t.Errorf("latin-1 message: %s", d.raw)
	}

	for _, c := range []struct {
		name, raw, subject string
		check              func(t *testing.T, d resp)
	}{
		{name: "nul", raw: "From: =?utf-8?q?Eve=00Smith?= <eve@sender.example>\r\nSubject: a\x00b =?utf-8?q?c=00d?=\r\n" +
			"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\none=00two\x00\r\n--b\r\n" +
			"Content-Type: text/html; charset=utf-8\r\n\r\n<p>\xff\x00</p>\r\n--b\r\n" +
			"Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"x\x00=?utf-8?q?=00y?=.txt\"\r\n\r\ndata\r\n--b--\r\n",
			subject: "a b c d", check: func(t *testing.T, d resp) {
				if d.str("headerFromName") != "Eve Smith" || !strings.HasPrefix(d.str("text"), "one\uFFFDtwo") ||
					!strings.HasPrefix(d.str("html"), "<p>\uFFFD\uFFFD</p>") || strings.Join(attachmentNames(d), ",") != "x  y.txt" {
					t.Errorf("stored: %s", d.raw)
				}
			}},
		{name: "invalid utf-8 word", raw: "From: a@sender.example\r\nSubject: =?utf-8?q?a=FF=FEb?=\r\n\r\nx\r\n", subject: "a\uFFFDb"},
		{name: "crlf word", raw: "From: =?utf-8?q?Eve=0D=0ABcc=3A_x=40evil.example?= <eve@sender.example>\r\n" +
			"Subject: =?utf-8?q?fwd=0D=0ABcc:_x@evil.example?=\r\n\r\nx\r\n", subject: "fwd  Bcc: x@evil.example",
			check: func(t *testing.T, d resp) {
				if d.str("headerFromName") != "Eve  Bcc: x@evil.example" || d.body["headers"].(map[string]any)["Subject"] != "fwd  Bcc: x@evil.example" {
					t.Errorf("stored: %s", d.raw)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rcpt := strings.ReplaceAll(c.name, " ", "-") + "@" + w.domain
			if _, derr := w.send(t, "sender@example.org", []string{rcpt}, c.raw); derr != nil {
				t.Fatalf("DATA answered %v, want 250", derr)
			}
			d := w.waitReceived(t, rcpt, c.subject)
			if c.check != nil {
				c.check(t, d)
			}
			if raw := expect(t, w.get("/v1/received-emails/"+d.str("id")+"/raw", w.key), 200); string(raw.raw) != c.raw {
				t.Errorf("raw message changed: %q", raw.raw)
			}
		})
	}
}
