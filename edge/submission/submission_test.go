package submission_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/mail"
	"net/textproto"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/edge/submission"
	"github.com/postmill/postmill/ports"
)

const (
	smtpUser = "smtp_3f2a"
	smtpPass = "correct-horse-battery-staple"
	apiUser  = "api_user" // authenticates, but not as an SMTP credential
	orgID    = "0190a0b0-0000-7000-8000-00000000000a"
)

// fakeCore implements the two driving interfaces the submission server uses and records the sends.
type fakeCore struct {
	mu      sync.Mutex
	sends   []ports.SendRequest
	orgs    []string
	sendErr error
	authErr error
	auths   atomic.Int32 // AuthenticateSMTP calls
}

func (f *fakeCore) core() ports.Core { return ports.Core{Auth: f, Emails: f} }

func (f *fakeCore) AuthenticateSMTP(_ context.Context, username, password string) (ports.Principal, error) {
	f.auths.Add(1)
	if f.authErr != nil {
		return ports.Principal{}, f.authErr
	}
	switch {
	case username == smtpUser && password == smtpPass:
		return ports.Principal{Kind: ports.PrincipalSMTP, OrganizationID: orgID}, nil
	case username == apiUser && password == smtpPass:
		return ports.Principal{Kind: ports.PrincipalAPIKey, OrganizationID: orgID, Scopes: []string{"*"}}, nil
	}
	return ports.Principal{}, ports.Unauthenticated("invalid SMTP credentials")
}

func (f *fakeCore) AuthenticateAPIKey(context.Context, string) (ports.Principal, error) {
	return ports.Principal{}, ports.Unauthenticated("no")
}

func (f *fakeCore) AuthenticateSession(context.Context, string) (ports.Principal, error) {
	return ports.Principal{}, ports.Unauthenticated("no")
}

func (f *fakeCore) Send(_ context.Context, org string, req ports.SendRequest) (ports.SendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends = append(f.sends, req)
	f.orgs = append(f.orgs, org)
	if f.sendErr != nil {
		return ports.SendResult{}, f.sendErr
	}
	return ports.SendResult{ID: fmt.Sprintf("0190a0b0-0000-7000-8000-%012d", len(f.sends)), Status: ports.StatusQueued}, nil
}

func (f *fakeCore) SendBatch(context.Context, string, []ports.SendRequest) ([]ports.BatchItemResult, error) {
	return nil, errors.New("not used")
}

func (f *fakeCore) GetEmail(context.Context, string, string) (ports.Message, error) {
	return ports.Message{}, errors.New("not used")
}

func (f *fakeCore) CancelEmail(context.Context, string, string) (ports.Message, error) {
	return ports.Message{}, errors.New("not used")
}

func (f *fakeCore) ListEmails(context.Context, string, ports.ListEmailsQuery) (ports.EmailPage, error) {
	return ports.EmailPage{}, errors.New("not used")
}

func (f *fakeCore) snapshot() ([]ports.SendRequest, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sends), slices.Clone(f.orgs)
}

// testBundle is a submission server on a loopback port with its fake core and logs.
type testBundle struct {
	fake *fakeCore
	srv  *submission.Server
	addr string
	logs *bytes.Buffer
	mu   *sync.Mutex
}

