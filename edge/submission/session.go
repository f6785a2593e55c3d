package submission

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

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

// session is one client connection's state. go-smtp calls its methods one at a time, and creates a fresh
// session after STARTTLS, so the TLS state seen at creation holds for the session's life.
type session struct {
	srv       *Server
	remote    net.Addr
	authOK    bool // AUTH may be used: a TLS connection or a loopback client
	principal *ports.Principal
	rcpts     []string
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	remote := c.Conn().RemoteAddr()
	return &session{srv: s, remote: remote, authOK: isTLS || isLoopback(remote)}, nil
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

func (s *session) authenticate(mech, username, password string) error {
	ctx, cancel := context.WithTimeout(s.srv.smtpd.Context(), sendTimeout)
	defer cancel()
	p, err := s.srv.core.Auth.AuthenticateSMTP(ctx, username, password)
	if err == nil && (p.Kind != ports.PrincipalSMTP || p.OrganizationID == "") {
		err = ports.Unauthenticated("not an SMTP credential")
	}
	if err != nil {
		reply := replyFor(err, stageAuth)
		s.log(ctx, slog.LevelInfo, "smtp auth refused", err, slog.String("mechanism", mech), slog.Int("reply", reply.Code))
		return reply
	}
	s.principal = &p
	return nil
}

// Mail starts a transaction; the envelope sender is not used (the MTA sets a VERP return path).
func (s *session) Mail(string, *smtp.MailOptions) error {
	if s.principal == nil {
		return errAuthRequired
	}
	s.rcpts = s.rcpts[:0]
	return nil
}

// Rcpt adds an envelope recipient; go-smtp enforces MaxRecipients.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.principal == nil {
		return errAuthRequired
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

// Data parses the message and hands it to the core's send path. The reply carries the message id.
func (s *session) Data(r io.Reader) error {
	if s.principal == nil {
		return errAuthRequired
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		if errors.Is(err, smtp.ErrDataTooLarge) {
			return smtp.ErrDataTooLarge
		}
		return err
	}
	ctx, cancel := context.WithTimeout(s.srv.smtpd.Context(), sendTimeout)
	defer cancel()
	req, err := parseMessage(raw, s.rcpts)
	if err == nil {
		var res ports.SendResult
		res, err = s.srv.core.Emails.Send(ctx, s.principal.OrganizationID, req)
		if err == nil {
			s.srv.logger.LogAttrs(ctx, slog.LevelInfo, "message submitted",
				slog.String("message_id", res.ID),
				slog.String("organization_id", s.principal.OrganizationID),
				slog.Int("recipients", len(s.rcpts)),
				slog.Int("bytes", len(raw)),
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
