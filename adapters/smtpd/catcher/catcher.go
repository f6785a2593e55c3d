// Package catcher is local mode's mail catcher: an SMTP server that takes every message for any
// recipient, keeps the newest ones as files (so they survive a restart), verifies each one's DKIM
// signature against the key published in DNS, and hands them to the edge through ports.MailCatcher. In
// local mode the MTA delivers to it over real SMTP like to any receiving server, so what the catcher shows
// is exactly what a mailbox provider would have been given.
//
// It lives under adapters/smtpd because it is one more go-smtp listener run by smtpd.Server; it imports
// ports, adapters/smtpd, go-smtp, go-message and go-msgauth.
package catcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	// DefaultAddr is the port local catchers (Mailpit, MailHog) listen on by convention.
	DefaultAddr = "127.0.0.1:1025"
	// DefaultMax is how many messages are kept; the oldest go first.
	DefaultMax = 1000
	// DefaultMaxMessageBytes is the largest message the platform sends: 25 MiB of attachments as base64
	// MIME parts, with bodies and headers (the submission server's bound).
	DefaultMaxMessageBytes int64 = 40 << 20
	// DefaultMaxBytes bounds the disk all kept messages take together.
	DefaultMaxBytes int64 = 1 << 30
	// DefaultMaxRecipients is well above what the MTA puts in one transaction, so the catcher never
	// makes it split one.
	DefaultMaxRecipients = 1000
	// DefaultMaxConnections bounds sessions at once. Every one of them comes from the same address (the
	// MTA on this machine, which opens up to POSTMILL_MTA_CONCURRENCY at once), so the per-address bound
	// is the same: the usual 8 per address would turn the MTA's 9th connection into a deferral.
	DefaultMaxConnections = 64
	// dkimTimeout bounds the key lookup of one verification.
	dkimTimeout = 5 * time.Second
)

// Config is what the composition root decides for the catcher.
type Config struct {
	smtpd.Config
	// Dir holds the messages (POSTMILL_DATA_DIR/catcher).
	Dir string
	// Max is how many messages are kept (POSTMILL_CATCHER_MAX); MaxBytes bounds their total size.
	Max      int
	MaxBytes int64
}

// Catcher is the SMTP server and the message store behind it. It implements ports.MailCatcher.
type Catcher struct {
	cfg      Config
	store    *store
	resolver ports.Resolver
	log      *slog.Logger
	smtpd    *smtpd.Server
	now      func() time.Time
}

var _ ports.MailCatcher = (*Catcher)(nil)