// MustStartSubmission serves a submission server on 127.0.0.1:0; edit mutates the config first.
func MustStartSubmission(tb testing.TB, fake *fakeCore, edit func(*submission.Config)) *testBundle {
	tb.Helper()
	cfg := submission.Config{Config: smtpd.Config{Addr: "127.0.0.1:0", Domain: "submit.postmill.test"}}
	if edit != nil {
		edit(&cfg)
	}
	logs, mu := &bytes.Buffer{}, &sync.Mutex{}
	logger := slog.New(slog.NewJSONHandler(lockedWriter{logs, mu}, nil))
	srv, err := submission.New(cfg, fake.core(), logger)
	if err != nil {
		tb.Fatalf("submission.New: %v", err)
	}
	addr, err := srv.Listen()
	if err != nil {
		tb.Fatalf("Listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return &testBundle{fake: fake, srv: srv, addr: addr.String(), logs: logs, mu: mu}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (b *testBundle) logText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logs.String()
}

// dial connects a go-smtp client and says EHLO.
func (b *testBundle) dial(tb testing.TB) *smtp.Client {
	tb.Helper()
	c, err := smtp.Dial(b.addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	if err := c.Hello("client.test"); err != nil {
		tb.Fatal(err)
	}
	return c
}

// send runs one transaction and returns the DATA reply text or the SMTP error.
func send(tb testing.TB, c *smtp.Client, rcpts []string, msg string) (string, error) {
	tb.Helper()
	if err := c.Mail("envelope@sender.example", nil); err != nil {
		return "", err
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r, nil); err != nil {
			return "", err
		}
	}
	w, err := c.Data()
	if err != nil {
		return "", err
	}
	if _, err := io.WriteString(w, msg); err != nil {
		return "", err
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		return "", err
	}
	return resp.StatusText, nil
}

func mustSMTPError(tb testing.TB, err error, code int, enhanced smtp.EnhancedCode, contains string) {
	tb.Helper()
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		tb.Fatalf("want SMTP %d, got %v", code, err)
	}
	if se.Code != code || se.EnhancedCode != enhanced || !strings.Contains(se.Message, contains) {
		tb.Errorf("got %d %v %q, want %d %v containing %q", se.Code, se.EnhancedCode, se.Message, code, enhanced, contains)
	}
}

const simple = "From: ada@sender.example\r\nTo: bob@rcpt.example\r\nSubject: Hi\r\n\r\nhello\r\n"

func TestSubmitMultipartMessage(t *testing.T) {
	t.Parallel()
	b := MustStartSubmission(t, &fakeCore{}, nil)
	c := b.dial(t)
	if ok, mechs := c.Extension("AUTH"); !ok || !strings.Contains(mechs, "PLAIN") || !strings.Contains(mechs, "LOGIN") {
		t.Fatalf("AUTH not advertised to a loopback client: %v %q", ok, mechs)
	}
	if err := c.Auth(sasl.NewPlainClient("", smtpUser, smtpPass)); err != nil {
		t.Fatalf("AUTH PLAIN: %v", err)
	}
	raw, err := os.ReadFile("testdata/multipart.eml")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := send(t, c, []string{"bob@rcpt.example", "CAROL@rcpt.example", "hidden@rcpt.example"}, string(raw))
	if err != nil {
		t.Fatalf("DATA: %v", err)
	}
	sends, orgs := b.fake.snapshot()
	if len(sends) != 1 || orgs[0] != orgID {
		t.Fatalf("core got %d sends for %v", len(sends), orgs)
	}
	if reply != "2.0.0 Ok: queued as 0190a0b0-0000-7000-8000-000000000001" {
		t.Errorf("DATA reply %q", reply)
	}
	got := sends[0]
	from, err := mail.ParseAddress(got.From)
	if err != nil || from.Name != "Adá" || from.Address != "ada@sender.example" {
		t.Errorf("From %q (%v)", got.From, err)
	}
	if !slices.Equal(got.To, []string{`"Bob" <bob@rcpt.example>`}) || !slices.Equal(got.Cc, []string{"carol@rcpt.example"}) ||
		!slices.Equal(got.Bcc, []string{"hidden@rcpt.example"}) {
		t.Errorf("recipients to=%q cc=%q bcc=%q", got.To, got.Cc, got.Bcc)
	}
	if got.Subject != "Quarterly résumé" || got.ReplyTo != "replies@sender.example" {
		t.Errorf("subject %q reply-to %q", got.Subject, got.ReplyTo)
	}
	if got.Text != "Hello Bob, the résumé is attached." || got.HTML != `<p>Hello Bob <img src="cid:logo@sender.example"></p>` {
		t.Errorf("bodies text=%q html=%q", got.Text, got.HTML)
	}
	if len(got.Headers) != 2 || got.Headers["X-Campaign"] != "q4" || got.Headers["List-Unsubscribe"] != "<mailto:u@sender.example>" {
		t.Errorf("custom headers %v (X-Campaign's first value and List-Unsubscribe)", got.Headers)
	}
	if got.IdempotencyKey != "" || got.Sandbox || got.ScheduledAt != nil || got.Template != nil || got.Metadata != nil {
		t.Errorf("SMTP sends set no API-only fields: %+v", got)
	}
	want := []ports.Attachment{
		{Filename: "attachment-1", ContentType: "image/png", Content: []byte("\x89PNG\r\n\x1a\nlogo"), Inline: true, ContentID: "logo@sender.example"},
		{Filename: "report.pdf", ContentType: "application/pdf", Content: []byte("%PDF-1.4\nreport")},
		{Filename: "notes été.txt", ContentType: "text/plain; charset=utf-8", Content: []byte("second text part, an attachment")},
	}
	if len(got.Attachments) != len(want) {
		t.Fatalf("attachments: %+v", got.Attachments)
	}
	for i, w := range want {
		a := got.Attachments[i]
		if a.Filename != w.Filename || a.ContentType != w.ContentType || !bytes.Equal(a.Content, w.Content) || a.Inline != w.Inline || a.ContentID != w.ContentID {
			t.Errorf("attachment %d: %+v (%q), want %+v", i, a, a.Content, w)
		}
	}

	// The session stays authenticated for the next transaction.
	if _, err := send(t, c, []string{"bob@rcpt.example"}, simple); err != nil {
		t.Errorf("second transaction: %v", err)
	}
	if err := c.Quit(); err != nil {
		t.Error(err)
	}
}

func TestAuthLogin(t *testing.T) {
	t.Parallel()
	b := MustStartSubmission(t, &fakeCore{}, nil)
	c := b.dial(t)
	// go-sasl's LOGIN client sends the username as the initial response.
	if err := c.Auth(sasl.NewLoginClient(smtpUser, smtpPass)); err != nil {
		t.Fatalf("AUTH LOGIN: %v", err)
	}
	if _, err := send(t, c, []string{"bob@rcpt.example"}, simple); err != nil {
		t.Fatal(err)
	}

	// The classic exchange without an initial response: Username: then Password: prompts.
	conn, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tp := textproto.NewConn(conn)
	expect := func(code int) string {
		t.Helper()
		_, msg, err := tp.ReadResponse(code)
		if err != nil {
			t.Fatalf("want %d: %v", code, err)
		}
		return msg
	}
	enc := base64.StdEncoding.EncodeToString
	expect(220)
	tp.PrintfLine("EHLO raw.test")
	expect(250)
	tp.PrintfLine("AUTH LOGIN")
	if got := expect(334); got != enc([]byte("Username:")) {
		t.Errorf("first prompt %q", got)
	}
	tp.PrintfLine("%s", enc([]byte(smtpUser)))
	if got := expect(334); got != enc([]byte("Password:")) {
		t.Errorf("second prompt %q", got)
	}
	tp.PrintfLine("%s", enc([]byte(smtpPass)))
	expect(235)
	tp.PrintfLine("MAIL FROM:<a@sender.example>")
	expect(250)
}

func TestAuthFailuresAndOrder(t *testing.T) {
	t.Parallel()
	b := MustStartSubmission(t, &fakeCore{}, nil)

	c := b.dial(t)
	mustSMTPError(t, c.Mail("a@sender.example", nil), 530, smtp.EnhancedCode{5, 7, 0}, "Authentication required")
	mustSMTPError(t, c.Auth(sasl.NewPlainClient("", smtpUser, "wrong")), 535, smtp.EnhancedCode{5, 7, 8}, "")
	mustSMTPError(t, c.Mail("a@sender.example", nil), 530, smtp.EnhancedCode{5, 7, 0}, "")
	if err := c.Auth(sasl.NewPlainClient("", smtpUser, smtpPass)); err != nil {
		t.Fatalf("a good AUTH after a failure: %v", err)
	}
	// Each refusal on a connection of its own: after a final 535 go-smtp's client sends "*", which the
	// server counts as a protocol error, and it hangs up after a few.
	for name, client := range map[string]sasl.Client{
		"LOGIN unknown user":            sasl.NewLoginClient("nobody", smtpPass),
		"credential of another kind":    sasl.NewPlainClient("", apiUser, smtpPass),
		"PLAIN acting for someone else": sasl.NewPlainClient("someone-else", smtpUser, smtpPass),
	} {
		c := b.dial(t)
		err := c.Auth(client)
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code != 535 || se.EnhancedCode != (smtp.EnhancedCode{5, 7, 8}) {
			t.Errorf("%s: %v", name, err)
		}
	}

	// RCPT without AUTH: raw, because the client refuses to send RCPT before MAIL succeeded.
	conn, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tp := textproto.NewConn(conn)
	tp.ReadResponse(220)
	tp.PrintfLine("EHLO raw.test")
	tp.ReadResponse(250)
	tp.PrintfLine("RCPT TO:<bob@rcpt.example>")
	if code, _, _ := tp.ReadResponse(0); code != 502 && code != 530 {
		t.Errorf("RCPT before AUTH answered %d", code)
	}
	tp.PrintfLine("DATA")
	if code, _, _ := tp.ReadResponse(0); code/100 != 5 {
		t.Errorf("DATA before AUTH answered %d", code)
	}

	if sends, _ := b.fake.snapshot(); len(sends) != 0 {
		t.Errorf("unauthenticated sessions reached the core: %d", len(sends))
	}
	if logs := b.logText(); strings.Contains(logs, "wrong") || strings.Contains(logs, smtpPass) {
		t.Errorf("passwords in the log: %s", logs)
	}

	// A core failure during AUTH is temporary.
	down := MustStartSubmission(t, &fakeCore{authErr: errors.New("db down at 10.0.0.5")}, nil)
	err = down.dial(t).Auth(sasl.NewPlainClient("", smtpUser, smtpPass))
	mustSMTPError(t, err, 454, smtp.EnhancedCode{4, 7, 0}, "Temporary authentication failure")
	if strings.Contains(err.Error(), "10.0.0.5") {
		t.Errorf("internal cause leaked: %v", err)
	}
}

func TestSendErrorsMapToSMTPReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		err      error
		code     int
		enhanced smtp.EnhancedCode
		text     string
	}{
		{"unverified domain", ports.Errorf(ports.CodeInvalidArgument, "domain sender.example is not verified"), 550, smtp.EnhancedCode{5, 7, 1}, "domain sender.example is not verified"},
		{"suppressed", ports.Errorf(ports.CodeInvalidArgument, "recipient suppressed: bob@rcpt.example"), 550, smtp.EnhancedCode{5, 7, 1}, "recipient suppressed: bob@rcpt.example"},
		{"validation", ports.ValidationError(ports.FieldViolation{Path: "subject", Message: "expected length >= 1"}), 550, smtp.EnhancedCode{5, 7, 1}, "Validation failed (subject: expected length >= 1)"},
		{"paused", &ports.Error{Code: ports.CodePermissionDenied, Reason: "org_suspended", Message: "organization sending is paused"}, 550, smtp.EnhancedCode{5, 7, 1}, "organization sending is paused"},
		{"allowance", &ports.Error{Code: ports.CodePaymentRequired, Reason: "plan_limit_exceeded", Message: "Plan limit reached for emails_sent", Fields: map[string]any{"metric": "emails_sent", "limit": 3000}}, 550, smtp.EnhancedCode{5, 7, 0}, "Plan limit reached for emails_sent"},
		{"warm-up", &ports.Error{Code: ports.CodeResourceExhausted, Reason: "warmup_cap_reached", Message: "warm-up daily send cap reached"}, 451, smtp.EnhancedCode{4, 7, 0}, "warm-up daily send cap reached"},
		{"internal", errors.New("pq: password=hunter2"), 451, smtp.EnhancedCode{4, 3, 0}, "Temporary local problem"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := MustStartSubmission(t, &fakeCore{sendErr: c.err}, nil)
			cl := b.dial(t)
			if err := cl.Auth(sasl.NewPlainClient("", smtpUser, smtpPass)); err != nil {
				t.Fatal(err)
			}
			_, err := send(t, cl, []string{"bob@rcpt.example"}, simple)
			mustSMTPError(t, err, c.code, c.enhanced, c.text)
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("internal cause leaked: %v", err)
			}
			if c.name == "internal" && !strings.Contains(b.logText(), "hunter2") {
				t.Errorf("internal cause not logged: %s", b.logText())
			}
			// The connection stays usable after a refusal.
			if err := cl.Noop(); err != nil {
				t.Errorf("NOOP after a refusal: %v", err)
			}
		})
	}
}

