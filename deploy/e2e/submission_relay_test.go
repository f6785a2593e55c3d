package e2e

import (
	"context"
	"fmt"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSubmissionThroughPostfix: a private Postfix relays mail for rcpt.example to Postmill's submission
// port, authenticating with AUTH PLAIN as the Postfix of an application server would (smtp_sasl_*), and
// Postmill delivers it to the recipients' MX. The message carries display names, an encoded word, an
// envelope-only recipient and an 8-bit body that Postfix passes on with BODY=8BITMIME.
func TestSubmissionThroughPostfix(t *testing.T) {
	t.Parallel()
	w := MustSubmissionWorld(t, nil)
	pf := MustPostfix(t, postfixConfig{Transports: map[string]string{"rcpt.example": smtpNexthop(w.app.SubmissionAddr())}})
	pf.mustUseSASL(t, w.app.SubmissionAddr(), w.user, w.pass)

	msg := "From: \"Ada Lovelace\" <ada@" + senderDomain + ">\r\n" +
		"To: \"Bob, the Builder\" <bob@rcpt.example>, =?utf-8?q?Zo=C3=AB?= <zoe@rcpt.example>\r\n" +
		"Cc: Carol <carol@rcpt.example>\r\n" +
		"Subject: Through Postfix\r\n" +
		"X-Test-Tag: postfix-relay\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" +
		"Grüße aus Postfix.\r\n"
	rcpts := []string{"bob@rcpt.example", "zoe@rcpt.example", "carol@rcpt.example", "blind@rcpt.example"}
	if err := smtp.SendMail(pf.addr, nil, "app@"+senderDomain, rcpts, []byte(msg)); err != nil {
		t.Fatalf("submitting to postfix: %v\n%s", err, pf.log())
	}
	d := waitDelivered(t, w.mx, "X-Test-Tag: postfix-relay")
	mustRecipients(t, d, rcpts...)
	mustHeader(t, d, "From", [2]string{"Ada Lovelace", "ada@" + senderDomain})
	mustHeader(t, d, "To", [2]string{"Bob, the Builder", "bob@rcpt.example"}, [2]string{"Zoë", "zoe@rcpt.example"})
	mustHeader(t, d, "Cc", [2]string{"Carol", "carol@rcpt.example"})
	if got := d.text(t); strings.TrimRight(got, "\r\n") != "Grüße aus Postfix." {
		t.Errorf("body %q", got)
	}
	if strings.Contains(string(d.data), "blind@") {
		t.Errorf("the envelope-only recipient shows in the headers:\n%s", d.data)
	}
	// Postfix handed the message over with AUTH and BODY=8BITMIME, and saw Postmill's queue id.
	pf.waitLog(t, 10*time.Second, "relay=127.0.0.1", "status=sent", "250 2.0.0 Ok: queued as ")
	pf.waitLog(t, time.Second, "MAIL FROM:<app@"+senderDomain+">", "BODY=8BITMIME")
}

// mustUseSASL makes the instance authenticate with AUTH PLAIN to nexthop (host:port) as user, then
// reloads it and waits until the reload is logged.
func (p *postfix) mustUseSASL(t *testing.T, nexthop, user, pass string) {
	t.Helper()
	host, port, _ := strings.Cut(nexthop, ":")
	passwords := filepath.Join(p.confDir, "sasl_passwd")
	if err := os.WriteFile(passwords, []byte(fmt.Sprintf("[%s]:%s %s:%s\n", host, port, user, pass)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	settings := []string{
		"smtp_sasl_auth_enable=yes",
		"smtp_sasl_password_maps=texthash:" + passwords,
		// Plaintext is allowed here: Postmill accepts AUTH without TLS from loopback clients only.
		"smtp_sasl_security_options=noanonymous",
		"smtp_sasl_mechanism_filter=plain",
		// The SMTP dialogue with Postmill goes to the maillog, so the test can read the MAIL command.
		"debug_peer_list=127.0.0.1",
	}
	if out, err := exec.CommandContext(ctx, filepath.Join(filepath.Dir(postfixBinary), "postconf"), append([]string{"-c", p.confDir, "-e"}, settings...)...).CombinedOutput(); err != nil {
		t.Fatalf("postconf: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, postfixBinary, "-c", p.confDir, "reload").CombinedOutput(); err != nil {
		t.Fatalf("postfix reload: %v\n%s", err, out)
	}
	p.waitLog(t, 15*time.Second, "reload")
}
