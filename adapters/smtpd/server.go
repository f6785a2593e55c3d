// Package smtpd runs the lifecycle of an SMTP listener that a tier has configured with go-smtp: bind (":0"
// included), serve, and a graceful shutdown that still ends on time. Postmill has two such listeners, SMTP
// submission in the edge (RFC 6409) and the MX listener in the inbound tier (RFC 5321); they differ in
// policy — their go-smtp Backend and Session, the replies they map ports codes to, their default limits —
// and in nothing else, so that policy stays in each tier and this package holds the rest:
//
//   - Config: the listener settings both share (address, TLS, sizes, connection limits, timeouts), with
//     WithDefaults and Validate. Each tier embeds it in its own Config.
//   - Server: Listen, Addr, Serve and Shutdown around a *smtp.Server built from a Config. go-smtp's
//     Shutdown only waits: once it has started, its Close refuses to run, so a client that never leaves
//     would hold the process for ever. Server remembers every accepted connection and cuts the remaining
//     ones when the shutdown context ends, and its Context tells calls into the core that the server
//     stopped waiting for them. It also enforces MaxConnections and MaxConnectionsPerIP at accept time.
//   - ClientKey: the client address the per-address limits count by (an IPv4 address, an IPv6 /64).
//   - ErrorLog: go-smtp's own complaints (accept failures, broken connections) in the structured log.
//   - Describe and ReplyText: a ports.Error turned into one safe reply line (RFC 5321 §4.2, §4.5.3.1.5).
//
// The package imports ports and go-smtp only (STYLE.md §1).
package smtpd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Server owns the listener and the shutdown of one go-smtp server. Build it with New; the tier then calls
// Listen (or not), Serve and Shutdown through it, never the smtp.Server's own Serve, ListenAndServe,
// Shutdown or Close.
type Server struct {
	name string
	smtp *smtp.Server

	// ctx is the parent of every core call a session makes; it ends when Shutdown stops waiting.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	ln         net.Listener
	addr       net.Addr
	closed     bool
	conns      map[*trackedConn]struct{}
	perClient  map[string]int // open connections by ClientKey
	maxConns   int            // 0: no limit
	maxPerIP   int            // 0: no limit
	refusing   int            // refusals being written right now
	maxRefusal int
}

// Greetings of a client beyond a connection limit: RFC 5321 §3.8 lets a server answer 421 instead of 220
// and close, and the sender tries again later.
const (
	tooManyConnections     = "421 4.3.2 Too many connections, try again later\r\n"
	tooManyFromYourAddress = "421 4.7.0 Too many connections from your address, try again later\r\n"
)

// maxConcurrentRefusals bounds the goroutines writing a 421 at once: in a flood of connections, those
// beyond it are closed without a word rather than each costing a goroutine for up to refusalTimeout.
const (
	maxConcurrentRefusals = 64
	refusalTimeout        = 5 * time.Second
)