func TestMalformedMessagesAreRefusedBeforeTheCore(t *testing.T) {
	t.Parallel()
	b := MustStartSubmission(t, &fakeCore{}, nil)
	c := b.dial(t)
	if err := c.Auth(sasl.NewPlainClient("", smtpUser, smtpPass)); err != nil {
		t.Fatal(err)
	}
	for msg, want := range map[string]string{
		"To: bob@rcpt.example\r\nSubject: x\r\n\r\nno from\r\n":                                                                        "from: expected exactly one From address",
		"From: a@sender.example, b@sender.example\r\nTo: bob@rcpt.example\r\nSubject: x\r\n\r\ntwo\r\n":                                "from: expected exactly one From address",
		"From: a@sender.example\r\nTo: bob@rcpt.example\r\nSubject: x\r\nContent-Type: text/plain; charset=koi8-r\r\n\r\n\xc1\xc2\r\n": "unsupported charset koi8-r",
	} {
		_, err := send(t, c, []string{"bob@rcpt.example"}, msg)
		mustSMTPError(t, err, 550, smtp.EnhancedCode{5, 7, 1}, want)
	}
	if sends, _ := b.fake.snapshot(); len(sends) != 0 {
		t.Errorf("malformed messages reached the core: %d", len(sends))
	}
}

