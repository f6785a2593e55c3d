package simulator_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/mta/simulator"
	"github.com/postmill/postmill/ports"
)

func TestLookup(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]simulator.Behaviour{
		"delivered@simulator.postmill.test":         simulator.Delivered,
		"BOUNCE@Simulator.Postmill.Test":            simulator.Bounce,
		"bounce+signup-42@simulator.postmill.test":  simulator.Bounce,
		"soft-bounce@simulator.postmill.test":       simulator.SoftBounce,
		"complaint+a+b@simulator.postmill.test":     simulator.Complaint,
		"<delay@simulator.postmill.test>":           simulator.Delay,
		"delivered@simulator.postmill.test.":        simulator.Delivered,
		"nobody@simulator.postmill.test":            "",
		"bounce@example.test":                       "",
		"bounce@sub.simulator.postmill.test":        "",
		"softbounce@simulator.postmill.test":        "",
		"+bounce@simulator.postmill.test":           "",
		"simulator.postmill.test":                   "",
		"delivered@simulator.postmill.test@evil.io": "",
	} {
		got, ok := simulator.Lookup(addr)
		if got != want || ok != (want != "") {
			t.Errorf("Lookup(%q) = %q, %v; want %q", addr, got, ok, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg simulator.Config
		ok  bool
	}{
		{simulator.Config{}, true},
		{simulator.Config{Addr: "127.0.0.1:0"}, true},
		{simulator.Config{Addr: "[::1]:2600"}, true},
		{simulator.Config{Addr: "localhost:0"}, true},
		{simulator.Config{Addr: "0.0.0.0:0"}, false},
		{simulator.Config{Addr: "192.0.2.1:25"}, false},
		{simulator.Config{Addr: "127.0.0.1"}, false},
		{simulator.Config{SoftBounces: -1}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", c.cfg, err, c.ok)
		}
		if _, err := simulator.New(c.cfg, nil); (err == nil) != c.ok {
			t.Errorf("New(%+v) = %v, want ok=%v", c.cfg, err, c.ok)
		}
	}
}

// mustSimulator starts a simulator on a loopback port and returns it with its address.
func mustSimulator(tb testing.TB, cfg simulator.Config) (*simulator.Server, string) {
	tb.Helper()
	s, err := simulator.New(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	ap, err := s.Listen()
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	if !ap.Addr().IsLoopback() || ap.Port() == 0 {
		tb.Fatalf("bound to %s", ap)
	}
	return s, ap.String()
}

// rcptReply runs MAIL FROM from and RCPT TO to on c and returns the RCPT reply ("250" when accepted).
func rcptReply(tb testing.TB, c *smtp.Client, from, to string) string {
	tb.Helper()
	if err := c.Mail(from, nil); err != nil {
		tb.Fatalf("MAIL: %v", err)
	}
	defer func() {
		if err := c.Reset(); err != nil {
			tb.Fatalf("RSET: %v", err)
		}
	}()
	err := c.Rcpt(to, nil)
	if err == nil {
		return "250"
	}
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		tb.Fatalf("RCPT %s: %v", to, err)
	}
	e := se.EnhancedCode
	return fmt.Sprintf("%d %d.%d.%d %s", se.Code, e[0], e[1], e[2], se.Message)
}

// TestRepliesOverSMTP speaks SMTP to the simulator over a real socket, as the MTA does: every address
// gets its behaviour's reply at RCPT, soft-bounce@ counts its attempts per return path, and DATA answers
// 250.
func TestRepliesOverSMTP(t *testing.T) {
	t.Parallel()
	_, addr := mustSimulator(t, simulator.Config{SoftBounces: 2})
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("mta.postmill.test"); err != nil {
		t.Fatal(err)
	}
	const from = "b-first@bounce.acme.test"
	for to, want := range map[string]string{
		"delivered@simulator.postmill.test":       "250",
		"complaint@simulator.postmill.test":       "250",
		"bounce@simulator.postmill.test":          "550 5.1.1 Mailbox does not exist (simulated hard bounce)",
		"bounce+x@simulator.postmill.test":        "550 5.1.1 Mailbox does not exist (simulated hard bounce)",
		"delay@simulator.postmill.test":           "451 4.7.1 Greylisted, try again later (simulated delay)",
		"somebody@simulator.postmill.test":        "550 5.1.1 No such simulator address; use delivered, bounce, soft-bounce, complaint or delay",
		"delivered@not-the-simulator.postmill.io": "550 5.1.1 No such simulator address; use delivered, bounce, soft-bounce, complaint or delay",
	} {
		if got := rcptReply(t, c, from, to); got != want {
			t.Errorf("RCPT %s: %q, want %q", to, got, want)
		}
	}
	// delay@ never gives in.
	for range 5 {
		if got := rcptReply(t, c, from, "delay@simulator.postmill.test"); !strings.HasPrefix(got, "451 4.7.1") {
			t.Fatalf("delay@: %q", got)
		}
	}
	// soft-bounce@: two deferrals per return path and recipient, then accepted; another return path (another
	// message) or another plus tag counts on its own.
	soft := "soft-bounce@simulator.postmill.test"
	for i, want := range []string{
		"450 4.2.2 Mailbox full, try again later (simulated soft bounce, attempt 1 of 2 deferred)",
		"450 4.2.2 Mailbox full, try again later (simulated soft bounce, attempt 2 of 2 deferred)",
		"250",
	} {
		if got := rcptReply(t, c, from, soft); got != want {
			t.Errorf("soft-bounce attempt %d: %q, want %q", i+1, got, want)
		}
	}
	if got := rcptReply(t, c, "b-second@bounce.acme.test", soft); !strings.Contains(got, "attempt 1 of 2") {
		t.Errorf("another return path: %q", got)
	}
	if got := rcptReply(t, c, from, "soft-bounce+tag@simulator.postmill.test"); !strings.Contains(got, "attempt 1 of 2") {
		t.Errorf("a plus-tagged soft-bounce@: %q", got)
	}

	// A whole transaction: the refused recipient stays refused, DATA answers 250 for the others.
	if err := c.Mail(from, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("delivered@simulator.postmill.test", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("bounce@simulator.postmill.test", nil); err == nil {
		t.Fatal("bounce@ accepted")
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, "From: a@acme.test\r\nSubject: x\r\n\r\nhello\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusText != "2.0.0 Ok: delivered to the Postmill simulator" {
		t.Errorf("DATA reply %q", resp.StatusText)
	}
	if err := c.Quit(); err != nil {
		t.Errorf("QUIT: %v", err)
	}
}

// mx is a stand-in for Postmill's MX listener: a real SMTP server that records what it is sent. Its first
// refuse transactions are answered 451 at DATA.
type mx struct {
	addr   string
	mu     sync.Mutex
	refuse int
	got    []mxMail
	seen   chan struct{}
}

type mxMail struct {
	from, rcpt string
	data       []byte
}

func mustMX(tb testing.TB, refuse int) *mx {
	tb.Helper()
	m := &mx{refuse: refuse, seen: make(chan struct{}, 100)}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &mxSession{m: m}, nil }))
	srv.Domain = "mx.postmill.test"
	srv.AllowInsecureAuth = true
	srv.EnableSMTPUTF8 = true
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	m.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return m
}