// New builds the go-smtp server of cfg around be and the Server that runs it. cfg must be complete (a
// tier's Config.WithDefaults) and valid. name prefixes the errors Server returns ("submission",
// "inbound"), so a failed start names the listener that failed; logger receives go-smtp's own complaints.
// policy lets the tier set the go-smtp options that are its own decision (AUTH rules, SMTPUTF8) before
// anything is served.
func New(name string, cfg Config, be smtp.Backend, logger *slog.Logger, policy ...func(*smtp.Server)) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if be == nil {
		return nil, fmt.Errorf("%s: no SMTP backend", name)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := smtp.NewServer(be)
	srv.Addr = cfg.Addr
	srv.Domain = cfg.Domain
	srv.TLSConfig = cfg.TLSConfig
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxRecipients = cfg.MaxRecipients
	srv.ReadTimeout = cfg.ReadTimeout
	srv.WriteTimeout = cfg.WriteTimeout
	srv.ErrorLog = ErrorLog{Logger: logger}
	for _, p := range policy {
		p(srv)
	}
	s := &Server{
		name: name, smtp: srv,
		conns: map[*trackedConn]struct{}{}, perClient: map[string]int{},
		maxConns: cfg.MaxConnections, maxPerIP: cfg.MaxConnectionsPerIP, maxRefusal: maxConcurrentRefusals,
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// ClientKey is the client a connection is counted against for per-address limits: its IP address, IPv4-
// mapped IPv6 as IPv4, and an IPv6 address by its /64 (one host or site is usually given a whole /64, and
// could otherwise use a fresh address per connection). An address that is not IP (a pipe in tests) counts
// by its string form.
func ClientKey(a net.Addr) string {
	if a == nil {
		return ""
	}
	var ip netip.Addr
	switch t := a.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(t.IP)
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	if !ip.IsValid() {
		return a.String()
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// Context is the parent for the core calls of sessions. It is cancelled when Shutdown returns, so a core
// call still running when connections are cut (or after a graceful end) does not outlive the server.
func (s *Server) Context() context.Context { return s.ctx }

// Listen binds the smtp.Server's Addr and returns the bound address, so ":0" works and the caller can log
// or publish it. It fails after Shutdown (with smtp.ErrServerClosed) and when already listening.
func (s *Server) Listen() (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.canListen(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", s.smtp.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return s.use(ln), nil
}

// Attach makes Serve accept from ln instead of binding the smtp.Server's Addr: a socket the process
// inherited, or an in-memory listener whose peers look remote in a test. Server owns ln from then on and
// closes it on Shutdown. It fails as Listen does.
func (s *Server) Attach(ln net.Listener) (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.canListen(); err != nil {
		return nil, err
	}
	return s.use(ln), nil
}

// canListen runs with s.mu held.
func (s *Server) canListen() error {
	switch {
	case s.closed:
		return smtp.ErrServerClosed
	case s.ln != nil:
		return fmt.Errorf("%s: already listening", s.name)
	}
	return nil
}

// use runs with s.mu held.
func (s *Server) use(ln net.Listener) net.Addr {
	s.ln = &trackingListener{Listener: ln, srv: s}
	s.addr = ln.Addr()
	return s.addr
}

// Addr is the bound address once Listen (or Serve) bound it, nil before: a caller that let Serve listen by
// itself learns the port chosen for ":0" here.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Serve accepts connections until Shutdown, listening first when Listen was not called. It returns nil
// after Shutdown (also when Shutdown came first) and the listen or accept error otherwise, so a manager
// can tell a requested stop from a failure.
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

// Shutdown stops accepting, lets transactions in progress finish and waits for clients to leave (QUIT, or
// the read timeout). When ctx ends first it cuts the remaining connections, cancels Context and returns
// ctx's error: a sender cut off before its DATA reply still holds the message and retries
// (RFC 5321 §4.5.4.1). A second Shutdown returns nil at once.
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

// Accept implements net.Listener: a connection within the limits is tracked and returned; one beyond them
// is answered 421 and closed here, so go-smtp never starts a session for it.
func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc, refusal := l.srv.admit(c); tc != nil {
			return tc, nil
		} else if l.srv.startRefusal() {
			go l.srv.refuse(c, refusal)
		} else {
			_ = c.Close()
		}
	}
}

// admit tracks c when both connection limits leave room, and otherwise says which greeting refuses it.
func (s *Server) admit(c net.Conn) (*trackedConn, string) {
	key := ClientKey(c.RemoteAddr())
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.maxConns > 0 && len(s.conns) >= s.maxConns:
		return nil, tooManyConnections
	case s.maxPerIP > 0 && s.perClient[key] >= s.maxPerIP:
		return nil, tooManyFromYourAddress
	}
	tc := &trackedConn{Conn: c, srv: s, key: key}
	s.conns[tc] = struct{}{}
	s.perClient[key]++
	return tc, ""
}

// startRefusal reserves one of the refusal goroutines, or reports that all are busy.
func (s *Server) startRefusal() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusing >= s.maxRefusal {
		return false
	}
	s.refusing++
	return true
}

// refuse answers a connection beyond a limit and closes it, bounded in time so a client that does not read
// cannot hold the goroutine.
func (s *Server) refuse(c net.Conn, greeting string) {
	defer func() {
		s.mu.Lock()
		s.refusing--
		s.mu.Unlock()
	}()
	_ = c.SetWriteDeadline(time.Now().Add(refusalTimeout))
	_, _ = c.Write([]byte(greeting))
	_ = c.Close()
}

// trackedConn forgets itself on Close, so the sets hold only the connections still open.
type trackedConn struct {
	net.Conn
	srv  *Server
	key  string // ClientKey of the peer
	once sync.Once
	// timedOut is the first read timeout, returned by every read after it (only the connection's own
	// goroutine reads).
	timedOut error
}

// Read implements net.Conn. Once a read has timed out, every later read fails the same way, whatever
// deadline is set since: the session is over. go-smtp sets a fresh deadline before each command and
// otherwise carries on after a timeout: with a command line still unfinished when the deadline passed
// (a client sending a byte a minute) it ran the partial line as a command and waited again, so such a
// client held its slot for ever; and after a DATA transfer that timed out it read what came next as
// commands, so the rest of a stalled message could run as an SMTP transaction of its own (RFC 5321
// §4.1.1.4: the data ends only at CRLF.CRLF). Now the next read after the timeout fails, and go-smtp
// answers 421 4.4.2 and closes the connection.
func (c *trackedConn) Read(p []byte) (int, error) {
	if c.timedOut != nil {
		return 0, c.timedOut
	}
	n, err := c.Conn.Read(p)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.timedOut = err
	}
	return n, err
}

