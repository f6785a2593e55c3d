package submission

import (
	"context"
	"crypto/tls"
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
	// DefaultAddr is the runtime contract's POSTMILL_SUBMISSION_ADDR default.
	DefaultAddr = "127.0.0.1:1587"
	// DefaultMaxMessageBytes fits the send API's largest message: 25 MiB of attachments grow to about
	// 34.3 MiB as base64 MIME parts with their line breaks (RFC 2045 §6.8), plus bodies and headers.
	DefaultMaxMessageBytes int64 = 40 << 20
	// DefaultMaxRecipients bounds RCPT commands per transaction (RFC 5321 §4.5.3.1.8 asks for at least 100).
	DefaultMaxRecipients = 100
	// DefaultReadTimeout is RFC 5321 §4.5.3.2.7's server timeout: five minutes waiting for the next command.
	DefaultReadTimeout = 5 * time.Minute
	// DefaultWriteTimeout bounds writing one reply to a client that stopped reading.
	DefaultWriteTimeout = time.Minute
)

// sendTimeout bounds one call into the core (authentication or a send) so a stalled core cannot hold a
// client for the whole read timeout.
const sendTimeout = time.Minute

// Config is what the composition root decides for the submission server. The zero value listens on
// DefaultAddr without STARTTLS, so only loopback clients can authenticate.
type Config struct {
	// Addr is the TCP address to listen on; ":0" picks a free port (Listen reports it).
	Addr string
	// TLSConfig enables STARTTLS (RFC 3207) with its certificates; nil offers no TLS.
	TLSConfig *tls.Config
	// Domain is the host name of the greeting and the EHLO reply; empty means the machine's host name.
	Domain string
	// MaxMessageBytes bounds a message (advertised as SIZE, RFC 1870); zero means DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// MaxRecipients bounds envelope recipients per message; zero means DefaultMaxRecipients.
	MaxRecipients int
	// ReadTimeout and WriteTimeout bound each read and write on a connection; zero means the defaults.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
}

// Validate rejects configurations that would make the server refuse everything or fail late.
func (c Config) Validate() error {
	switch {
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("submission: MaxMessageBytes must not be negative (got %d)", c.MaxMessageBytes)
	case c.MaxRecipients < 0:
		return fmt.Errorf("submission: MaxRecipients must not be negative (got %d)", c.MaxRecipients)
	case c.ReadTimeout < 0 || c.WriteTimeout < 0:
		return errors.New("submission: timeouts must not be negative")
	case c.TLSConfig != nil && len(c.TLSConfig.Certificates) == 0 && c.TLSConfig.GetCertificate == nil:
		return errors.New("submission: TLSConfig has no certificate")
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
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}

// Server is the submission listener: go-smtp for the protocol, the core's AuthService and EmailService for
// every decision, smtpd.Server for listening and shutting down.
type Server struct {
	cfg    Config
	core   ports.Core
	logger *slog.Logger
	smtpd  *smtpd.Server
}

// New builds a submission server over the core's Auth and Emails. It fails when cfg is invalid or the core
// lacks them, so a wiring mistake stops the process at start.
func New(cfg Config, core ports.Core, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if core.Auth == nil || core.Emails == nil {
		return nil, errors.New("submission: ports.Core needs Auth and Emails")
	}
	if logger == nil {
		logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:    cfg,
		core:   core,
		logger: logger.With(slog.String("service", "submission")),
	}

	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Addr = cfg.Addr
	srv.Domain = cfg.Domain
	srv.TLSConfig = cfg.TLSConfig
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxRecipients = cfg.MaxRecipients
	srv.ReadTimeout = cfg.ReadTimeout
	srv.WriteTimeout = cfg.WriteTimeout
	// go-smtp would refuse AUTH on every plaintext connection; the session applies the finer rule
	// (TLS or a loopback client) itself and answers 538 otherwise.
	srv.AllowInsecureAuth = true
	srv.ErrorLog = smtpd.ErrorLog{Logger: s.logger}
	s.smtpd = smtpd.New("submission", srv)
	return s, nil
}

// Listen binds Config.Addr and returns the bound address (so ":0" works and the caller can log it).
func (s *Server) Listen() (net.Addr, error) { return s.smtpd.Listen() }

// Serve accepts connections until Shutdown, listening first when Listen was not called. It returns nil
// after Shutdown and the accept error otherwise.
func (s *Server) Serve() error { return s.smtpd.Serve() }

// Shutdown stops accepting, lets transactions in progress finish and waits for clients to leave. When ctx
// ends first it cuts the remaining connections, cancels core calls in flight and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error { return s.smtpd.Shutdown(ctx) }
