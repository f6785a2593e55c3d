package simulator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/ports"
)

// Complaint reports are mail from the simulator's feedback loop to the return path of the message.
const (
	// feedbackFrom is the reverse path and From of the reports.
	feedbackFrom = "fbl@" + Domain
	// userAgent names the report's generator (RFC 5965 §3.1 User-Agent).
	userAgent = "Postmill-Simulator/1"
	// submitTries and submitBackoff bound the retries of a report the MX listener did not take: a
	// temporary refusal (4xx) or no connection. The wait doubles after each try.
	submitTries   = 5
	submitBackoff = time.Second
	// submitTimeout bounds one SMTP session with the MX listener.
	submitTimeout = time.Minute
)

// complaint is one report to send about one recipient of one message.
type complaint struct {
	returnPath string // the envelope sender of the message: the VERP return path Postmill sent with
	rcpt       string
	message    []byte // as received, or its first maxReturned+1 bytes
	truncated  bool
	sourceIP   netip.Addr // the MTA's address, as a provider reports the sending host
	arrival    time.Time
}

// complain sends c's report once the delivery of its message is recorded (or ComplaintWait passed). The
// wait is registered before it returns, so before the MTA hears the reply to DATA and reports.
func (s *Server) complain(c complaint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing { // a session cut short by Shutdown
		s.log.Warn("complaint report dropped at shutdown", "rcpt", c.rcpt)
		return
	}
	recorded, release := s.gate.wait(c.returnPath)
	s.reports.Add(1)
	go func() {
		defer s.reports.Done()
		defer release()
		t := time.NewTimer(s.cfg.ComplaintWait)
		defer t.Stop()
		select {
		case <-recorded:
		case <-t.C:
			s.log.Warn("sending a complaint report without seeing its delivery recorded", "rcpt", c.rcpt,
				"waited", s.cfg.ComplaintWait)
		case <-s.ctx.Done():
			s.log.Warn("complaint report dropped at shutdown", "rcpt", c.rcpt)
			return
		}
		s.send(c)
	}()
}

// send submits c's report to the MX listener over SMTP, retrying temporary failures.
func (s *Server) send(c complaint) {
	report := buildARF(c, time.Now())
	wait := submitBackoff
	for try := 1; ; try++ {
		mx := ""
		if s.cfg.MX != nil {
			mx = s.cfg.MX()
		}
		var err error
		if mx == "" {
			err = errNoMX
		} else {
			err = s.submit(mx, c.returnPath, report)
		}
		if err == nil {
			s.log.Info("complaint report sent", "rcpt", c.rcpt, "mx", mx)
			return
		}
		var se *smtp.SMTPError
		permanent := errors.Is(err, errNoMX) || (errors.As(err, &se) && se.Code >= 500)
		if permanent || try == submitTries {
			s.log.Warn("complaint report not sent; complaint@ stays delivered", "rcpt", c.rcpt, "mx", mx, "tries", try,
				"error", err)
			return
		}
		select {
		case <-time.After(wait):
		case <-s.ctx.Done():
			return
		}
		wait *= 2
	}
}

var errNoMX = errors.New("no MX listener configured for complaint reports")

