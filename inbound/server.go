package inbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

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
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}

// Server is the MX listener for mail about mail Postmill sent: go-smtp for the protocol, this package's
// parsers to read bounces and feedback reports, the core's FeedbackService for every decision.
type Server struct {
	cfg      Config
	feedback ports.FeedbackService
	logger   *slog.Logger
	smtp     *smtp.Server

	// ctx is the parent of every core call; it ends when Shutdown stops waiting for clients.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	ln     net.Listener
	addr   net.Addr
	closed bool
	conns  map[*trackedConn]struct{}
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
		conns:    map[*trackedConn]struct{}{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())

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
	srv.ErrorLog = errorLog{s.logger}
	s.smtp = srv
	return s, nil
}

// Listen binds Config.Addr and returns the bound address (so ":0" works and the caller can log it).
func (s *Server) Listen() (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, smtp.ErrServerClosed
	case s.ln != nil:
		return nil, errors.New("inbound: already listening")
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("inbound: %w", err)
	}
	s.ln = &trackingListener{Listener: ln, srv: s}
	s.addr = ln.Addr()
	return s.addr, nil
}

// Addr is the bound address after Listen (or Serve) bound it, nil before.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Serve accepts connections until Shutdown, listening first when Listen was not called. It returns nil
// after Shutdown and the accept error otherwise.
func (s *Server) Serve() error {
	s.mu.Lock()
	ln, closed := s.ln, s.closed
	s.mu.Unlock()
	if closed {
		return nil
	}
	if ln == nil {
		if _, err := s.Listen(); err != nil {
			return err
		}
		s.mu.Lock()
		ln = s.ln
		s.mu.Unlock()
	}
	err := s.smtp.Serve(ln)
	if errors.Is(err, net.ErrClosed) && s.isClosed() {
		return nil
	}
	return err
}

// Shutdown stops accepting, lets transactions in progress finish and waits for clients to leave. When ctx
// ends first it cuts the remaining connections, cancels core calls in flight and returns ctx's error; a
// sender cut off before its DATA reply retries (RFC 5321 §4.5.4.1), and a report applied just before the
// cut is applied again harmlessly (FeedbackService.RecordBounce is idempotent).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		// go-smtp closes the listeners Serve registered; close ours too in case Serve has not run (yet).
		_ = ln.Close()
	}
	err := s.smtp.Shutdown(ctx)
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if ctx.Err() != nil {
		s.cancel()
		s.closeConns()
		return ctx.Err()
	}
	s.cancel()
	return err
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// closeConns cuts every connection still open; go-smtp's goroutines then end on their failed reads.
func (s *Server) closeConns() {
	s.mu.Lock()
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// trackingListener remembers accepted connections so a Shutdown that runs out of time can cut them:
// go-smtp's own Close refuses to run after its Shutdown started.
type trackingListener struct {
	net.Listener
	srv *Server
}

// Accept implements net.Listener.
func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, srv: l.srv}
	l.srv.mu.Lock()
	l.srv.conns[tc] = struct{}{}
	l.srv.mu.Unlock()
	return tc, nil
}

type trackedConn struct {
	net.Conn
	srv  *Server
	once sync.Once
}

// Close implements net.Conn.
func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.srv.mu.Lock()
		delete(c.srv.conns, c)
		c.srv.mu.Unlock()
	})
	return c.Conn.Close()
}

// errorLog sends go-smtp's own complaints (accept failures, broken connections) to the structured log.
type errorLog struct{ l *slog.Logger }

// Printf implements smtp.Logger.
func (e errorLog) Printf(format string, v ...any) { e.l.Warn(fmt.Sprintf(format, v...)) }

// Println implements smtp.Logger.
func (e errorLog) Println(v ...any) { e.l.Warn(fmt.Sprint(v...)) }
