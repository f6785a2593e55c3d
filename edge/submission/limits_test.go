package submission_test

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/mail"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/edge/submission"
)

// rawClient is a hand-driven SMTP connection from a chosen loopback address, for exact replies.
type rawClient struct {
	t  *testing.T
	tp *textproto.Conn
}

// dialFrom connects to addr from local (nil: any loopback address) and reads the greeting, which must
// have code greeting.
func dialFrom(t *testing.T, addr string, local net.Addr, greeting int) *rawClient {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: local}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	c := &rawClient{t: t, tp: textproto.NewConn(conn)}
	if code, msg, err := c.tp.ReadResponse(0); code != greeting {
		t.Fatalf("greeting %d %q (%v), want %d", code, msg, err, greeting)
	}
	return c
}

// cmd sends one command line and returns the reply's code and text.
func (c *rawClient) cmd(format string, args ...any) (int, string) {
	c.t.Helper()
	if err := c.tp.PrintfLine(format, args...); err != nil {
		c.t.Fatal(err)
	}
	code, msg, err := c.tp.ReadResponse(0)
	if code == 0 {
		c.t.Fatalf("no reply to %q: %v", format, err)
	}
	return code, msg
}

// bdat sends one BDAT chunk (RFC 3030: the chunk follows the command line with no line ending of its own).
func (c *rawClient) bdat(chunk string, last bool) (int, string) {
	c.t.Helper()
	suffix := ""
	if last {
		suffix = " LAST"
	}
	if _, err := fmt.Fprintf(c.tp.W, "BDAT %d%s\r\n%s", len(chunk), suffix, chunk); err != nil || c.tp.W.Flush() != nil {
		c.t.Fatalf("BDAT: %v", err)
	}
	code, msg, err := c.tp.ReadResponse(0)
	if code == 0 {
		c.t.Fatalf("no reply to BDAT: %v", err)
	}
	return code, msg
}

// authPlain runs AUTH PLAIN with an initial response (RFC 4616).
func (c *rawClient) authPlain(user, pass string) (int, string) {
	c.t.Helper()
	return c.cmd("AUTH PLAIN %s", base64.StdEncoding.EncodeToString([]byte("\x00"+user+"\x00"+pass)))
}

// loopback returns another loopback client address, skipping the test where it cannot be bound.
func loopback(t *testing.T, last byte) *net.TCPAddr {
	t.Helper()
	a := &net.TCPAddr{IP: net.IPv4(127, 0, 0, last)}
	ln, err := net.ListenTCP("tcp", a)
	if err != nil {
		t.Skipf("%v is not usable here: %v", a.IP, err)
	}
	ln.Close()
	return a
}

