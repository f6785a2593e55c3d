package simulator

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Replies of the simulator: what real receivers answer in each situation (RFC 5321 §4.2, enhanced status
// codes of RFC 3463), with "simulated" in the text so that a timeline shows where they came from.
var (
	// replyNoMailbox is a hard bounce: X.1.1, bad destination mailbox address.
	replyNoMailbox = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1},
		Message: "Mailbox does not exist (simulated hard bounce)"}
	// replyUnknown refuses an address of the simulator's domain that names no behaviour, as a receiver
	// refuses a mailbox it does not have.
	replyUnknown = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1},
		Message: "No such simulator address; use delivered, bounce, soft-bounce, complaint or delay"}
	// replyGreylisted defers every attempt, as a receiver that never stops greylisting (X.7.1, delivery not
	// authorized).
	replyGreylisted = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1},
		Message: "Greylisted, try again later (simulated delay)"}
	// replyDelivered is the answer to DATA.
	replyDelivered = &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0},
		Message: "Ok: delivered to the Postmill simulator"}
)

// replyMailboxFull defers attempt n of soft-bounce@ (X.2.2, mailbox full: the textbook soft bounce).
func replyMailboxFull(n, of int) *smtp.SMTPError {
	return &smtp.SMTPError{Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 2},
		Message: fmt.Sprintf("Mailbox full, try again later (simulated soft bounce, attempt %d of %d deferred)", n, of)}
}

// maxReturned bounds how much of a message a complaint report returns (RFC 5965 §2 item d); a larger
// message is returned as its header only (text/rfc822-headers). maxHeader bounds that header.
const (
	maxReturned = 1 << 20
	maxHeader   = 64 << 10
)

// session is one connection from the MTA. go-smtp calls its methods one at a time.
type session struct {
	s          *Server
	remote     netip.Addr
	from       string
	complaints []string // accepted complaint@ recipients of the transaction
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	var remote netip.Addr
	if ta, ok := c.Conn().RemoteAddr().(*net.TCPAddr); ok {
		remote, _ = netip.AddrFromSlice(ta.IP)
		remote = remote.Unmap()
	}
	return &session{s: s, remote: remote}, nil
}

// Mail starts a transaction; the reverse path is the VERP return path a complaint report goes back to.
func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.from = from
	ss.complaints = ss.complaints[:0]
	return nil
}

// Rcpt answers each recipient with its behaviour's reply.
func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	b, ok := Lookup(to)
	if !ok {
		return replyUnknown
	}
	switch b {
	case Bounce:
		return replyNoMailbox
	case Delay:
		return replyGreylisted
	case SoftBounce:
		key := strings.ToLower(ss.from) + "\x00" + strings.ToLower(to)
		if n := ss.s.attempts.next(key, time.Now()); n <= ss.s.cfg.SoftBounces {
			return replyMailboxFull(n, ss.s.cfg.SoftBounces)
		}
		ss.s.attempts.forget(key)
	case Complaint:
		ss.complaints = append(ss.complaints, to)
	}
	return nil
}

// Data takes the message. For complaint@ recipients it keeps what a feedback report returns and starts
// the report before answering, so the report is waiting before the MTA can record the delivery.
func (ss *session) Data(r io.Reader) error {
	if len(ss.complaints) == 0 {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return err
		}
		return replyDelivered
	}
	var kept bytes.Buffer
	if _, err := io.Copy(&kept, io.LimitReader(r, maxReturned+1)); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	arrival := time.Now()
	for _, rcpt := range ss.complaints {
		ss.s.complain(complaint{
			returnPath: ss.from, rcpt: rcpt, message: kept.Bytes(), truncated: kept.Len() > maxReturned,
			sourceIP: ss.remote, arrival: arrival,
		})
	}
	return replyDelivered
}

// Reset ends the transaction.
func (ss *session) Reset() {
	ss.from = ""
	ss.complaints = ss.complaints[:0]
}

// Logout implements smtp.Session.
func (ss *session) Logout() error { return nil }

// Bounds of attempts.
const (
	// attemptsTTL forgets a soft-bounce recipient whose retries stopped (its message was cancelled, or
	// failed at its maximum age).
	attemptsTTL = 7 * 24 * time.Hour
	// maxAttempts bounds the recipients remembered.
	maxAttempts = 100000
)

// attempts counts the attempts of soft-bounce@ recipients by envelope sender and recipient.
type attempts struct {
	mu sync.Mutex
	m  map[string]attempt
}

type attempt struct {
	n    int
	last time.Time
}

// next counts one more attempt of key at now and returns the count.
func (a *attempts) next(key string, now time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = make(map[string]attempt)
	}
	if len(a.m) >= maxAttempts {
		a.pruneLocked(now)
	}
	e := a.m[key]
	if now.Sub(e.last) > attemptsTTL {
		e.n = 0
	}
	e.n++
	e.last = now
	a.m[key] = e
	return e.n
}

// forget drops key once its recipient was accepted.
func (a *attempts) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, key)
}

// pruneLocked drops expired entries and, when every entry is recent, starts over: a soft-bounce
// recipient forgotten that way is deferred a few more times, nothing worse.
func (a *attempts) pruneLocked(now time.Time) {
	for k, e := range a.m {
		if now.Sub(e.last) > attemptsTTL {
			delete(a.m, k)
		}
	}
	if len(a.m) >= maxAttempts {
		clear(a.m)
	}
}
