package inbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	// DefaultAddr is the runtime contract's POSTMILL_SMTP_ADDR default.
	DefaultAddr = "127.0.0.1:2525"
	// DefaultMaxMessageBytes leaves room for what reports carry back: a bounce or feedback report may return
	// the whole original (RFC 3462 §2, RFC 5965 §2). Common MTAs cap the returned copy well below this
	// (Postfix's bounce_size_limit, Exim's bounce_return_size_limit), feedback loops often do not; the
	// bound keeps one hostile sender from making the listener hold an unbounded message in memory.
	DefaultMaxMessageBytes int64 = 10 << 20
	// DefaultMaxRecipients bounds RCPT commands per transaction (RFC 5321 §4.5.3.1.8 asks for at least 100).
	DefaultMaxRecipients = 100
	// DefaultMaxConnections bounds sessions served at once: with DefaultMaxMessageBytes each, 64 sessions
	// hold at most 640 MiB of message data. Senders beyond it get 421 and retry (RFC 5321 §3.8).
	DefaultMaxConnections = 64
	// DefaultReadTimeout is RFC 5321 §4.5.3.2.7's server timeout: five minutes waiting for the next command.
	DefaultReadTimeout = 5 * time.Minute
	// DefaultWriteTimeout bounds writing one reply to a client that stopped reading.
	DefaultWriteTimeout = time.Minute
)

// coreTimeout bounds one call into the core so a stalled core cannot hold a sending MTA for the whole
// read timeout; the sender then gets 451 and retries later.
const coreTimeout = time.Minute

// Config is what the composition root decides for the MX listener.
type Config struct {
	// Addr is the TCP address to listen on; ":0" picks a free port (Listen and Addr report it).
	Addr string
	// Domain is the host name of the greeting and the EHLO reply; empty means the machine's host name.
	Domain string
	// MaxMessageBytes bounds a message (advertised as SIZE, RFC 1870); zero means DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// MaxRecipients bounds envelope recipients per message; zero means DefaultMaxRecipients.
	MaxRecipients int
	// MaxConnections bounds sessions served at once; zero means DefaultMaxConnections.
	MaxConnections int
	// ReadTimeout and WriteTimeout bound each read and write on a connection; zero means the defaults.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
}

// Validate rejects configurations that would make the server refuse everything or fail late.
func (c Config) Validate() error {
	switch {
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("inbound: MaxMessageBytes must not be negative (got %d)", c.MaxMessageBytes)
	case c.MaxRecipients < 0:
		return fmt.Errorf("inbound: MaxRecipients must not be negative (got %d)", c.MaxRecipients)
	case c.MaxConnections < 0:
		return fmt.Errorf("inbound: MaxConnections must not be negative (got %d)", c.MaxConnections)
	case c.ReadTimeout < 0 || c.WriteTimeout < 0:
		return errors.New("inbound: timeouts must not be negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Domain == "" {
		c.Domain, _ = os.Hostname()
		if c.Domain == "" {
			c.Domain = "localhost"
		}
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxRecipients == 0 {
		c.MaxRecipients = DefaultMaxRecipients
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}

// Server is the MX listener for mail about mail Postmill sent: go-smtp for the protocol, this package's
// parsers to read bounces and feedback reports, the core's FeedbackService for every decision,
// smtpd.Server for listening and shutting down.
type Server struct {
	cfg      Config
	feedback ports.FeedbackService
	logger   *slog.Logger
	smtpd    *smtpd.Server
}

// New builds the MX listener over the core's FeedbackService. It fails when cfg is invalid or feedback is
// nil, so a wiring mistake stops the process at start.
func New(cfg Config, feedback ports.FeedbackService, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if feedback == nil {
		return nil, errors.New("inbound: a FeedbackService is required")
	}
	if logger == nil {
		logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:      cfg,
		feedback: feedback,
		logger:   logger.With(slog.String("service", "inbound")),
	}

	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Addr = cfg.Addr
	srv.Domain = cfg.Domain
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxRecipients = cfg.MaxRecipients
	srv.ReadTimeout = cfg.ReadTimeout
	srv.WriteTimeout = cfg.WriteTimeout
	// RFC 6533 §3: a DSN about an internationalized message is itself sent with SMTPUTF8; refusing the
	// extension would turn such bounces into downgraded or lost ones. The addresses Postmill accepts mail
	// for are ASCII, so nothing else changes.
	srv.EnableSMTPUTF8 = true
	srv.ErrorLog = smtpd.ErrorLog{Logger: s.logger}
	s.smtpd = smtpd.New("inbound", srv)
	s.smtpd.LimitConnections(cfg.MaxConnections)
	return s, nil
}

// Listen binds Config.Addr and returns the bound address (so ":0" works and the caller can log it).
func (s *Server) Listen() (net.Addr, error) { return s.smtpd.Listen() }

// Addr is the bound address after Listen (or Serve) bound it, nil before.
func (s *Server) Addr() net.Addr { return s.smtpd.Addr() }

// Serve accepts connections until Shutdown, listening first when Listen was not called. It returns nil
// after Shutdown and the accept error otherwise.
func (s *Server) Serve() error { return s.smtpd.Serve() }

// Shutdown stops accepting, lets transactions in progress finish and waits for clients to leave. When ctx
// ends first it cuts the remaining connections, cancels core calls in flight and returns ctx's error; a
// sender cut off before its DATA reply retries (RFC 5321 §4.5.4.1), and a report applied just before the
// cut is applied again harmlessly (FeedbackService.RecordBounce is idempotent).
func (s *Server) Shutdown(ctx context.Context) error { return s.smtpd.Shutdown(ctx) }