// TestAuthLockoutPerAddress: K wrong passwords from one address lock that address out with 454 4.7.0 —
// even for the right password, and without asking the core — while another address still authenticates;
// the lockout ends after its time, and the next one lasts twice as long.
func TestAuthLockoutPerAddress(t *testing.T) {
	t.Parallel()
	fake := &fakeCore{}
	b := MustStartSubmission(t, fake, func(c *submission.Config) {
		c.AuthLockout = submission.LockoutConfig{MaxFailuresPerIP: 3, MaxFailuresPerUser: 100, Lockout: time.Second, MaxLockout: time.Minute}
	})
	c := dialFrom(t, b.addr, nil, 220)
	c.cmd("EHLO client.test")
	for i := range 3 {
		if code, msg := c.authPlain(smtpUser, "guess"); code != 535 || !strings.HasPrefix(msg, "5.7.8") {
			t.Fatalf("wrong password %d: %d %q", i+1, code, msg)
		}
	}
	if code, msg := c.authPlain(smtpUser, smtpPass); code != 454 || msg != "4.7.0 Too many failed authentication attempts, try again in 1 seconds" {
		t.Fatalf("the right password during the lockout: %d %q", code, msg)
	}
	if n := fake.auths.Load(); n != 3 {
		t.Errorf("the core was asked %d times, want 3 (none during the lockout)", n)
	}
	// A new connection from the same address is locked out too; LOGIN as well as PLAIN.
	again := dialFrom(t, b.addr, nil, 220)
	again.cmd("EHLO client.test")
	if code, _ := again.cmd("AUTH LOGIN %s", base64.StdEncoding.EncodeToString([]byte(smtpUser))); code != 334 {
		t.Fatalf("AUTH LOGIN: %d", code)
	}
	if code, _ := again.cmd("%s", base64.StdEncoding.EncodeToString([]byte(smtpPass))); code != 454 {
		t.Errorf("AUTH LOGIN during the lockout: %d", code)
	}
	// Another client address is not affected.
	other := dialFrom(t, b.addr, loopback(t, 2), 220)
	other.cmd("EHLO other.test")
	if code, msg := other.authPlain(smtpUser, smtpPass); code != 235 {
		t.Errorf("another address: %d %q", code, msg)
	}

	time.Sleep(1100 * time.Millisecond)
	if code, msg := c.authPlain(smtpUser, smtpPass); code != 235 {
		t.Fatalf("after the lockout: %d %q", code, msg)
	}
	// Backoff: the next lockout of the address lasts two seconds.
	late := dialFrom(t, b.addr, nil, 220)
	late.cmd("EHLO client.test")
	for range 3 {
		late.authPlain(smtpUser, "guess")
	}
	if code, msg := late.authPlain(smtpUser, smtpPass); code != 454 || !strings.HasSuffix(msg, "try again in 2 seconds") {
		t.Errorf("second lockout: %d %q", code, msg)
	}
	if strings.Contains(b.logText(), "guess") || strings.Contains(b.logText(), smtpPass) {
		t.Errorf("a password in the log: %s", b.logText())
	}
	if !strings.Contains(b.logText(), "locked out") {
		t.Errorf("the lockout is not logged: %s", b.logText())
	}
}

// TestAuthLockoutPerUsername: failures for one username from several addresses lock the username out,
// from any address.
func TestAuthLockoutPerUsername(t *testing.T) {
	t.Parallel()
	fake := &fakeCore{}
	b := MustStartSubmission(t, fake, func(c *submission.Config) {
		c.AuthLockout = submission.LockoutConfig{MaxFailuresPerIP: 100, MaxFailuresPerUser: 2}
	})
	for i, local := range []net.Addr{nil, loopback(t, 2)} {
		c := dialFrom(t, b.addr, local, 220)
		c.cmd("EHLO client.test")
		if code, _ := c.authPlain(smtpUser, "guess"); code != 535 {
			t.Fatalf("failure %d: %d", i+1, code)
		}
	}
	c := dialFrom(t, b.addr, loopback(t, 3), 220)
	c.cmd("EHLO client.test")
	if code, msg := c.authPlain(smtpUser, smtpPass); code != 454 || !strings.Contains(msg, "try again in 60 seconds") {
		t.Errorf("the locked-out username from a third address: %d %q", code, msg)
	}
	// The address itself is not locked out: another username is still asked about.
	if code, _ := c.authPlain(apiUser, smtpPass); code != 535 {
		t.Errorf("another username from that address: %d", code)
	}
}

// TestConnectionLimitsPerAddress: the submission port serves at most MaxConnectionsPerIP sessions of one
// client address; the next one is greeted with 421 and closed.
func TestConnectionLimitsPerAddress(t *testing.T) {
	t.Parallel()
	b := MustStartSubmission(t, &fakeCore{}, func(c *submission.Config) { c.MaxConnectionsPerIP = 2 })
	dialFrom(t, b.addr, nil, 220)
	dialFrom(t, b.addr, nil, 220)
	c := dialFrom(t, b.addr, nil, 421)
	if _, _, err := c.tp.ReadResponse(0); err == nil {
		t.Error("the refused connection stayed open")
	}
	dialFrom(t, b.addr, loopback(t, 2), 220)
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	d := submission.Defaults
	if d.Addr != "127.0.0.1:1587" || d.MaxMessageBytes != 40<<20 || d.MaxConnections <= d.MaxConnectionsPerIP || d.MaxConnectionsPerIP < 1 {
		t.Errorf("Defaults %+v", d)
	}
	for _, bad := range []submission.Config{
		{AuthLockout: submission.LockoutConfig{Lockout: -time.Second}},
		{AuthLockout: submission.LockoutConfig{Lockout: time.Hour, MaxLockout: time.Minute}},
		{Config: smtpd.Config{MaxConnections: 3, MaxConnectionsPerIP: 4}},
	} {
		if err := bad.Validate(); err == nil || !strings.HasPrefix(err.Error(), "submission: ") {
			t.Errorf("Validate(%+v) = %v", bad, err)
		}
	}
}