func (m *mx) wait(tb testing.TB, timeout time.Duration) mxMail {
	tb.Helper()
	select {
	case <-m.seen:
	case <-time.After(timeout):
		tb.Fatal("no report reached the MX listener")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.got[len(m.got)-1]
}

func (m *mx) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.got)
}

type mxSession struct {
	m          *mx
	from, rcpt string
}

func (s *mxSession) Mail(from string, _ *smtp.MailOptions) error { s.from = from; return nil }
func (s *mxSession) Rcpt(to string, _ *smtp.RcptOptions) error   { s.rcpt = to; return nil }
func (s *mxSession) Reset()                                      {}
func (s *mxSession) Logout() error                               { return nil }
func (s *mxSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.m.refuse > 0 {
		s.m.refuse--
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}
	}
	s.m.got = append(s.m.got, mxMail{from: s.from, rcpt: s.rcpt, data: data})
	s.m.seen <- struct{}{}
	return nil
}

// recorder is the DeliveryService behind Server.Delivery: it hands out one message and records reports.
type recorder struct {
	out     ports.OutboundMessage
	reports chan ports.DeliveryReport
}

func (r *recorder) LoadOutbound(context.Context, ports.DeliveryJob) (ports.OutboundMessage, error) {
	return r.out, nil
}

