package e2e

import (
	"bytes"
	"context"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/deploy/app"
	"github.com/postmill/postmill/ports"
)

// Submission tests with SMTP clients nobody on the team wrote: Python's smtplib and email package, swaks,
// and a Postfix relaying with SASL. Each asserts what reaches the recipient's MX (the sink): envelope
// recipients, and header fields with their display names decoded as a mail reader would.

// submissionWorld is a mail world with an SMTP credential of its organization, and a second MX on
// 127.0.0.2 that offers SMTPUTF8 (RFC 6531) for intl.example, so mail to UTF-8 mailboxes can be delivered.
type submissionWorld struct {
	*mailWorld
	user, pass string
	host, port string
	intl       *sink
}

// MustSubmissionWorld starts the world; mutate may change the configuration first.
func MustSubmissionWorld(t *testing.T, mutate func(*app.Config)) *submissionWorld {
	t.Helper()
	w := MustMailWorld(t, func(c *app.Config) {
		c.MTAAllowNets = append(c.MTAAllowNets, netip.MustParsePrefix("127.0.0.2/32"))
		if mutate != nil {
			mutate(c)
		}
	})
	sw := &submissionWorld{mailWorld: w}
	cred := expect(t, w.post("/v1/smtp-credentials", w.owner.access, nil), 201)
	sw.user, sw.pass = cred.str("username"), cred.str("password")
	var err error
	if sw.host, sw.port, err = net.SplitHostPort(w.app.SubmissionAddr()); err != nil {
		t.Fatal(err)
	}
	sw.intl = mustUTF8Sink(t, "127.0.0.2", w.mx.port())
	w.dns.SetMX("intl.example", ports.MX{Host: "mx.intl.example", Preference: 10})
	w.dns.SetA("mx.intl.example", netip.MustParseAddr("127.0.0.2"))
	return sw
}

// mustUTF8Sink is a sink whose server offers SMTPUTF8; it is skipped where 127.0.0.2 cannot be bound.
func mustUTF8Sink(t *testing.T, host, port string) *sink {
	t.Helper()
	s := &sink{reject: map[string]bool{}, defers: map[string]bool{}}
	srv := smtp.NewServer(&sinkBackend{s: s})
	srv.Domain = "intl.sink.test"
	srv.EnableSMTPUTF8 = true
	srv.ReadTimeout, srv.WriteTimeout = 30*time.Second, 30*time.Second
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		t.Skipf("a second loopback MX on %s: %v", host, err)
	}
	s.srv, s.addr = srv, ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// delivered is a mail as the recipient's MX received it, with its header read by net/mail.
type delivered struct {
	sunkMail
	msg *mail.Message
}

// waitDelivered waits for the mail containing needle at s and parses it.
func waitDelivered(t *testing.T, s *sink, needle string) delivered {
	t.Helper()
	m := s.waitFor(t, needle, 60*time.Second)
	msg, err := mail.ReadMessage(bytes.NewReader(m.data))
	if err != nil {
		t.Fatalf("the delivered mail does not parse: %v\n%s", err, m.data)
	}
	return delivered{sunkMail: m, msg: msg}
}

// names returns the display names and addresses of an address header field, decoded ("" name when none).
func (d delivered) names(t *testing.T, field string) [][2]string {
	t.Helper()
	if d.msg.Header.Get(field) == "" {
		return nil
	}
	list, err := d.msg.Header.AddressList(field)
	if err != nil {
		t.Fatalf("%s: %q does not parse: %v", field, d.msg.Header.Get(field), err)
	}
	out := make([][2]string, len(list))
	for i, a := range list {
		out[i] = [2]string{a.Name, a.Address}
	}
	return out
}

// subject is the decoded Subject.
func (d delivered) subject(t *testing.T) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(d.msg.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("Subject %q: %v", d.msg.Header.Get("Subject"), err)
	}
	return s
}