// TestSMTPUTF8And8BITMIME: the server offers both extensions and takes what a client sends with them: a
// UTF-8 envelope mailbox, raw UTF-8 header fields (RFC 6532) and an 8-bit body.
func TestSMTPUTF8And8BITMIME(t *testing.T) {
	t.Parallel()
	b := MustStartSubmission(t, &fakeCore{}, nil)
	c := b.dial(t)
	for _, ext := range []string{"SMTPUTF8", "8BITMIME"} {
		if ok, _ := c.Extension(ext); !ok {
			t.Errorf("%s not offered", ext)
		}
	}
	if err := c.Auth(sasl.NewPlainClient("", smtpUser, smtpPass)); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("adá@sender.example", &smtp.MailOptions{UTF8: true, Body: smtp.Body8BitMIME}); err != nil {
		t.Fatalf("MAIL with SMTPUTF8 and BODY=8BITMIME: %v", err)
	}
	if err := c.Rcpt("jöhn@rcpt.example", nil); err != nil {
		t.Fatalf("RCPT of a UTF-8 mailbox: %v", err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("From: Adá Lovelace <ada@sender.example>\r\nTo: \"Jöhn Dœ\" <jöhn@rcpt.example>\r\nSubject: Grüße\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nHällo, 8 bits.\r\n"))
	if err := w.Close(); err != nil {
		t.Fatalf("DATA: %v", err)
	}
	sends, _ := b.fake.snapshot()
	if len(sends) != 1 {
		t.Fatalf("%d sends", len(sends))
	}
	got := sends[0]
	from, ferr := mail.ParseAddress(got.From)
	to, terr := mail.ParseAddress(strings.Join(got.To, ""))
	if ferr != nil || from.Name != "Adá Lovelace" || terr != nil || len(got.To) != 1 || to.Name != "Jöhn Dœ" || to.Address != "jöhn@rcpt.example" {
		t.Errorf("from %q to %q", got.From, got.To)
	}
	if got.Subject != "Grüße" || strings.TrimRight(got.Text, "\r\n") != "Hällo, 8 bits." {
		t.Errorf("subject %q text %q", got.Subject, got.Text)
	}
}

// TestChunking: a message sent in BDAT chunks (RFC 3030, which go-smtp offers) reaches the parser as one
// stream, and chunks past MaxMessageBytes are refused with 552.
func TestChunking(t *testing.T) {
	t.Parallel()
	b := MustStartSubmission(t, &fakeCore{}, func(c *submission.Config) { c.MaxMessageBytes = 4096 })
	c := dialFrom(t, b.addr, nil, 220)
	c.cmd("EHLO client.test")
	if code, _ := c.authPlain(smtpUser, smtpPass); code != 235 {
		t.Fatal("AUTH")
	}
	c.cmd("MAIL FROM:<a@sender.example>")
	c.cmd("RCPT TO:<bob@rcpt.example>")
	first, second := simple[:20], simple[20:]
	if code, _ := c.bdat(first, false); code != 250 {
		t.Fatalf("first chunk: %d", code)
	}
	if code, msg := c.bdat(second, true); code != 250 || !strings.Contains(msg, "queued as") {
		t.Fatalf("last chunk: %d %q", code, msg)
	}
	if sends, _ := b.fake.snapshot(); len(sends) != 1 || sends[0].Subject != "Hi" {
		t.Fatalf("sends %+v", sends)
	}
	c.cmd("MAIL FROM:<a@sender.example>")
	c.cmd("RCPT TO:<bob@rcpt.example>")
	big := strings.Repeat(strings.Repeat("x", 70)+"\r\n", 80)
	if code, msg := c.bdat(big, true); code != 552 || !strings.HasPrefix(msg, "5.3.4") {
		t.Errorf("oversized chunk: %d %q", code, msg)
	}
	if code, _ := c.cmd("NOOP"); code != 250 {
		t.Errorf("the connection is unusable after the refusal: %d", code)
	}
}
