package inbound_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/inbound"
	"github.com/postmill/postmill/ports"
)

// fakeFeedback is a stand-in for the core's FeedbackService: it accepts the addresses it is told to,
// records every report, and can be told to fail or to hold a call until released.
type fakeFeedback struct {
	mu         sync.Mutex
	accept     map[string]bool  // lower-cased addresses AcceptsRecipient says yes to
	acceptErr  error            // returned by AcceptsRecipient when set
	recordErr  map[string]error // by lower-cased Rcpt: returned by RecordBounce and RecordComplaint
	bounces    []ports.BounceReport
	complaints []ports.ComplaintReport
	checked    []string

	entered chan struct{} // when set, receives once per Record call as it starts
	release chan struct{} // when set, Record calls wait until it is closed
}

func newFakeFeedback(accept ...string) *fakeFeedback {
	f := &fakeFeedback{accept: map[string]bool{}, recordErr: map[string]error{}}
	for _, a := range accept {
		f.accept[strings.ToLower(a)] = true
	}
	return f
}

func (f *fakeFeedback) AcceptsRecipient(_ context.Context, rcpt string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked = append(f.checked, rcpt)
	if f.acceptErr != nil {
		return false, f.acceptErr
	}
	return f.accept[strings.ToLower(rcpt)], nil
}

func (f *fakeFeedback) wait(ctx context.Context) error {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *fakeFeedback) RecordBounce(ctx context.Context, r ports.BounceReport) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bounces = append(f.bounces, r)
	return f.recordErr[strings.ToLower(r.Rcpt)]
}

func (f *fakeFeedback) RecordComplaint(ctx context.Context, r ports.ComplaintReport) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.complaints = append(f.complaints, r)
	return f.recordErr[strings.ToLower(r.Rcpt)]
}

func (f *fakeFeedback) snapshot() ([]ports.BounceReport, []ports.ComplaintReport) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bounces), slices.Clone(f.complaints)
}