// New opens the store in cfg.Dir (keeping what an earlier run caught) and builds the SMTP server. resolver
// looks up the DKIM keys of caught messages; nil skips verification (every result is "none").
func New(cfg Config, resolver ports.Resolver, logger *slog.Logger) (*Catcher, error) {
	if cfg.Dir == "" {
		return nil, errors.New("catcher: no directory")
	}
	if cfg.Max < 0 || cfg.MaxBytes < 0 {
		return nil, errors.New("catcher: Max and MaxBytes must not be negative")
	}
	if cfg.Max == 0 {
		cfg.Max = DefaultMax
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	cfg.Config = cfg.Config.WithDefaults(smtpd.Config{
		Addr: DefaultAddr, MaxMessageBytes: DefaultMaxMessageBytes, MaxRecipients: DefaultMaxRecipients,
		MaxConnections: DefaultMaxConnections, MaxConnectionsPerIP: DefaultMaxConnections,
	})
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	st, err := openStore(cfg.Dir, cfg.Max, cfg.MaxBytes)
	if err != nil {
		return nil, err
	}
	c := &Catcher{cfg: cfg, store: st, resolver: resolver, log: logger.With(slog.String("service", "catcher")), now: time.Now}
	c.smtpd, err = smtpd.New("catcher", cfg.Config, smtp.BackendFunc(c.newSession), c.log, func(srv *smtp.Server) {
		srv.EnableSMTPUTF8 = true
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Listen binds the configured address and returns the bound one (":0" works).
func (c *Catcher) Listen() (net.Addr, error) { return c.smtpd.Listen() }

// Serve accepts connections until Shutdown.
func (c *Catcher) Serve() error { return c.smtpd.Serve() }

// Shutdown stops accepting and waits for sessions to end, cutting them when ctx ends.
func (c *Catcher) Shutdown(ctx context.Context) error { return c.smtpd.Shutdown(ctx) }

// ListCaught implements ports.MailCatcher.
func (c *Catcher) ListCaught(context.Context) ([]ports.CaughtMessage, error) {
	return c.store.list(), nil
}

// Caught implements ports.MailCatcher: the message read in full. Errors: not_found.
func (c *Catcher) Caught(_ context.Context, id string) (ports.CaughtContent, error) {
	m, raw, err := c.store.get(id)
	if err != nil {
		return ports.CaughtContent{}, err
	}
	return readContent(m, raw), nil
}

// CaughtRaw implements ports.MailCatcher. Errors: not_found.
func (c *Catcher) CaughtRaw(_ context.Context, id string) ([]byte, error) {
	_, raw, err := c.store.get(id)
	return raw, err
}

// CaughtAttachment implements ports.MailCatcher. Errors: not_found.
func (c *Catcher) CaughtAttachment(_ context.Context, id string, index int) (ports.CaughtAttachment, []byte, error) {
	_, raw, err := c.store.get(id)
	if err != nil {
		return ports.CaughtAttachment{}, nil, err
	}
	a, body, ok := readAttachment(raw, index)
	if !ok {
		return ports.CaughtAttachment{}, nil, ports.NotFound("attachment not found")
	}
	return a, body, nil
}

// ClearCaught implements ports.MailCatcher.
func (c *Catcher) ClearCaught(context.Context) error { return c.store.clear() }

// receive keeps one message: its summary is read from its header, its signature verified, and both files
// written before the sender is told 250.
func (c *Catcher) receive(ctx context.Context, from string, rcpts []string, raw []byte) (ports.CaughtMessage, error) {
	now := c.now().UTC()
	m := summarize(raw)
	m.ID = newID(now)
	m.ReceivedAt = now
	m.EnvelopeFrom = bounded(from, maxFieldBytes)
	m.EnvelopeTo = rcpts
	m.Size = int64(len(raw))
	m.DKIM = c.verify(ctx, raw)
	if err := c.store.add(m, raw); err != nil {
		return ports.CaughtMessage{}, err
	}
	return m, nil
}

// session is one SMTP connection: any sender, any recipient, no authentication.
type session struct {
	c     *Catcher
	from  string
	rcpts []string
}

func (c *Catcher) newSession(*smtp.Conn) (smtp.Session, error) { return &session{c: c}, nil }

// Mail starts a transaction; the null reverse path of bounces is taken too.
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from, s.rcpts = from, nil
	return nil
}

// Rcpt takes any recipient; go-smtp bounds how many.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.rcpts = append(s.rcpts, bounded(to, maxFieldBytes))
	return nil
}

// Data keeps the message. go-smtp stops reading at MaxMessageBytes and the sender is told 552.
func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return smtpd.DataReadFailure(err)
	}
	ctx, cancel := context.WithTimeout(s.c.smtpd.Context(), dkimTimeout+5*time.Second)
	defer cancel()
	m, err := s.c.receive(ctx, s.from, s.rcpts, raw)
	if err != nil {
		s.c.log.Error("keeping a caught message failed", slog.String("error", err.Error()))
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Could not store the message, try again later"}
	}
	s.c.log.Info("message caught", slog.String("id", m.ID), slog.String("from", m.EnvelopeFrom),
		slog.Int("rcpts", len(m.EnvelopeTo)), slog.Int64("bytes", m.Size), slog.String("dkim", m.DKIM.Result))
	return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: fmt.Sprintf("OK caught as %s", m.ID)}
}

// Reset ends the transaction.
func (s *session) Reset() { s.from, s.rcpts = "", nil }

// Logout ends the session.
func (s *session) Logout() error { return nil }
