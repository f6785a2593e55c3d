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