// text is the body of a single-part mail, quoted-printable decoded.
func (d delivered) text(t *testing.T) string {
	t.Helper()
	var r io.Reader = d.msg.Body
	if strings.EqualFold(d.msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		r = quotedprintable.NewReader(r)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mustRecipients fails unless the envelope recipients are exactly want, in any order.
func mustRecipients(t *testing.T, d delivered, want ...string) {
	t.Helper()
	got := slices.Clone(d.to)
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("envelope recipients %q, want %q", got, want)
	}
}

// mustHeader fails unless the field's mailboxes are want.
func mustHeader(t *testing.T, d delivered, field string, want ...[2]string) {
	t.Helper()
	if got := d.names(t, field); !slices.Equal(got, want) {
		t.Errorf("%s: %q (raw %q), want %q", field, got, d.msg.Header.Get(field), want)
	}
}

// storedRecipients reads the recipients table for a message: address and name of each, in order.
func (w *submissionWorld) storedRecipients(t *testing.T, messageID string) [][2]string {
	t.Helper()
	rows, err := w.app.Store().Pool().Query(context.Background(),
		`SELECT address, name FROM recipients WHERE message_id = $1 ORDER BY position`, messageID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var a, n string
		if err := rows.Scan(&a, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]string{a, n})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// messageIDOf finds the organization's latest message whose subject is subject.
func (w *submissionWorld) messageIDOf(t *testing.T, subject string) string {
	t.Helper()
	page := expect(t, w.get("/v1/emails?limit=100", w.owner.access), 200)
	for _, it := range page.body["data"].([]any) {
		if m := it.(map[string]any); m["subject"] == subject {
			return m["id"].(string)
		}
	}
	t.Fatalf("no message with subject %q: %s", subject, page.raw)
	return ""
}

const pythonClient = `
import smtplib, sys
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage

host, port, user, password, domain = sys.argv[1:6]

with smtplib.SMTP(host, int(port), timeout=30) as s:
    s.ehlo()
    assert s.has_extn("smtputf8") and s.has_extn("8bitmime"), s.esmtp_features
    s.login(user, password)

    # What an application sends: display names (one with a comma, one that needs RFC 2047), Cc, a Bcc
    # that smtplib turns into an envelope-only recipient, an HTML alternative and an attachment.
    m = EmailMessage()
    m["From"] = Address("Ada Lovelace", "ada", domain)
    m["To"] = [Address("Bob, the Builder", "bob", "rcpt.example"), Address("Zoë Ünicode", "zoe", "rcpt.example")]
    m["Cc"] = Address("Carol", "carol", "rcpt.example")
    m["Bcc"] = Address("Hidden Person", "hidden", "rcpt.example")
    m["Reply-To"] = Address("Support Désk", "support", domain)
    m["Subject"] = "Python: Grüße"
    m["X-Test-Tag"] = "python-names"
    # A reply: its thread must survive the submission.
    m["In-Reply-To"] = "<parent@client.example>"
    m["References"] = "<root@client.example> <parent@client.example>"
    m.set_content("Hello from Python's smtplib.\n")
    m.add_alternative("<p>Hello from <b>Python</b></p>", subtype="html")
    m.add_attachment(b"%PDF-1.4 test", maintype="application", subtype="pdf", filename="report.pdf")
    assert not s.send_message(m)

    # Only a Bcc recipient.
    b = EmailMessage()
    b["From"] = "ada@" + domain
    b["To"] = "undisclosed-recipients:;"
    b["Subject"] = "Python: Bcc only"
    b["X-Test-Tag"] = "python-bcc"
    b.set_content("nobody is named\n")
    assert not s.send_message(b, to_addrs=["quiet@rcpt.example"])

    # SMTPUTF8 and 8BITMIME: raw UTF-8 header fields (RFC 6532) and an 8-bit body.
    u = EmailMessage(policy=policy.SMTPUTF8)
    u["From"] = "Adá <ada@" + domain + ">"
    u["To"] = "Jöhn Dœ <john@rcpt.example>"
    u["Subject"] = "Python: ünïcödé"
    u["X-Test-Tag"] = "python-utf8"
    u.set_content("Hällo in 8 bits.\n", cte="8bit")
    raw = u.as_bytes()
    assert "Jöhn".encode() in raw and b"=?" not in raw, raw
    assert not s.sendmail("ada@" + domain, ["john@rcpt.example"], raw, mail_options=["SMTPUTF8", "BODY=8BITMIME"])

    # A UTF-8 mailbox: smtplib switches to SMTPUTF8 by itself.
    i = EmailMessage()
    i["From"] = "ada@" + domain
    i["To"] = "Jöhn <jöhn@intl.example>"
    i["Subject"] = "Python: international mailbox"
    i["X-Test-Tag"] = "python-intl"
    i.set_content("hello\n")
    assert not s.send_message(i)
print("sent")
`

// TestSubmissionPythonSmtplib submits with Python's smtplib and email package.
func TestSubmissionPythonSmtplib(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		missingEngine(t, "python3 is not installed")
	}
	w := MustSubmissionWorld(t, nil)
	script := filepath.Join(t.TempDir(), "client.py")
	if err := os.WriteFile(script, []byte(pythonClient), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, script, w.host, w.port, w.user, w.pass, senderDomain).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sent") {
		t.Fatalf("python client: %v\n%s", err, out)
	}

	d := waitDelivered(t, w.mx, "X-Test-Tag: python-names")
	mustRecipients(t, d, "bob@rcpt.example", "zoe@rcpt.example", "carol@rcpt.example", "hidden@rcpt.example")
	mustHeader(t, d, "From", [2]string{"Ada Lovelace", "ada@" + senderDomain})
	mustHeader(t, d, "To", [2]string{"Bob, the Builder", "bob@rcpt.example"}, [2]string{"Zoë Ünicode", "zoe@rcpt.example"})
	mustHeader(t, d, "Cc", [2]string{"Carol", "carol@rcpt.example"})
	mustHeader(t, d, "Reply-To", [2]string{"Support Désk", "support@" + senderDomain})
	if got := d.subject(t); got != "Python: Grüße" {
		t.Errorf("Subject %q", got)
	}
	if irt, refs := d.msg.Header.Get("In-Reply-To"), d.msg.Header.Get("References"); irt != "<parent@client.example>" ||
		refs != "<root@client.example> <parent@client.example>" {
		t.Errorf("threading fields In-Reply-To %q, References %q: the client's, kept", irt, refs)
	}
	if bytes.Contains(d.data, []byte("hidden")) || bytes.Contains(d.data, []byte("Hidden")) || d.msg.Header.Get("Bcc") != "" {
		t.Errorf("the Bcc recipient shows in the delivered mail:\n%s", d.data)
	}
	if !bytes.Contains(d.data, []byte("report.pdf")) || !bytes.Contains(d.data, []byte("text/html")) {
		t.Errorf("the attachment or the HTML part is missing:\n%s", d.data)
	}
	// The recipients are stored by their bare addresses, with the names beside them (smtplib removes the
	// Bcc field before sending, so that recipient is known by its envelope address alone).
	id := w.messageIDOf(t, "Python: Grüße")
	want := [][2]string{{"bob@rcpt.example", "Bob, the Builder"}, {"zoe@rcpt.example", "Zoë Ünicode"}, {"carol@rcpt.example", "Carol"}, {"hidden@rcpt.example", ""}}
	if got := w.storedRecipients(t, id); !slices.Equal(got, want) {
		t.Errorf("stored recipients %q, want %q", got, want)
	}

	bcc := waitDelivered(t, w.mx, "X-Test-Tag: python-bcc")
	mustRecipients(t, bcc, "quiet@rcpt.example")
	if bytes.Contains(bcc.data, []byte("quiet@")) {
		t.Errorf("the Bcc-only recipient shows in the headers:\n%s", bcc.data)
	}

	u := waitDelivered(t, w.mx, "X-Test-Tag: python-utf8")
	mustRecipients(t, u, "john@rcpt.example")
	mustHeader(t, u, "From", [2]string{"Adá", "ada@" + senderDomain})
	mustHeader(t, u, "To", [2]string{"Jöhn Dœ", "john@rcpt.example"})
	if got := u.subject(t); got != "Python: ünïcödé" {
		t.Errorf("Subject %q", got)
	}
	if got := u.text(t); strings.TrimRight(got, "\r\n") != "Hällo in 8 bits." {
		t.Errorf("body %q", got)
	}

	i := waitDelivered(t, w.intl, "X-Test-Tag: python-intl")
	mustRecipients(t, i, "jöhn@intl.example")
	mustHeader(t, i, "To", [2]string{"Jöhn", "jöhn@intl.example"})
}

