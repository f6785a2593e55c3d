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

// Defaults of Config, where they differ from adapters/smtpd's.
const (
	// DefaultAddr is the runtime contract's POSTMILL_SMTP_ADDR default.
	DefaultAddr = "127.0.0.1:2525"
	// DefaultMaxMessageBytes leaves room for what reports carry back: a bounce or feedback report may return
	// the whole original (RFC 3462 §2, RFC 5965 §2). Common MTAs cap the returned copy well below this
	// (Postfix's bounce_size_limit, Exim's bounce_return_size_limit), feedback loops often do not; the
	// bound keeps one hostile sender from making the listener hold an unbounded message in memory.
	DefaultMaxMessageBytes int64 = 10 << 20
	// DefaultMaxConnections bounds sessions served at once: with DefaultMaxMessageBytes each, 64 sessions
	// hold at most 640 MiB of message data. Senders beyond it get 421 and retry (RFC 5321 §3.8).
	DefaultMaxConnections = 64
	// DefaultMaxConnectionsPerIP keeps one sending host (or IPv6 /64) from holding more than an eighth of
	// the slots. Reports arrive a few at a time; a big sender uses many addresses.
	DefaultMaxConnectionsPerIP = 8
	// DefaultReadTimeout is shorter than RFC 5321 §4.5.3.2.7's five minutes: MTAs that send reports write
	// each command at once, and a slot held idle for five minutes is a slot a hostile host takes from them
	// (Postfix's own smtpd uses 10 seconds under load). It also bounds a whole DATA transfer: 10 MiB in a
	// minute needs 175 KB/s.
	DefaultReadTimeout = time.Minute
	// DefaultWriteTimeout bounds writing one reply to a client that stopped reading.
	DefaultWriteTimeout = 30 * time.Second
)

// Defaults is the MX listener's defaults, applied by New to every zero field of Config.
var Defaults = smtpd.Config{
	Addr:                DefaultAddr,
	MaxMessageBytes:     DefaultMaxMessageBytes,
	MaxConnections:      DefaultMaxConnections,
	MaxConnectionsPerIP: DefaultMaxConnectionsPerIP,
	ReadTimeout:         DefaultReadTimeout,
	WriteTimeout:        DefaultWriteTimeout,
}

// coreTimeout bounds one call into the core so a stalled core cannot hold a sending MTA for the whole
// read timeout; the sender then gets 451 and retries later.
const coreTimeout = time.Minute

// Config is what the composition root decides for the MX listener: the listener settings every SMTP
// listener has (adapters/smtpd), with Defaults for the zero fields. TLSConfig, when set, offers STARTTLS.
type Config struct {
	smtpd.Config
	// Receiving, when set, takes mail for customers' inbound domains: RCPT is accepted for a verified,
	// unsuspended inbound domain and the message is handed over once DATA ends. Nil accepts only bounces
	// and feedback reports.
	Receiving ports.ReceiveService
	// DMARCAddress is the DMARC aggregate report mailbox (POSTMILL_DMARC_RUA); mail to it goes to DMARC.
	// Empty, or a nil DMARC, refuses it like any unknown address.
	DMARCAddress string
	DMARC        ports.DMARCService
}

// Validate rejects configurations that would make the server refuse everything or fail late.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return fmt.Errorf("inbound: %w", err)
	}
	return nil
}

// Server is the MX listener for mail about mail Postmill sent: go-smtp for the protocol, this package's
// parsers to read bounces and feedback reports, the core's FeedbackService for every decision,
// smtpd.Server for listening and shutting down.
type Server struct {
	cfg      Config
	feedback ports.FeedbackService
	receive  ports.ReceiveService
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
	cfg.Config = cfg.Config.WithDefaults(Defaults)
	s := &Server{
		cfg:      cfg,
		feedback: feedback,
		receive:  cfg.Receiving,
		logger:   logger.With(slog.String("service", "inbound")),
	}
	var err error
	s.smtpd, err = smtpd.New("inbound", cfg.Config, smtp.BackendFunc(s.newSession), s.logger, func(srv *smtp.Server) {
		// RFC 6533 §3: a DSN about an internationalized message is itself sent with SMTPUTF8; refusing the
		// extension would turn such bounces into downgraded or lost ones. The addresses Postmill accepts
		// mail for are ASCII, so nothing else changes.
		srv.EnableSMTPUTF8 = true
	})
	if err != nil {
		return nil, err
	}
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
