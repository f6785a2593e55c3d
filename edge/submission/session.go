package submission

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/ports"
)

// Protocol replies that do not come from a ports error.
var (
	// errAuthRequired answers MAIL, RCPT and DATA before AUTH (RFC 4954 §6).
	errAuthRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
	// errEncryptionRequired answers a plaintext AUTH from a non-loopback client (RFC 4954 §6).
	errEncryptionRequired = &smtp.SMTPError{Code: 538, EnhancedCode: smtp.EnhancedCode{5, 7, 11}, Message: "Encryption required for requested authentication mechanism"}
	// errAuthFailed answers bad credentials, and a PLAIN authorization identity other than the username
	// (Postmill does not let one credential act for another).
	errAuthFailed = &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "Authentication credentials invalid"}
)

// lockedOut answers AUTH while the client's address or the username is locked out after failed attempts:
// 454 4.7.0, temporary (RFC 4954 §6), with the wait so a well-behaved client knows when to try again.
func lockedOut(wait time.Duration) *smtp.SMTPError {
	secs := int((wait + time.Second - 1) / time.Second)
	return &smtp.SMTPError{Code: 454, EnhancedCode: smtp.EnhancedCode{4, 7, 0},
		Message: "Too many failed authentication attempts, try again in " + strconv.Itoa(secs) + " seconds"}
}

// messageTooLarge answers a message that crossed Config.MaxMessageBytes (RFC 1870 §6.3: 552 5.3.4).
func messageTooLarge(limit int64) *smtp.SMTPError {
	return &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4},
		Message: "Message too large: at most " + strconv.FormatInt(limit, 10) + " bytes are accepted"}
}

// session is one client connection's state. go-smtp calls its methods one at a time, and creates a fresh
// session after STARTTLS, so the TLS state seen at creation holds for the session's life.
type session struct {
	srv       *Server
	remote    net.Addr
	client    string // smtpd.ClientKey of remote: what per-address lockouts count by
	authOK    bool   // AUTH may be used: a TLS connection or a loopback client
	principal *ports.Principal
	rcpts     []string
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	remote := c.Conn().RemoteAddr()
	return &session{srv: s, remote: remote, client: smtpd.ClientKey(remote), authOK: isTLS || isLoopback(remote)}, nil
}