// TestSubmissionSwaks submits with swaks: AUTH LOGIN and PLAIN, encoded words in two charsets, Cc, an
// envelope-only recipient, a refused password, and the lockout after repeated ones.
func TestSubmissionSwaks(t *testing.T) {
	t.Parallel()
	swaks, err := exec.LookPath("swaks")
	if err != nil {
		missingEngine(t, "swaks is not installed (deploy/scripts/test-deps.sh installs it)")
	}
	w := MustSubmissionWorld(t, nil)
	run := func(auth, password, rcpts, data string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The message comes from a file and the password from swaks's prompt on standard input: an API
		// key may begin with "-", which swaks reads as an option wherever it is given as an argument.
		msgFile := filepath.Join(t.TempDir(), "message.eml")
		if err := os.WriteFile(msgFile, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, swaks, "--server", w.host, "--port", w.port, "--timeout", "30s",
			"--auth", auth, "--auth-user", w.user, "--auth-password",
			"--from", "ada@"+senderDomain, "--to", rcpts, "--data", "@"+msgFile)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no .netrc to take a password from
		cmd.Stdin = strings.NewReader(password + "\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	msg := "From: =?utf-8?b?QWTDoSBMb3ZlbGFjZQ==?= <ada@" + senderDomain + ">\n" +
		"To: =?iso-8859-1?q?Bj=F6rn?= <bob@rcpt.example>\n" +
		"Cc: \"Lovelace, Carol (CC)\" <carol@rcpt.example>\n" +
		"Subject: =?utf-8?q?swaks_=E2=9C=93?=\n" +
		"X-Test-Tag: swaks-login\n\nSent by swaks.\n"
	if out, err := run("LOGIN", w.pass, "bob@rcpt.example,carol@rcpt.example,secret@rcpt.example", msg); err != nil {
		t.Fatalf("swaks: %v\n%s", err, out)
	} else if !strings.Contains(out, "250 2.0.0 Ok: queued as ") {
		t.Errorf("swaks saw no queued reply:\n%s", out)
	}
	d := waitDelivered(t, w.mx, "X-Test-Tag: swaks-login")
	mustRecipients(t, d, "bob@rcpt.example", "carol@rcpt.example", "secret@rcpt.example")
	mustHeader(t, d, "From", [2]string{"Adá Lovelace", "ada@" + senderDomain})
	mustHeader(t, d, "To", [2]string{"Björn", "bob@rcpt.example"})
	mustHeader(t, d, "Cc", [2]string{"Lovelace, Carol (CC)", "carol@rcpt.example"})
	if got := d.subject(t); got != "swaks ✓" {
		t.Errorf("Subject %q", got)
	}
	if bytes.Contains(d.data, []byte("secret@")) {
		t.Errorf("the envelope-only recipient shows in the headers:\n%s", d.data)
	}

	// A wrong password is 535 and nothing is sent; the default lockout (5 failures from one address)
	// then answers 454 even for the right password. The wrong one begins with "-", as a key may: it still
	// reaches the server.
	for i := range 5 {
		out, err := run("PLAIN", "-wrong-"+w.pass, "bob@rcpt.example", "Subject: no\n\nno\n")
		if err == nil || !strings.Contains(out, "535 5.7.8") {
			t.Fatalf("wrong password %d: %v\n%s", i+1, err, out)
		}
	}
	out, err := run("PLAIN", w.pass, "bob@rcpt.example", "Subject: no\n\nno\n")
	if err == nil || !strings.Contains(out, "454 4.7.0 Too many failed authentication attempts") {
		t.Fatalf("the right password during the lockout: %v\n%s", err, out)
	}
}