func TestMessageSizeLimit(t *testing.T) {
	t.Parallel()
	b := MustStartSubmission(t, &fakeCore{}, func(c *submission.Config) { c.MaxMessageBytes = 2048 })
	c := b.dial(t)
	if size, ok := c.MaxMessageSize(); !ok || size != 2048 {
		t.Errorf("SIZE %d %v", size, ok)
	}
	if err := c.Auth(sasl.NewPlainClient("", smtpUser, smtpPass)); err != nil {
		t.Fatal(err)
	}
	_, err := send(t, c, []string{"bob@rcpt.example"}, simple+strings.Repeat(strings.Repeat("x", 70)+"\r\n", 64))
	mustSMTPError(t, err, 552, smtp.EnhancedCode{5, 3, 4}, "Message too large: at most 2048 bytes are accepted")
	if sends, _ := b.fake.snapshot(); len(sends) != 0 {
		t.Error("an oversized message reached the core")
	}
}

func TestShutdownCutsIdleClientsAtTheDeadline(t *testing.T) {
	t.Parallel()
	fake := &fakeCore{}
	srv, err := submission.New(submission.Config{Config: smtpd.Config{Addr: "127.0.0.1:0"}}, fake.core(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Listen(); err == nil {
		t.Error("a second Listen succeeded")
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()

	conn, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if line, _ := r.ReadString('\n'); !strings.HasPrefix(line, "220 ") {
		t.Fatalf("greeting %q", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with an idle client: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("the idle connection survived the shutdown deadline")
	}
	if time.Since(start) > 2*time.Second {
		t.Error("shutdown took too long")
	}
	if _, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		t.Error("still accepting after Shutdown")
	}
}

func TestNewRejectsBadWiring(t *testing.T) {
	t.Parallel()
	if _, err := submission.New(submission.Config{}, ports.Core{}, nil); err == nil {
		t.Error("New accepted a core without Auth and Emails")
	}
	if _, err := submission.New(submission.Config{Config: smtpd.Config{MaxMessageBytes: -1}}, (&fakeCore{}).core(), nil); err == nil {
		t.Error("New accepted a negative size")
	}
}

// A recipient the send path cannot take is refused at its RCPT, alone: the others of the transaction are
// sent (before, it was accepted and the whole message then failed at the end of DATA).
func TestUnsupportedRecipientsAreRefusedAtRCPT(t *testing.T) {
	t.Parallel()
	fake := &fakeCore{}
	b := MustStartSubmission(t, fake, nil)
	c := b.dial(t)
	if err := c.Auth(sasl.NewPlainClient("", smtpUser, smtpPass)); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("envelope@sender.example", &smtp.MailOptions{UTF8: true}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`"john doe"@rcpt.example`, "bob@bücher.example", "ann@[192.0.2.1]"} {
		mustSMTPError(t, c.Rcpt(bad, nil), 553, smtp.EnhancedCode{5, 1, 3}, "cannot send to this address")
	}
	if err := c.Rcpt("bob@rcpt.example", nil); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, simple); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("DATA with the good recipient: %v", err)
	}
	if sends, _ := fake.snapshot(); len(sends) != 1 || len(sends[0].To)+len(sends[0].Cc)+len(sends[0].Bcc) != 1 {
		t.Errorf("sends %+v: want one, to bob alone", sends)
	}
}