func (r *recorder) ReportDelivery(_ context.Context, rep ports.DeliveryReport) error {
	r.reports <- rep
	return nil
}

const (
	returnPath = "b-aebqcaibaeaqcaibaeaqcaibaeaqcaibaa8f01234567@bounce.acme.test"
	original   = "From: Acme News <news@acme.test>\r\nTo: complaint@simulator.postmill.test\r\n" +
		"Subject: Spam?\r\nMessage-ID: <m-1@acme.test>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nBuy now, grüße.\r\n"
)

// deliver sends original to rcpts over SMTP from returnPath, as the MTA does.
func deliver(tb testing.TB, addr string, rcpts ...string) {
	tb.Helper()
	send(tb, addr, original, rcpts...)
}

// send delivers msg to rcpts over SMTP from returnPath (BODY=8BITMIME, as the MTA sends 8-bit mail).
func send(tb testing.TB, addr, msg string, rcpts ...string) {
	tb.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("mta.postmill.test"); err != nil {
		tb.Fatal(err)
	}
	if err := c.Mail(returnPath, &smtp.MailOptions{Body: smtp.Body8BitMIME}); err != nil {
		tb.Fatal(err)
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r, nil); err != nil {
			tb.Fatalf("RCPT %s: %v", r, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.WriteString(w, msg); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatalf("delivering to the simulator: %v", err)
	}
	if err := c.Quit(); err != nil {
		tb.Fatal(err)
	}
}

// TestComplaintReportWaitsForTheRecordedDelivery: complaint@ is accepted at once, and its feedback
// report reaches the MX listener only after the MTA reported the delivery through Server.Delivery — as a
// real feedback loop reports long after delivery. The report is RFC 5965's, to the return path.
func TestComplaintReportWaitsForTheRecordedDelivery(t *testing.T) {
	t.Parallel()
	m := mustMX(t, 0)
	sim, addr := mustSimulator(t, simulator.Config{MX: func() string { return m.addr }})
	job := ports.DeliveryJob{ID: "job-1", MessageID: "m-1", Domain: simulator.Domain, RecipientIDs: []string{"r1"}}
	rec := &recorder{out: ports.OutboundMessage{Job: job, ReturnPath: returnPath}, reports: make(chan ports.DeliveryReport, 10)}
	delivery, _ := sim.Delivery(rec, nil)

	if _, err := delivery.LoadOutbound(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	deliver(t, addr, "complaint@simulator.postmill.test")
	time.Sleep(300 * time.Millisecond)
	if n := m.count(); n != 0 {
		t.Fatalf("%d reports sent before the delivery was recorded", n)
	}
	// A job of another domain with the same return path does not release it.
	other := job
	other.ID, other.Domain = "job-2", "rcpt.test"
	if err := delivery.ReportDelivery(context.Background(), ports.DeliveryReport{Job: other}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := m.count(); n != 0 {
		t.Fatalf("a report about another domain's job released the complaint")
	}
	if err := delivery.ReportDelivery(context.Background(), ports.DeliveryReport{Job: job}); err != nil {
		t.Fatal(err)
	}
	got := m.wait(t, 5*time.Second)
	if got.from != "fbl@simulator.postmill.test" || got.rcpt != returnPath {
		t.Errorf("report envelope %s → %s", got.from, got.rcpt)
	}
	assertARF(t, got.data, false)
}

// assertARF parses a report as the inbound tier must: a multipart/report of feedback-report with the
// fields naming the return path, the recipient and the sending domain, and the returned message.
func assertARF(t *testing.T, data []byte, headersOnly bool) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("report: %v\n%s", err, data)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/report" || params["report-type"] != "feedback-report" {
		t.Fatalf("report content type %q (%v)", msg.Header.Get("Content-Type"), err)
	}
	if msg.Header.Get("Auto-Submitted") != "auto-generated" || msg.Header.Get("To") != "<"+returnPath+">" {
		t.Errorf("report header %v", msg.Header)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var types []string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("report part: %v", err)
		}
		body, _ := io.ReadAll(p)
		ct := p.Header.Get("Content-Type")
		types = append(types, strings.SplitN(ct, ";", 2)[0])
		switch {
		case ct == "message/feedback-report":
			h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(body))).ReadMIMEHeader()
			if err != nil && err != io.EOF {
				t.Fatalf("feedback fields: %v", err)
			}
			for k, want := range map[string]string{
				"Feedback-Type": "abuse", "User-Agent": "Postmill-Simulator/1", "Version": "1",
				"Original-Mail-From": "<" + returnPath + ">", "Original-Rcpt-To": "<complaint@simulator.postmill.test>",
				"Reported-Domain": "acme.test", "Source-Ip": "127.0.0.1",
			} {
				if got := h.Get(k); got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
			if at, err := mail.ParseDate(h.Get("Arrival-Date")); err != nil || time.Since(at) > time.Minute {
				t.Errorf("Arrival-Date %q (%v)", h.Get("Arrival-Date"), err)
			}
		case strings.HasPrefix(ct, "message/rfc822"), strings.HasPrefix(ct, "text/rfc822-headers"):
			if !bytes.HasPrefix(body, []byte("Return-Path: <"+returnPath+">\r\nFrom: Acme News")) ||
				!bytes.Contains(body, []byte("Message-ID: <m-1@acme.test>")) {
				t.Errorf("returned message:\n%s", body)
			}
			if headersOnly == bytes.Contains(body, []byte("Buy now")) {
				t.Errorf("returned message (headers only: %v):\n%s", headersOnly, body)
			}
		}
	}
	want := []string{"text/plain", "message/feedback-report", "message/rfc822"}
	if headersOnly {
		want[2] = "text/rfc822-headers"
	}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Errorf("report parts %v, want %v", types, want)
	}
}