// isLoopback reports whether the client connects from 127.0.0.0/8 or ::1 (IPv4-mapped included).
func isLoopback(a net.Addr) bool {
	if a == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// AuthMechanisms advertises PLAIN and LOGIN only where a password may travel (RFC 4954 §4).
func (s *session) AuthMechanisms() []string {
	if !s.authOK {
		return nil
	}
	return []string{sasl.Plain, sasl.Login}
}

// Auth starts a SASL exchange; credentials are checked by the core.
func (s *session) Auth(mech string) (sasl.Server, error) {
	if !s.authOK {
		return nil, errEncryptionRequired
	}
	switch strings.ToUpper(mech) {
	case sasl.Plain:
		return sasl.NewPlainServer(func(identity, username, password string) error {
			if identity != "" && identity != username {
				if wait := s.srv.lockout.lockedFor(s.client, username); wait > 0 {
					return lockedOut(wait)
				}
				s.authFailed(sasl.Plain, username, errAuthFailed)
				return errAuthFailed
			}
			return s.authenticate(sasl.Plain, username, password)
		}), nil
	case sasl.Login:
		return newLoginServer(func(username, password string) error {
			return s.authenticate(sasl.Login, username, password)
		}), nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

// authenticate asks the core, unless the client's address or the username is locked out: then the answer
// is 454 whatever the password, so guessing gains nothing and costs the core nothing.
func (s *session) authenticate(mech, username, password string) error {
	ctx, cancel := context.WithTimeout(s.srv.smtpd.Context(), sendTimeout)
	defer cancel()
	if wait := s.srv.lockout.lockedFor(s.client, username); wait > 0 {
		reply := lockedOut(wait)
		s.srv.logger.LogAttrs(ctx, slog.LevelInfo, "smtp auth refused: locked out", slog.String("mechanism", mech),
			slog.String("remote", s.remoteString()), slog.Int("reply", reply.Code))
		return reply
	}
	p, err := s.srv.core.Auth.AuthenticateSMTP(ctx, username, password)
	if err == nil && (p.Kind != ports.PrincipalSMTP || p.OrganizationID == "") {
		err = ports.Unauthenticated("not an SMTP credential")
	}
	if err != nil {
		reply := replyFor(err, stageAuth)
		if ports.ErrorCode(err) == ports.CodeUnauthenticated {
			s.authFailed(mech, username, err)
		} else {
			s.log(ctx, slog.LevelWarn, "smtp auth failed", err, slog.String("mechanism", mech), slog.Int("reply", reply.Code))
		}
		return reply
	}
	s.srv.lockout.succeeded(username)
	s.principal = &p
	return nil
}

// authFailed counts a refused credential towards the lockouts and logs it (never the password).
func (s *session) authFailed(mech, username string, err error) {
	locked := s.srv.lockout.failed(s.client, username)
	attrs := []slog.Attr{slog.String("mechanism", mech), slog.Int("reply", errAuthFailed.Code)}
	msg := "smtp auth refused"
	if locked {
		msg = "smtp auth refused; client address or username locked out"
		attrs = append(attrs, slog.String("username", smtpd.ReplyText(username)))
	}
	s.log(context.Background(), slog.LevelInfo, msg, err, attrs...)
}

// Mail starts a transaction; the envelope sender is not used (the MTA sets a VERP return path).
func (s *session) Mail(string, *smtp.MailOptions) error {
	if s.principal == nil {
		return errAuthRequired
	}
	s.rcpts = s.rcpts[:0]
	return nil
}

// Rcpt adds an envelope recipient; go-smtp enforces MaxRecipients. An address the send path cannot take
// (ports.ValidAddrSpec: a quoted local part, an internationalised or literal domain) is refused here, for
// itself, rather than accepted and then failing the whole message at the end of DATA.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.principal == nil {
		return errAuthRequired
	}
	if !ports.ValidAddrSpec(to) {
		return errRecipientUnsupported
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

// errRecipientUnsupported refuses a recipient the send path cannot deliver to (RFC 5321 §4.2.2: 553,
// mailbox name not allowed; RFC 3463 X.1.3: bad destination mailbox address syntax).
var errRecipientUnsupported = &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 1, 3},
	Message: "Postmill cannot send to this address: quoted local parts, internationalised domain names and address literals are not supported"}

// Data parses the message as it arrives and hands it to the core's send path; the reply carries the
// message id. The raw message is never held whole: the parser keeps only what the send request needs
// (decoded bodies and attachments, bounded by SPEC §8's attachment limits), and a message that crosses
// Config.MaxMessageBytes is refused with 552 as soon as it does.
func (s *session) Data(r io.Reader) error {
	if s.principal == nil {
		return errAuthRequired
	}
	in := &meteredReader{r: r}
	req, err := parseMessage(in, s.rcpts)
	if err == nil {
		// What the parser did not need (an epilogue, say) still counts towards the size limit.
		_, err = io.Copy(io.Discard, in)
	}
	if in.tooLarge {
		s.srv.logger.LogAttrs(context.Background(), slog.LevelInfo, "message refused: too large",
			slog.String("remote", s.remoteString()), slog.Int64("bytes", in.n))
		return messageTooLarge(s.srv.cfg.MaxMessageBytes)
	}
	if in.failed != nil {
		// The client stopped sending, or the connection failed, before the end of the data: whatever the
		// parser made of that, the message was not read.
		return smtpd.DataReadFailure(in.failed)
	}
	if err != nil && !isRefusal(err) {
		// The connection failed or the client reset the transfer: there is nobody to answer.
		return err
	}
	ctx, cancel := context.WithTimeout(s.srv.smtpd.Context(), sendTimeout)
	defer cancel()
	if err == nil {
		var res ports.SendResult
		res, err = s.srv.core.Emails.Send(ctx, s.principal.OrganizationID, req)
		if err == nil {
			s.srv.logger.LogAttrs(ctx, slog.LevelInfo, "message submitted",
				slog.String("message_id", res.ID),
				slog.String("organization_id", s.principal.OrganizationID),
				slog.Int("recipients", len(s.rcpts)),
				slog.Int64("bytes", in.n),
				slog.String("remote", s.remoteString()))
			return queued(res.ID)
		}
	}
	reply := replyFor(err, stageData)
	level := slog.LevelInfo
	if reply.Code/100 == 4 && ports.ErrorCode(err) == ports.CodeInternal {
		level = slog.LevelError
	}
	s.log(ctx, level, "message refused", err, slog.Int("reply", reply.Code))
	return reply
}

// isRefusal reports whether err is the parser's refusal of the message (a ports error), as opposed to a
// failure to read it.
func isRefusal(err error) bool {
	_, ok := ports.AsError(err)
	return ok
}

// meteredReader counts what the DATA reader delivered and remembers when go-smtp stopped it at
// MaxMessageBytes, whatever the MIME parser above it made of that error.
type meteredReader struct {
	r        io.Reader
	n        int64
	tooLarge bool
	failed   error // a read timeout or network failure, which the parser may report as a refusal
}

func (m *meteredReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	m.n += int64(n)
	var ne net.Error
	switch {
	case errors.Is(err, smtp.ErrDataTooLarge):
		m.tooLarge = true
	case errors.As(err, &ne):
		m.failed = err
	}
	return n, err
}

// Reset ends the transaction; authentication survives it (RFC 4954 §4).
func (s *session) Reset() { s.rcpts = s.rcpts[:0] }

// Logout implements smtp.Session.
func (s *session) Logout() error { return nil }

func (s *session) remoteString() string {
	if s.remote == nil {
		return ""
	}
	return s.remote.String()
}

// log records a refusal with its cause; internal causes are logged in full, never sent to the client.
func (s *session) log(ctx context.Context, level slog.Level, msg string, err error, attrs ...slog.Attr) {
	attrs = append(attrs, slog.String("remote", s.remoteString()), slog.String("error", err.Error()))
	if s.principal != nil {
		attrs = append(attrs, slog.String("organization_id", s.principal.OrganizationID))
	}
	s.srv.logger.LogAttrs(ctx, level, msg, attrs...)
}
