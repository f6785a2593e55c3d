package inbound

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
)

// session is one client connection's state. go-smtp calls its methods one at a time. It implements no
// AUTH: an MX takes mail from any host (RFC 5321 §2.3.5), and every decision is the core's.
type session struct {
	srv    *Server
	remote net.Addr
	from   string   // the reverse path of the transaction; "" for the null path <>
	rcpts  []string // accepted report recipients (return paths, feedback address), without duplicates
	mail   []string // accepted recipients at customers' inbound domains, without duplicates
	dmarc  bool     // the DMARC report address is a recipient (dmarc.go)
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{srv: s, remote: c.Conn().RemoteAddr()}, nil
}

// Mail starts a transaction from any reverse path: bounces come from the null path (RFC 3464 §2,
// RFC 5321 §4.5.5), feedback reports from the reporter's mailbox.
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	s.rcpts = s.rcpts[:0]
	s.mail = s.mail[:0]
	s.dmarc = false
	return nil
}

// Rcpt asks the core whether the address is one Postmill takes mail for (a VERP return path whose MAC
// checks, or the feedback-loop address); go-smtp enforces MaxRecipients.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	to = quoteLocalPart(strings.TrimSuffix(to, ".")) // a domain written as absolute (x@in.example.) is the same domain
	if s.isDMARCAddress(to) {
		s.dmarc = true
		return nil
	}
	ctx, cancel := context.WithTimeout(s.srv.smtpd.Context(), coreTimeout)
	defer cancel()
	ok, err := s.srv.feedback.AcceptsRecipient(ctx, to)
	switch {
	case err != nil && classify(err) != outcomePermanent:
		s.log(ctx, slog.LevelError, "recipient check failed", slog.String("rcpt", to), slog.String("error", err.Error()))
		return errTemporary
	case err == nil && ok:
		s.rcpts = appendOnce(s.rcpts, to)
		return nil
	case s.srv.receive != nil:
		ok, rerr := s.srv.receive.AcceptsInboundRecipient(ctx, to)
		switch {
		case rerr != nil:
			s.log(ctx, slog.LevelError, "recipient check failed", slog.String("rcpt", to), slog.String("error", rerr.Error()))
			return errTemporary
		case ok:
			s.mail = appendOnce(s.mail, to)
			return nil
		}
	}
	attrs := []slog.Attr{slog.String("rcpt", to)}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	s.log(ctx, slog.LevelInfo, "recipient refused", attrs...)
	return errNoSuchRecipient
}

// quoteLocalPart gives back the quotes go-smtp removes from a quoted local part (RFC 5321 §4.1.2
// Quoted-string: RCPT TO:<"john doe"@example.org> reaches Rcpt as john doe@example.org), so the address
// matched, stored and shown is a valid one. A local part that is a dot-atom is left as it is.
func quoteLocalPart(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || dotAtom(addr[:at]) {
		return addr
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range addr[:at] {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String() + addr[at:]
}

// dotAtom reports whether s is an RFC 5322 §3.2.3 dot-atom (atext, with UTF-8 allowed as RFC 6531 does).
func dotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r >= 0x80:
		case strings.ContainsRune("!#$%&'*+-/=?^_`{|}~.", r):
		default:
			return false
		}
	}
	return true
}

// appendOnce adds addr to list unless it is there already (compared without case).
func appendOnce(list []string, addr string) []string {
	for _, r := range list {
		if strings.EqualFold(r, addr) {
			return list
		}
	}
	return append(list, addr)
}