// TestComplaintReportFallbackAndRetry: a report whose delivery is never seen recorded (no Server.Delivery
// wrapper here) goes after ComplaintWait, and an MX listener that answers 451 gets it again.
func TestComplaintReportFallbackAndRetry(t *testing.T) {
	t.Parallel()
	m := mustMX(t, 1)
	_, addr := mustSimulator(t, simulator.Config{MX: func() string { return m.addr }, ComplaintWait: 100 * time.Millisecond})
	start := time.Now()
	deliver(t, addr, "complaint+one@simulator.postmill.test", "delivered@simulator.postmill.test")
	got := m.wait(t, 10*time.Second)
	if time.Since(start) < time.Second {
		t.Errorf("the refused report came again after %v, before the retry backoff", time.Since(start))
	}
	if !bytes.Contains(got.data, []byte("Original-Rcpt-To: <complaint+one@simulator.postmill.test>")) {
		t.Errorf("report:\n%s", got.data)
	}
	time.Sleep(200 * time.Millisecond)
	if n := m.count(); n != 1 {
		t.Errorf("%d reports for one complaint recipient", n)
	}
}

// TestLargeComplaintReturnsHeaders: a message above the returned-message bound comes back as its header.
func TestLargeComplaintReturnsHeaders(t *testing.T) {
	t.Parallel()
	m := mustMX(t, 0)
	_, addr := mustSimulator(t, simulator.Config{MX: func() string { return m.addr }, ComplaintWait: time.Millisecond})
	big := original + strings.Repeat(strings.Repeat("x", 76)+"\r\n", (1<<20)/78+10)
	send(t, addr, big, "complaint@simulator.postmill.test")
	got := m.wait(t, 10*time.Second)
	if len(got.data) > 64<<10 {
		t.Errorf("report of %d bytes for a message above the bound", len(got.data))
	}
	assertARF(t, got.data, true)
}
