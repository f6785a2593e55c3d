// Package smtpd runs the lifecycle of an SMTP listener that a tier has configured with go-smtp: bind (":0"
// included), serve, and a graceful shutdown that still ends on time. Postmill has two such listeners, SMTP
// submission in the edge (RFC 6409) and the MX listener in the inbound tier (RFC 5321); they differ in
// policy — their go-smtp Backend and Session, the replies they map ports codes to, their limits — and in
// nothing else, so that policy stays in each tier and this package holds the rest:
//
//   - Server: Listen, Addr, Serve and Shutdown around a *smtp.Server. go-smtp's Shutdown only waits: once
//     it has started, its Close refuses to run, so a client that never leaves would hold the process for
//     ever. Server remembers every accepted connection and cuts the remaining ones when the shutdown
//     context ends, and its Context tells calls into the core that the server stopped waiting for them.
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
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Server owns the listener and the shutdown of one go-smtp server. Build it with New once the smtp.Server
// is configured; the tier then calls Listen (or not), Serve and Shutdown through it, never the smtp.Server's
// own Serve, ListenAndServe, Shutdown or Close.
type Server struct {
	name string
	smtp *smtp.Server

	// ctx is the parent of every core call a session makes; it ends when Shutdown stops waiting.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	ln       net.Listener
	addr     net.Addr
	closed   bool
	conns    map[*trackedConn]struct{}
	maxConns int // 0: no limit
}

// tooManyConnections is the greeting a client gets beyond the connection limit: RFC 5321 §3.8 lets a server
// answer 421 instead of 220 and close, and the sender tries again later.
const tooManyConnections = "421 4.3.2 Too many connections, try again later\r\n"

// LimitConnections caps the connections served at once (n <= 0: no cap); call it before Serve. A client
// beyond the cap is greeted with 421 and disconnected, so slow or many senders cannot hold unbounded memory
// (each session may buffer a whole message).
func (s *Server) LimitConnections(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxConns = n
}

// New wraps srv, whose Addr says where Listen binds. name prefixes the errors Server returns ("submission",
// "inbound"), so a failed start names the listener that failed.
func New(name string, srv *smtp.Server) *Server {
	s := &Server{name: name, smtp: srv, conns: map[*trackedConn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
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

// Accept implements net.Listener.
func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, srv: l.srv}
		l.srv.mu.Lock()
		full := l.srv.maxConns > 0 && len(l.srv.conns) >= l.srv.maxConns
		if !full {
			l.srv.conns[tc] = struct{}{}
		}
		l.srv.mu.Unlock()
		if !full {
			return tc, nil
		}
		go refuse(c)
	}
}

// refuse answers a connection beyond the limit and closes it, bounded in time so a client that does not read
// cannot hold the goroutine.
func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write([]byte(tooManyConnections))
	_ = c.Close()
}

// trackedConn forgets itself on Close, so the set holds only the connections still open.
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