// Data reads the message, parses it once and hands the report to the core once per accepted recipient.
// The reply follows the table in the package documentation: any temporary failure answers 451 for the
// whole message (the sender retries it; recording a bounce again changes nothing), else a report recorded
// for at least one recipient answers 250, else the first refusal answers 550.
func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return smtpd.DataReadFailure(err)
	}
	ctx, cancel := context.WithTimeout(s.srv.smtpd.Context(), coreTimeout)
	defer cancel()
	if s.dmarc {
		if err := s.receiveDMARC(ctx, raw); err != nil {
			return err
		}
	}
	if len(s.mail) > 0 {
		if err := s.receiveMail(ctx, raw); err != nil {
			return err
		}
		if len(s.rcpts) == 0 {
			return accepted("message accepted")
		}
	}
	attrs := []slog.Attr{slog.String("from", s.from), slog.Any("rcpts", s.rcpts), slog.Int("bytes", len(raw))}

	rep, err := parseReport(raw, envelope{from: s.from, rcpts: s.rcpts})
	if err != nil {
		reply := refused(err)
		s.log(ctx, slog.LevelInfo, "report refused", append(attrs, slog.String("error", err.Error()))...)
		return reply
	}
	if rep.kind == kindNone {
		// RFC 3834 §5: auto-replies and other mail that reports nothing must not produce more mail, so it
		// is taken and dropped rather than refused.
		s.log(ctx, slog.LevelInfo, "mail dropped: not a delivery or feedback report", attrs...)
		return accepted("not a delivery or feedback report, discarded")
	}

	now := time.Now().UTC()
	recorded := 0
	var firstRefusal error
	for _, rcpt := range s.rcpts {
		var err error
		switch rep.kind {
		case kindBounce:
			b := rep.bounce
			b.Rcpt, b.ArrivedAt = rcpt, now
			err = s.srv.feedback.RecordBounce(ctx, b)
		case kindComplaint:
			c := rep.complaint
			c.Rcpt, c.ArrivedAt = rcpt, now
			err = s.srv.feedback.RecordComplaint(ctx, c)
		}
		switch classify(err) {
		case outcomeRecorded:
			recorded++
		case outcomePermanent:
			s.log(ctx, slog.LevelInfo, "report not mapped", slog.String("rcpt", rcpt), slog.String("format", rep.format),
				slog.String("error", err.Error()))
			if firstRefusal == nil {
				firstRefusal = err
			}
		case outcomeTemporary:
			s.log(ctx, slog.LevelError, "recording a report failed", append(attrs, slog.String("rcpt", rcpt),
				slog.String("format", rep.format), slog.String("error", err.Error()))...)
			return errTemporary
		}
	}
	what := "bounce recorded"
	if rep.kind == kindComplaint {
		what = "complaint recorded"
	}
	attrs = append(attrs, slog.String("format", rep.format), slog.Int("recorded", recorded))
	if rep.kind == kindBounce {
		attrs = append(attrs, slog.Int("recipients", len(rep.bounce.Recipients)),
			slog.String("original_message_id", rep.bounce.OriginalMessageID))
	} else {
		attrs = append(attrs, slog.String("feedback_type", rep.complaint.FeedbackType),
			slog.String("original_message_id", rep.complaint.OriginalMessageID))
	}
	if recorded == 0 {
		s.log(ctx, slog.LevelInfo, "report refused", attrs...)
		return refused(firstRefusal)
	}
	s.log(ctx, slog.LevelInfo, what, attrs...)
	return accepted(what)
}

// Reset ends the transaction.
func (s *session) Reset() {
	s.from = ""
	s.rcpts = s.rcpts[:0]
	s.mail = s.mail[:0]
}

// receiveMail parses a message for customers' inbound domains and hands it to the core, which keeps it
// durably before answering; any failure is temporary (451) so the sender retries, and a retried message is
// stored once.
func (s *session) receiveMail(ctx context.Context, raw []byte) error {
	m, whole := parseMailWhole(raw, s.from, slices.Clone(s.mail))
	if !whole {
		// Parts the walk did not reach were not scanned for malware either: the message is refused rather
		// than kept and acted on as clean.
		s.log(ctx, slog.LevelInfo, "message refused: MIME structure past the bounds", slog.Any("rcpts", s.mail),
			slog.Int("bytes", len(raw)))
		return errTooComplex
	}
	if s.remote != nil {
		m.RemoteAddr = s.remote.String()
	}
	res, err := s.srv.receive.Receive(ctx, m)
	if err != nil {
		s.log(ctx, slog.LevelError, "receiving a message failed", slog.Any("rcpts", s.mail), slog.Int("bytes", len(raw)),
			slog.String("error", err.Error()))
		return errTemporary
	}
	taken := 0
	for _, id := range res.IDs {
		if id != "" {
			taken++
		}
	}
	if taken == 0 {
		// Every recipient's domain stopped taking mail between RCPT and the end of DATA (suspended or
		// deleted): refuse rather than answer 250 for a message kept for no one.
		s.log(ctx, slog.LevelInfo, "message refused: no recipient takes mail any more", slog.Any("rcpts", s.mail))
		return errNoSuchRecipient
	}
	s.log(ctx, slog.LevelInfo, "message received", slog.Any("rcpts", s.mail), slog.Int("bytes", len(raw)),
		slog.Any("ids", res.IDs), slog.Int("attachments", len(m.Attachments)))
	return nil
}

// Logout implements smtp.Session.
func (s *session) Logout() error { return nil }

// log records an event of the session with the client's address.
func (s *session) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	remote := ""
	if s.remote != nil {
		remote = s.remote.String()
	}
	s.srv.logger.LogAttrs(ctx, level, msg, append(attrs, slog.String("remote", remote))...)
}
