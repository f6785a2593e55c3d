package inbound

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
)

// session is one client connection's state. go-smtp calls its methods one at a time. It implements no
// AUTH: an MX takes mail from any host (RFC 5321 §2.3.5), and every decision is the core's.
type session struct {
	srv    *Server
	remote net.Addr
	from   string   // the reverse path of the transaction; "" for the null path <>
	rcpts  []string // accepted recipients, without duplicates
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{srv: s, remote: c.Conn().RemoteAddr()}, nil
}

// Mail starts a transaction from any reverse path: bounces come from the null path (RFC 3464 §2,
// RFC 5321 §4.5.5), feedback reports from the reporter's mailbox.
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	s.rcpts = s.rcpts[:0]
	return nil
}

// Rcpt asks the core whether the address is one Postmill takes mail for (a VERP return path whose MAC
// checks, or the feedback-loop address); go-smtp enforces MaxRecipients.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ctx, cancel := context.WithTimeout(s.srv.smtpd.Context(), coreTimeout)
	defer cancel()
	ok, err := s.srv.feedback.AcceptsRecipient(ctx, to)
	switch {
	case err != nil && classify(err) == outcomePermanent:
		s.log(ctx, slog.LevelInfo, "recipient refused", slog.String("rcpt", to), slog.String("error", err.Error()))
		return errNoSuchRecipient
	case err != nil:
		s.log(ctx, slog.LevelError, "recipient check failed", slog.String("rcpt", to), slog.String("error", err.Error()))
		return errTemporary
	case !ok:
		s.log(ctx, slog.LevelInfo, "recipient refused", slog.String("rcpt", to))
		return errNoSuchRecipient
	}
	for _, r := range s.rcpts {
		if strings.EqualFold(r, to) {
			return nil
		}
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

// Data reads the message, parses it once and hands the report to the core once per accepted recipient.
// The reply follows the table in the package documentation: any temporary failure answers 451 for the
// whole message (the sender retries it; recording a bounce again changes nothing), else a report recorded
// for at least one recipient answers 250, else the first refusal answers 550.
func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		if errors.Is(err, smtp.ErrDataTooLarge) {
			return smtp.ErrDataTooLarge
		}
		return err
	}
	ctx, cancel := context.WithTimeout(s.srv.smtpd.Context(), coreTimeout)
	defer cancel()
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