// testBundle is an MX listener on a loopback port with its fake core and its log.
type testBundle struct {
	fake *fakeFeedback
	srv  *inbound.Server
	addr string
	logs *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// MustStartInbound serves the MX listener on 127.0.0.1:0; edit mutates the config first. The server is
// shut down when the test ends.
func MustStartInbound(tb testing.TB, fake *fakeFeedback, edit func(*inbound.Config)) *testBundle {
	tb.Helper()
	cfg := inbound.Config{Config: smtpd.Config{Addr: "127.0.0.1:0", Domain: "mx.postmill.test"}}
	if edit != nil {
		edit(&cfg)
	}
	logs := &lockedBuffer{}
	srv, err := inbound.New(cfg, fake, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		tb.Fatalf("inbound.New: %v", err)
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
	return &testBundle{fake: fake, srv: srv, addr: addr.String(), logs: logs}
}

// dial connects a go-smtp client and says EHLO.
func (b *testBundle) dial(tb testing.TB) *smtp.Client {
	tb.Helper()
	c, err := smtp.Dial(b.addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	if err := c.Hello("mta.sender.test"); err != nil {
		tb.Fatal(err)
	}
	return c
}

// send runs one transaction and returns the DATA reply text, or the first SMTP error.
func send(tb testing.TB, c *smtp.Client, from string, rcpts []string, msg []byte) (string, error) {
	tb.Helper()
	if err := c.Mail(from, nil); err != nil {
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
	if _, err := w.Write(msg); err != nil {
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

// MustReadFixture returns testdata/name.
func MustReadFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// toAddress is the address of a fixture's To field: where its sender sent it.
func toAddress(tb testing.TB, raw []byte) string {
	tb.Helper()
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "To: "); ok {
			return strings.Trim(strings.TrimSpace(v), "<>")
		}
	}
	tb.Fatal("fixture without To")
	return ""
}

const fblAddress = "fbl@feedback.example.com"

func TestFixturesEndToEnd(t *testing.T) {
	t.Parallel()
	type want struct {
		kind          string // bounce, complaint or dropped
		firstAddress  string // first recipient's address, or the complaint's OriginalMailFrom
		status        string // first recipient's Status, or the complaint's FeedbackType
		action        string
		recipients    int
		originalMsgID string
	}
	cases := []struct {
		file string
		from string
		rcpt string // "" means the fixture's To
		want want
	}{
		{"postfix-hard-511.eml", "", "", want{"bounce", "nobody@example.org", "5.1.1", "failed", 1, "0190f3a2-5b7c-7d2e-9a41-3c5e8f1b2d60@example.com"}},
		{"postfix-delayed-441.eml", "", "", want{"bounce", "slow@example.org", "4.4.1", "delayed", 1, "0190f3a2-6c1d-7e3f-8b52-4d6f9a2c3e71@example.com"}},
		{"exim-dsn.eml", "", "", want{"bounce", "gone@example.net", "5.0.0", "failed", 1, "0190f3a3-0a11-7b22-9c33-5d44e6f7a801@example.com"}},
		{"sendmail-dsn.eml", "", "", want{"bounce", "jdoe@example.org", "5.1.1", "failed", 1, "0190f3a2-7d2e-7f40-8c63-5e7a0b3d4f82@example.com"}},
		{"exchange-online-ndr-5110.eml", "", "", want{"bounce", "nobody@contoso.example", "5.1.10", "failed", 1, "0190f3a2-8e3f-7051-9d74-6f8b1c4e5a93@example.com"}},
		{"gmail-dsn-511.eml", "", "", want{"bounce", "nobody@gmail.example", "5.1.1", "failed", 1, "0190f3a2-9f40-7162-ae85-7a9c2d5f6ba4@example.com"}},
		{"multi-recipient-dsn.eml", "", "", want{"bounce", "ann@example.org", "2.1.5", "delivered", 2, "0190f3a5-1a2b-7c3d-8e4f-5a6b7c8d9e0f@example.com"}},
		{"global-dsn-rfc6533.eml", "", "", want{"bounce", "δοκιμή@παράδειγμα.example", "5.1.1", "failed", 1, "0190f3a8-5e6f-7071-8283-9e0f1a2b3c4d@example.com"}},
		{"qmail-bounce.eml", "", "", want{"bounce", "nobody@example.net", "5.1.1", "failed", 2, "0190f3a6-2b3c-7d4e-9f50-6b7c8d9e0f1a@example.com"}},
		{"exim-plain-bounce.eml", "", "", want{"bounce", "nobody@example.net", "5.1.1", "failed", 2, "0190f3a4-3c4d-7e5f-a061-7c8d9e0f1a2b@example.com"}},
		{"generic-failure-notice.eml", "", "", want{"bounce", "nobody@example.org", "5.1.1", "failed", 1, "0190f3a7-4d5e-7f60-b172-8d9e0f1a2b3c@example.com"}},
		{"arf-aol-abuse.eml", "scomp@aol.example", "", want{"complaint", "b-ok4wftzbq3ozlcxqpi3poiohmk7q6d894680@bounce.example.com", "abuse", "", 1, "0190f3b0-7a81-7293-a4b5-1c2d3e4f5a6b@example.com"}},
		{"arf-yahoo-complete.eml", "feedbackloop@yahoo.example", "", want{"complaint", "b-oirbkr2rpf274q7l3t4ytcm4chsqdbd34046@bounce.example.com", "abuse", "", 2, "0190f3b1-8b92-73a4-b5c6-2d3e4f5a6b7c@example.com"}},
		{"arf-rfc5965-b1.eml", "abusedesk@example.com", fblAddress, want{"complaint", "", "abuse", "", 0, "8787KJKJ3K4J3K4J3K4J3.mail@example.net"}},
		{"out-of-office.eml", "", "", want{kind: "dropped"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			raw := MustReadFixture(t, c.file)
			rcpt := c.rcpt
			if rcpt == "" {
				rcpt = toAddress(t, raw)
			}
			b := MustStartInbound(t, newFakeFeedback(rcpt), nil)
			cl := b.dial(t)
			before := time.Now()
			reply, err := send(t, cl, c.from, []string{rcpt}, raw)
			after := time.Now()
			if err != nil {
				t.Fatalf("DATA: %v", err)
			}
			bounces, complaints := b.fake.snapshot()
			switch c.want.kind {
			case "dropped":
				if reply != "2.0.0 Ok: not a delivery or feedback report, discarded" || len(bounces)+len(complaints) != 0 {
					t.Fatalf("reply %q, %d bounces %d complaints", reply, len(bounces), len(complaints))
				}
				if !strings.Contains(b.logs.String(), `"msg":"mail dropped: not a delivery or feedback report"`) {
					t.Errorf("the drop is not logged: %s", b.logs.String())
				}
				return
			case "bounce":
				if reply != "2.0.0 Ok: bounce recorded" || len(bounces) != 1 || len(complaints) != 0 {
					t.Fatalf("reply %q, %d bounces %d complaints", reply, len(bounces), len(complaints))
				}
				got := bounces[0]
				if got.Rcpt != rcpt || got.ArrivedAt.Before(before.Add(-time.Second)) || got.ArrivedAt.After(after.Add(time.Second)) {
					t.Errorf("Rcpt %q ArrivedAt %v (sent between %v and %v)", got.Rcpt, got.ArrivedAt, before, after)
				}
				first := got.Recipients[0]
				if len(got.Recipients) != c.want.recipients || first.FinalRecipient != c.want.firstAddress ||
					first.Status != c.want.status || first.Action != c.want.action || got.OriginalMessageID != c.want.originalMsgID {
					t.Errorf("bounce %+v", got)
				}
			case "complaint":
				if reply != "2.0.0 Ok: complaint recorded" || len(complaints) != 1 || len(bounces) != 0 {
					t.Fatalf("reply %q, %d bounces %d complaints", reply, len(bounces), len(complaints))
				}
				got := complaints[0]
				if got.Rcpt != rcpt || got.ArrivedAt.Before(before.Add(-time.Second)) || got.ArrivedAt.After(after.Add(time.Second)) {
					t.Errorf("Rcpt %q ArrivedAt %v", got.Rcpt, got.ArrivedAt)
				}
				if got.OriginalMailFrom != c.want.firstAddress || got.FeedbackType != c.want.status ||
					len(got.OriginalRcptTo) != c.want.recipients || got.OriginalMessageID != c.want.originalMsgID {
					t.Errorf("complaint %+v", got)
				}
			}
		})
	}
}

func TestRcptPolicy(t *testing.T) {
	t.Parallel()
	const known = "b-ok4rysuwisrgp327vvs5x4n75o5a12d41bc9@bounce.example.com"
	b := MustStartInbound(t, newFakeFeedback(known), nil)
	c := b.dial(t)
	if ok, _ := c.Extension("AUTH"); ok {
		t.Error("an MX advertises AUTH")
	}
	if ok, _ := c.Extension("SMTPUTF8"); !ok {
		t.Error("SMTPUTF8 is not advertised (RFC 6533 DSNs need it)")
	}
	if err := c.Mail("", nil); err != nil {
		t.Fatalf("MAIL FROM:<> refused: %v", err)
	}
	mustSMTPError(t, c.Rcpt("someone@example.com", nil), 550, smtp.EnhancedCode{5, 1, 1}, "No such recipient")
	mustSMTPError(t, c.Rcpt("b-forged0000000000000000000000000000000@bounce.example.com", nil), 550, smtp.EnhancedCode{5, 1, 1}, "")
	if err := c.Rcpt(strings.ToUpper(known), nil); err != nil {
		t.Fatalf("a known return path in upper case: %v", err)
	}
	if err := c.Rcpt(known, nil); err != nil {
		t.Fatalf("the same return path again: %v", err)
	}
	// A domain written as absolute, with its trailing dot, is the same recipient.
	if err := c.Rcpt(known+".", nil); err != nil {
		t.Fatalf("the same return path with a trailing dot: %v", err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	w.Write(MustReadFixture(t, "postfix-hard-511.eml"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if bounces, _ := b.fake.snapshot(); len(bounces) != 1 || bounces[0].Rcpt != strings.ToUpper(known) {
		t.Errorf("one report per distinct recipient, got %d", len(bounces))
	}

	for name, tc := range map[string]struct {
		err      error
		code     int
		enhanced smtp.EnhancedCode
	}{
		"core down":       {errors.New("dial tcp 10.0.0.5:5432: connection refused"), 451, smtp.EnhancedCode{4, 3, 0}},
		"malformed rcpt":  {ports.Errorf(ports.CodeInvalidArgument, "not an address"), 550, smtp.EnhancedCode{5, 1, 1}},
		"rate limited":    {ports.RateLimited(3), 451, smtp.EnhancedCode{4, 3, 0}},
		"unauthenticated": {ports.Unauthenticated("rpc token"), 451, smtp.EnhancedCode{4, 3, 0}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fake := newFakeFeedback(known)
			fake.acceptErr = tc.err
			b := MustStartInbound(t, fake, nil)
			c := b.dial(t)
			if err := c.Mail("", nil); err != nil {
				t.Fatal(err)
			}
			err := c.Rcpt(known, nil)
			mustSMTPError(t, err, tc.code, tc.enhanced, "")
			if strings.Contains(err.Error(), "10.0.0.5") {
				t.Errorf("internal cause leaked: %v", err)
			}
		})
	}
}

func TestDataRepliesFollowTheCore(t *testing.T) {
	t.Parallel()
	const rcpt = "b-ok4rysuwisrgp327vvs5x4n75o5a12d41bc9@bounce.example.com"
	raw := MustReadFixture(t, "postfix-hard-511.eml")
	cases := []struct {
		name     string
		err      error
		code     int
		enhanced smtp.EnhancedCode
		text     string
	}{
		{"internal", errors.New("pq: password=hunter2"), 451, smtp.EnhancedCode{4, 3, 0}, "Temporary local problem"},
		{"resource exhausted", ports.RateLimited(5), 451, smtp.EnhancedCode{4, 3, 0}, "Temporary local problem"},
		{"unmappable", ports.Errorf(ports.CodeInvalidArgument, "return path is not Postmill's"), 550, smtp.EnhancedCode{5, 6, 0}, "return path is not Postmill's"},
		{"message gone", ports.NotFound("message not found"), 550, smtp.EnhancedCode{5, 6, 0}, "message not found"},
		{"validation", ports.ValidationError(ports.FieldViolation{Path: "recipients.0", Message: "not a recipient of the message"}), 550,
			smtp.EnhancedCode{5, 6, 0}, "Validation failed (recipients.0: not a recipient of the message)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := newFakeFeedback(rcpt)
			fake.recordErr[rcpt] = c.err
			b := MustStartInbound(t, fake, nil)
			cl := b.dial(t)
			_, err := send(t, cl, "", []string{rcpt}, raw)
			mustSMTPError(t, err, c.code, c.enhanced, c.text)
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("internal cause leaked: %v", err)
			}
			if c.name == "internal" && !strings.Contains(b.logs.String(), "hunter2") {
				t.Errorf("internal cause not logged: %s", b.logs.String())
			}
			if err := cl.Noop(); err != nil {
				t.Errorf("NOOP after a refusal: %v", err)
			}
		})
	}

	t.Run("already recorded", func(t *testing.T) {
		t.Parallel()
		fake := newFakeFeedback(rcpt)
		fake.recordErr[rcpt] = ports.AlreadyExists("complaints_message_recipient_key")
		b := MustStartInbound(t, fake, nil)
		reply, err := send(t, b.dial(t), "", []string{rcpt}, raw)
		if err != nil || reply != "2.0.0 Ok: bounce recorded" {
			t.Errorf("a report applied before is accepted again: %q %v", reply, err)
		}
	})

	t.Run("unparseable report", func(t *testing.T) {
		t.Parallel()
		b := MustStartInbound(t, newFakeFeedback(rcpt), nil)
		msg := "From: MAILER-DAEMON@mx.example.org\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=B\r\n\r\n" +
			"--B\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.example.org\r\n\r\nAction: failed\r\n--B--\r\n"
		_, err := send(t, b.dial(t), "", []string{rcpt}, []byte(msg))
		mustSMTPError(t, err, 550, smtp.EnhancedCode{5, 6, 0}, "names no recipient")
		if bounces, complaints := b.fake.snapshot(); len(bounces)+len(complaints) != 0 {
			t.Error("an unparseable report reached the core")
		}
	})
}

func TestMultipleRecipientsEachGetTheirReport(t *testing.T) {
	t.Parallel()
	const (
		first  = "b-nvbfkxdd7irij3epkiafcgtf4xnq1ba18ec9@bounce.example.com"
		second = "b-ojzhimmlxafq64h3o5a3t5mmjlbae5e3fd4e@bounce.example.com"
	)
	raw := MustReadFixture(t, "multi-recipient-dsn.eml")

	b := MustStartInbound(t, newFakeFeedback(first, second), nil)
	c := b.dial(t)
	if err := c.Mail("", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("stranger@bounce.example.com", nil); err == nil {
		t.Fatal("an unknown recipient was accepted")
	}
	reply, err := send(t, c, "", []string{first, second}, raw)
	if err != nil || reply != "2.0.0 Ok: bounce recorded" {
		t.Fatalf("%q %v", reply, err)
	}
	bounces, _ := b.fake.snapshot()
	if len(bounces) != 2 || bounces[0].Rcpt != first || bounces[1].Rcpt != second {
		t.Fatalf("want one report per accepted recipient, got %+v", bounces)
	}
	if !bounces[0].ArrivedAt.Equal(bounces[1].ArrivedAt) || !slices.EqualFunc(bounces[0].Recipients, bounces[1].Recipients,
		func(a, b ports.DSNRecipient) bool { return a == b }) || len(bounces[0].Recipients) != 2 {
		t.Errorf("the copies differ beyond Rcpt: %+v", bounces)
	}

	// One recipient the core cannot map, the other recorded: the message is taken.
	fake := newFakeFeedback(first, second)
	fake.recordErr[first] = ports.Errorf(ports.CodeInvalidArgument, "stale return path")
	b = MustStartInbound(t, fake, nil)
	if reply, err := send(t, b.dial(t), "", []string{first, second}, raw); err != nil || reply != "2.0.0 Ok: bounce recorded" {
		t.Errorf("partly mapped: %q %v", reply, err)
	}
	// Every recipient unmappable: 550 with the first reason.
	fake = newFakeFeedback(first, second)
	fake.recordErr[first] = ports.Errorf(ports.CodeInvalidArgument, "stale return path")
	fake.recordErr[second] = ports.Errorf(ports.CodeInvalidArgument, "other reason")
	b = MustStartInbound(t, fake, nil)
	_, err = send(t, b.dial(t), "", []string{first, second}, raw)
	mustSMTPError(t, err, 550, smtp.EnhancedCode{5, 6, 0}, "stale return path")
	// A temporary failure on any recipient: 451 for the whole message, so the sender retries it.
	fake = newFakeFeedback(first, second)
	fake.recordErr[second] = errors.New("connection reset")
	b = MustStartInbound(t, fake, nil)
	_, err = send(t, b.dial(t), "", []string{first, second}, raw)
	mustSMTPError(t, err, 451, smtp.EnhancedCode{4, 3, 0}, "")
}