// submit runs one SMTP transaction with the MX listener at addr: the report to rcpt.
func (s *Server) submit(addr, rcpt string, report []byte) error {
	ctx, cancel := context.WithTimeout(s.ctx, submitTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	_ = conn.SetDeadline(time.Now().Add(submitTimeout))
	c := smtp.NewClient(conn)
	defer c.Close()
	if err := c.Hello(Domain); err != nil {
		return err
	}
	opts := &smtp.MailOptions{Size: int64(len(report))}
	if !ascii(report) {
		// The returned message kept its 8-bit body (or UTF-8 header fields, RFC 6532).
		if ok, _ := c.Extension("8BITMIME"); ok {
			opts.Body = smtp.Body8BitMIME
		}
		if ok, _ := c.Extension("SMTPUTF8"); ok {
			opts.UTF8 = true
		}
	}
	if err := c.Mail(feedbackFrom, opts); err != nil {
		return err
	}
	if err := c.Rcpt(rcpt, nil); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(report); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// buildARF writes the abuse report a mailbox provider's feedback loop sends when a recipient marks a
// message as spam (RFC 5965 §2): a multipart/report (RFC 6522) with report-type=feedback-report of a
// human-readable part, the message/feedback-report fields (§3.1: Feedback-Type, User-Agent, Version,
// with Original-Mail-From, Original-Rcpt-To, Arrival-Date, Reporting-MTA, Source-IP and Reported-Domain
// of §3.2) and the returned message with the Return-Path its MX added (message/rfc822), or only its
// header (text/rfc822-headers) when it is too large.
func buildARF(c complaint, now time.Time) []byte {
	header := headerOf(c.message)
	boundary := "arf-" + randomHex(12)
	var b bytes.Buffer
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\r\n", args...) }
	line("From: Postmill simulator feedback loop <%s>", feedbackFrom)
	line("To: <%s>", c.returnPath)
	line("Subject: Complaint about a message to %s", c.rcpt)
	line("Date: %s", now.UTC().Format(time.RFC1123Z))
	line("Message-ID: <%s@%s>", randomHex(16), Domain)
	line("Auto-Submitted: auto-generated")
	line("MIME-Version: 1.0")
	line(`Content-Type: multipart/report; report-type=feedback-report; boundary="%s"`, boundary)
	line("")
	line("--%s", boundary)
	line("Content-Type: text/plain; charset=us-ascii")
	line("Content-Transfer-Encoding: 7bit")
	line("")
	line("This is an email abuse report for a message sent to %s, received from %s on %s.", c.rcpt, c.sourceIP,
		c.arrival.UTC().Format(time.RFC1123Z))
	line("Postmill's mailbox simulator sends it for every message to complaint@%s, as a mailbox", Domain)
	line("provider's feedback loop does when a recipient marks a message as spam.")
	line("")
	line("--%s", boundary)
	line("Content-Type: message/feedback-report")
	line("")
	line("Feedback-Type: abuse")
	line("User-Agent: %s", userAgent)
	line("Version: 1")
	line("Original-Mail-From: <%s>", c.returnPath)
	line("Original-Rcpt-To: <%s>", c.rcpt)
	line("Arrival-Date: %s", c.arrival.UTC().Format(time.RFC1123Z))
	line("Reporting-MTA: dns; %s", Domain)
	if c.sourceIP.IsValid() {
		line("Source-IP: %s", c.sourceIP)
	}
	if d := fromDomain(header); d != "" {
		line("Reported-Domain: %s", d)
	}
	line("")
	line("--%s", boundary)
	returned := c.message
	if c.truncated {
		line("Content-Type: text/rfc822-headers")
		returned = header
	} else {
		line("Content-Type: message/rfc822")
	}
	line("Content-Disposition: inline")
	line("")
	line("Return-Path: <%s>", c.returnPath)
	b.Write(returned)
	if !bytes.HasSuffix(returned, []byte("\r\n")) {
		line("")
	}
	line("--%s--", boundary)
	return b.Bytes()
}

// headerOf returns the header section of a message (RFC 5322 §2.1) with its final CRLF, at most maxHeader
// bytes of it.
func headerOf(msg []byte) []byte {
	h := msg
	if i := bytes.Index(msg, []byte("\r\n\r\n")); i >= 0 {
		h = msg[:i+2]
	}
	if len(h) > maxHeader {
		h = h[:maxHeader]
		if i := bytes.LastIndex(h, []byte("\r\n")); i >= 0 {
			h = h[:i+2]
		}
	}
	return h
}

// fromDomain is the domain of the header's From address: the domain the report is about.
func fromDomain(header []byte) string {
	m, err := mail.ReadMessage(bytes.NewReader(append(bytes.Clone(header), "\r\n"...)))
	if err != nil {
		return ""
	}
	from := m.Header.Get("From")
	if a, err := mail.ParseAddress(from); err == nil {
		from = a.Address
	}
	at := strings.LastIndexByte(from, '@')
	if at < 0 {
		return ""
	}
	return strings.ToLower(strings.Trim(from[at+1:], "<> \t"))
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// gate tells a complaint report waiting in complain when the delivery of its message has been recorded:
// the MTA loads the job (its return path is learned), delivers to the simulator (a report starts
// waiting on that return path), and reports the outcome (the wait ends once the core recorded it).
type gate struct {
	mu      sync.Mutex
	jobs    map[string]string        // job id → return path, from loading to reporting
	waiting map[string]chan struct{} // return path → closed once a job with it was recorded
}

// maxGateJobs bounds the jobs remembered between loading and reporting (a job whose report never comes:
// the process crashed, the report failed); past it the table starts over, and a report whose job was
// forgotten is sent after ComplaintWait.
const maxGateJobs = 100000

func returnPathKey(rp string) string {
	return strings.ToLower(strings.Trim(strings.TrimSpace(rp), "<>"))
}

// loaded remembers the return path of a job for the simulator's domain.
func (g *gate) loaded(jobID, returnPath string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.jobs == nil || len(g.jobs) >= maxGateJobs {
		g.jobs = make(map[string]string)
	}
	g.jobs[jobID] = returnPathKey(returnPath)
}

// recorded ends the waits on the return path of jobID: its outcome is recorded.
func (g *gate) recorded(jobID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rp, ok := g.jobs[jobID]
	if !ok {
		return
	}
	delete(g.jobs, jobID)
	if ch, ok := g.waiting[rp]; ok {
		close(ch)
		delete(g.waiting, rp)
	}
}

// wait returns a channel closed when a job with returnPath is recorded, and release, which forgets the
// wait once the report no longer needs it.
func (g *gate) wait(returnPath string) (<-chan struct{}, func()) {
	rp := returnPathKey(returnPath)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.waiting == nil {
		g.waiting = make(map[string]chan struct{})
	}
	ch, ok := g.waiting[rp]
	if !ok {
		ch = make(chan struct{})
		g.waiting[rp] = ch
	}
	return ch, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.waiting[rp] == ch {
			delete(g.waiting, rp)
		}
	}
}

// Delivery wraps the DeliveryService the MTA reports to, and its DeliveryBatcher when it has one (nil otherwise), so that the simulator learns when the outcome of
// a job for its domain has been recorded: a complaint report is sent only then, as it would arrive from a
// real feedback loop long after delivery. Everything else passes through unchanged.
func (s *Server) Delivery(inner ports.DeliveryService, batch ports.DeliveryBatcher) (ports.DeliveryService, ports.DeliveryBatcher) {
	d := &delivery{inner: inner, batch: batch, s: s}
	if batch == nil {
		return d, nil
	}
	return d, d
}

type delivery struct {
	inner ports.DeliveryService
	batch ports.DeliveryBatcher // nil: the inner service takes no batches
	s     *Server
}

func isSimulated(domain string) bool {
	return strings.EqualFold(strings.TrimSuffix(domain, "."), Domain)
}

// LoadOutbound implements ports.DeliveryService.
func (d *delivery) LoadOutbound(ctx context.Context, job ports.DeliveryJob) (ports.OutboundMessage, error) {
	out, err := d.inner.LoadOutbound(ctx, job)
	if err == nil && isSimulated(job.Domain) {
		d.s.gate.loaded(job.ID, out.ReturnPath)
	}
	return out, err
}

// ReportDelivery implements ports.DeliveryService.
func (d *delivery) ReportDelivery(ctx context.Context, r ports.DeliveryReport) error {
	err := d.inner.ReportDelivery(ctx, r)
	if err == nil && isSimulated(r.Job.Domain) {
		d.s.gate.recorded(r.Job.ID)
	}
	return err
}
