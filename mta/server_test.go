package mta_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"maps"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// envelope is one transaction a test server received.
type envelope struct {
	From  string
	Rcpts []string
	Data  []byte
	TLS   bool
	User  string // authenticated user, "" when none
	Helo  string
}

// serverOptions tell a test server how to answer.
type serverOptions struct {
	TLS        *tls.Config                // offer STARTTLS with this configuration
	AuthUser   string                     // require AUTH PLAIN with these credentials
	AuthPass   string                     //
	RcptReply  map[string]*smtp.SMTPError // per recipient address
	DataReply  *smtp.SMTPError            // after DATA; a Code 250 error customizes the success reply
	DataDelay  time.Duration              // hold the reply to DATA this long
	DataGate   chan struct{}              // hold the reply to DATA until closed
	DataSignal chan struct{}              // receives a value when DATA arrives
	MaxRcpts   int                        // answer 452 4.5.3 beyond this many recipients
}

// testServer is a real go-smtp server on a loopback socket that records what it receives and counts
// connections.
type testServer struct {
	Addr string
	opts serverOptions

	mu        sync.Mutex
	envelopes []envelope
	rsets     int // RSET commands received
	accepts   int
	active    int
	maxActive int
	conns     map[*countingConn]bool
}

// startServer starts a test server on ip:port (port 0 for any).
func startServer(tb testing.TB, ip string, port int, opts serverOptions) (*testServer, error) {
	tb.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	ts := &testServer{Addr: l.Addr().String(), opts: opts, conns: map[*countingConn]bool{}}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		s := &serverSession{ts: ts, conn: c}
		if opts.AuthUser != "" {
			return &authSession{serverSession: s}, nil
		}
		return s, nil
	}))
	srv.Domain = "mx.test"
	srv.TLSConfig = opts.TLS
	srv.AllowInsecureAuth = true
	srv.MaxRecipients = opts.MaxRcpts
	srv.MaxRecipients = opts.MaxRcpts
	srv.ErrorLog = log.New(io.Discard, "", 0)
	go func() { _ = srv.Serve(&countingListener{Listener: l, ts: ts}) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return ts, nil
}

// mustServer starts a test server on 127.0.0.1 on any port.
func mustServer(tb testing.TB, opts serverOptions) *testServer {
	tb.Helper()
	ts, err := startServer(tb, "127.0.0.1", 0, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return ts
}

// mustServersOnOnePort starts one test server per loopback address, all on the same port (MX hosts are
// reached on one configured port), and returns the port.
func mustServersOnOnePort(tb testing.TB, ips []string, opts []serverOptions) (int, []*testServer) {
	tb.Helper()
	for range 20 {
		first, err := startServer(tb, ips[0], 0, opts[0])
		if err != nil {
			tb.Fatal(err)
		}
		_, p, _ := net.SplitHostPort(first.Addr)
		port, _ := strconv.Atoi(p)
		servers := []*testServer{first}
		for i := 1; i < len(ips); i++ {
			s, err := startServer(tb, ips[i], port, opts[i])
			if err != nil {
				break
			}
			servers = append(servers, s)
		}
		if len(servers) == len(ips) {
			return port, servers
		}
	}
	tb.Fatal("no common free port on the loopback addresses")
	return 0, nil
}

func (ts *testServer) Port() int {
	_, p, _ := net.SplitHostPort(ts.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

// Envelopes returns the transactions received so far.
func (ts *testServer) Envelopes() []envelope {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]envelope(nil), ts.envelopes...)
}

// Stats returns accepted connections, connections open now and the most open at once.
func (ts *testServer) Stats() (accepts, active, maxActive int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.accepts, ts.active, ts.maxActive
}

type countingListener struct {
	net.Listener
	ts *testServer
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.ts.mu.Lock()
	l.ts.accepts++
	l.ts.active++
	l.ts.maxActive = max(l.ts.maxActive, l.ts.active)
	cc := &countingConn{Conn: c, ts: l.ts}
	l.ts.conns[cc] = true
	l.ts.mu.Unlock()
	return cc, nil
}

// dropAll closes every open connection from the server side.
func (ts *testServer) dropAll() {
	ts.mu.Lock()
	conns := slices.Collect(maps.Keys(ts.conns))
	ts.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

type countingConn struct {
	net.Conn
	ts   *testServer
	once sync.Once
}

// Read counts the RSET commands the client sends (each arrives whole in one read on loopback).
func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if k := bytes.Count(p[:n], []byte("RSET\r\n")); k > 0 {
		c.ts.mu.Lock()
		c.ts.rsets += k
		c.ts.mu.Unlock()
	}
	return n, err
}

// RSETs returns how many RSET commands the server received.
func (ts *testServer) RSETs() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.rsets
}

func (c *countingConn) Close() error {
	c.once.Do(func() {
		c.ts.mu.Lock()
		c.ts.active--
		delete(c.ts.conns, c)
		c.ts.mu.Unlock()
	})
	return c.Conn.Close()
}

type serverSession struct {
	ts   *testServer
	conn *smtp.Conn
	user string
	env  envelope
}

func (s *serverSession) Reset()        { s.env = envelope{} }
func (s *serverSession) Logout() error { return nil }

func (s *serverSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.ts.opts.AuthUser != "" && s.user == "" {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
	}
	s.env = envelope{From: from}
	return nil
}

func (s *serverSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if e := s.ts.opts.RcptReply[to]; e != nil {
		return e
	}
	s.env.Rcpts = append(s.env.Rcpts, to)
	return nil
}

func (s *serverSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if s.ts.opts.DataSignal != nil {
		s.ts.opts.DataSignal <- struct{}{}
	}
	if s.ts.opts.DataGate != nil {
		<-s.ts.opts.DataGate
	}
	time.Sleep(s.ts.opts.DataDelay)
	env := s.env
	env.Data = data
	_, env.TLS = s.conn.TLSConnectionState()
	env.User = s.user
	env.Helo = s.conn.Hostname()
	s.ts.mu.Lock()
	s.ts.envelopes = append(s.ts.envelopes, env)
	s.ts.mu.Unlock()
	if e := s.ts.opts.DataReply; e != nil {
		return e
	}
	return nil
}

// authSession adds AUTH PLAIN.
type authSession struct{ *serverSession }

func (s *authSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *authSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.ts.opts.AuthUser || pass != s.ts.opts.AuthPass {
			return smtp.ErrAuthFailed
		}
		s.user = user
		return nil
	}), nil
}

// selfSigned returns a server certificate for names (DNS names or IPs) and a pool that trusts it.
func selfSigned(tb testing.TB, names ...string) (*tls.Config, *x509.CertPool) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tpl.IPAddresses = append(tpl.IPAddresses, ip)
		} else {
			tpl.DNSNames = append(tpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}, roots
}

func smtpErr(code int, enhanced string, msg string) *smtp.SMTPError {
	var ec smtp.EnhancedCode
	if _, err := fmt.Sscanf(strings.ReplaceAll(enhanced, ".", " "), "%d %d %d", &ec[0], &ec[1], &ec[2]); err != nil {
		panic(err)
	}
	return &smtp.SMTPError{Code: code, EnhancedCode: ec, Message: msg}
}