// DataReadFailure is the reply of a DATA (or BDAT) whose message could not be read to its end:
//   - go-smtp's own 552 when the message passed MaxMessageBytes;
//   - a permanent 500 for a line over go-smtp's limit, which retrying cannot change (the connection then
//     closes);
//   - 421 4.4.2 when the client stopped sending until the read timeout passed, and 421 4.4.0 when the
//     connection failed: the sender keeps the message and retries (a 5xx would bounce a message a slow
//     link delayed), and the connection closes (trackedConn).
//
// The reply names no addresses or Go errors.
func DataReadFailure(err error) *smtp.SMTPError {
	if errors.Is(err, smtp.ErrDataTooLarge) {
		return smtp.ErrDataTooLarge
	}
	if errors.Is(err, smtp.ErrTooLongLine) {
		// RFC 5321 §4.5.3.1.6: a line past the limit may be refused, and retrying cannot change it.
		return &smtp.SMTPError{Code: 500, EnhancedCode: smtp.EnhancedCode{5, 5, 6},
			Message: "Line too long in the message data"}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2},
			Message: "Timeout waiting for the message data, closing connection"}
	}
	return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 0},
		Message: "Connection failed while reading the message data"}
}

// Close implements net.Conn.
func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.srv.mu.Lock()
		delete(c.srv.conns, c)
		if c.srv.perClient[c.key]--; c.srv.perClient[c.key] <= 0 {
			delete(c.srv.perClient, c.key)
		}
		c.srv.mu.Unlock()
	})
	return c.Conn.Close()
}

// ErrorLog sends go-smtp's own complaints (accept failures, broken connections) to the structured log at
// warning level; assign it to smtp.Server.ErrorLog, whose default writes unstructured lines to stderr.
type ErrorLog struct {
	// Logger receives the lines; it should already carry the listener's attributes (service name).
	Logger *slog.Logger
}

var _ smtp.Logger = ErrorLog{}

// Printf implements smtp.Logger.
func (e ErrorLog) Printf(format string, v ...any) { e.Logger.Warn(fmt.Sprintf(format, v...)) }

// Println implements smtp.Logger.
func (e ErrorLog) Println(v ...any) { e.Logger.Warn(fmt.Sprint(v...)) }
