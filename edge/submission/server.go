package submission

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

// Defaults of Config, where they differ from adapters/smtpd's.
const (
	// DefaultAddr is the runtime contract's POSTMILL_SUBMISSION_ADDR default.
	DefaultAddr = "127.0.0.1:1587"
	// DefaultMaxMessageBytes fits the send API's largest message: 25 MiB of attachments grow to about
	// 34.3 MiB as base64 MIME parts with their line breaks (RFC 2045 §6.8), plus bodies and headers.
	DefaultMaxMessageBytes int64 = 40 << 20
	// DefaultMaxConnections bounds sessions served at once. A session in DATA holds the decoded message
	// (at most about 25 MiB of attachments plus bodies) while the core takes it.
	DefaultMaxConnections = 64
	// DefaultMaxConnectionsPerIP lets one application server send over several connections in parallel
	// while leaving most slots to other clients.
	DefaultMaxConnectionsPerIP = 16
)

// Defaults is the submission server's defaults, applied by New to every zero field of Config.
var Defaults = smtpd.Config{
	Addr:                DefaultAddr,
	MaxMessageBytes:     DefaultMaxMessageBytes,
	MaxConnections:      DefaultMaxConnections,
	MaxConnectionsPerIP: DefaultMaxConnectionsPerIP,
}

// sendTimeout bounds one call into the core (authentication or a send) so a stalled core cannot hold a
// client for the whole read timeout.
const sendTimeout = time.Minute

// Config is what the composition root decides for the submission server: the listener settings every
// SMTP listener has (adapters/smtpd; its TLSConfig enables STARTTLS), with Defaults for the zero fields,
// and when failed AUTH attempts lock a client out. The zero value listens on DefaultAddr without
// STARTTLS, so only loopback clients can authenticate.
type Config struct {
	smtpd.Config
	AuthLockout LockoutConfig
}

// Validate rejects configurations that would make the server refuse everything or fail late.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return fmt.Errorf("submission: %w", err)
	}
	l := c.AuthLockout
	if l.Lockout < 0 || l.MaxLockout < 0 || l.Memory < 0 {
		return errors.New("submission: AuthLockout durations must not be negative")
	}
	if l.Lockout > 0 && l.MaxLockout > 0 && l.MaxLockout < l.Lockout {
		return errors.New("submission: AuthLockout.MaxLockout must not be shorter than Lockout")
	}
	return nil
}

// Server is the submission listener: go-smtp for the protocol, the core's AuthService and EmailService for
// every decision, smtpd.Server for listening, connection limits and shutting down.
type Server struct {
	cfg     Config
	core    ports.Core
	logger  *slog.Logger
	smtpd   *smtpd.Server
	lockout *lockout
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
	cfg.Config = cfg.Config.WithDefaults(Defaults)
	s := &Server{
		cfg:     cfg,
		core:    core,
		logger:  logger.With(slog.String("service", "submission")),
		lockout: newLockout(cfg.AuthLockout, time.Now),
	}
	var err error
	s.smtpd, err = smtpd.New("submission", cfg.Config, smtp.BackendFunc(s.newSession), s.logger, func(srv *smtp.Server) {
		// go-smtp would refuse AUTH on every plaintext connection; the session applies the finer rule
		// (TLS or a loopback client) itself and answers 538 otherwise.
		srv.AllowInsecureAuth = true
		// RFC 6531: mail clients send UTF-8 header fields (RFC 6532) and may name internationalized
		// mailboxes; the core accepts UTF-8 local parts and the MTA delivers them with SMTPUTF8 where the
		// receiving server offers it. 8BITMIME (RFC 6152) go-smtp always offers.
		srv.EnableSMTPUTF8 = true
	})
	if err != nil {
		return nil, err
	}
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
