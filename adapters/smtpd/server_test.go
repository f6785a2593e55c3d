package smtpd_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
)

// blockingBackend stands in for a tier's policy: its DATA makes a "core call" that waits until the test
// releases it or the server's Context ends, and reports which of the two ended it.
type blockingBackend struct {
	srv     *smtpd.Server
	entered chan struct{} // one value per DATA that started its core call
	release chan struct{} // closed by the test to let core calls finish
	ended   chan error    // nil when released, the context's error when cancelled
}

func (b *blockingBackend) NewSession(*smtp.Conn) (smtp.Session, error) {
	return &blockingSession{b}, nil
}

type blockingSession struct{ b *blockingBackend }

func (*blockingSession) Reset()                               {}
func (*blockingSession) Logout() error                        { return nil }
func (*blockingSession) Mail(string, *smtp.MailOptions) error { return nil }
func (*blockingSession) Rcpt(string, *smtp.RcptOptions) error { return nil }

func (s *blockingSession) Data(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return smtpd.DataReadFailure(err) // as the tiers' sessions answer
	}
	s.b.entered <- struct{}{}
	select {
	case <-s.b.release:
		s.b.ended <- nil
		return nil
	case <-s.b.srv.Context().Done():
		s.b.ended <- s.b.srv.Context().Err()
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "cancelled"}
	}
}

// testBundle is an smtpd.Server over a blockingBackend, not yet listening.
type testBundle struct {
	srv     *smtpd.Server
	backend *blockingBackend
}

// MustNewServer builds a server for addr named "test". Its cleanup shuts it down, so a failing test does
// not leave a listener behind.
func MustNewServer(tb testing.TB, addr string) *testBundle {
	tb.Helper()
	return MustNewServerWith(tb, smtpd.Config{Addr: addr})
}

// MustNewServerWith is MustNewServer for a Config of the test's own (its zero fields take the defaults).
func MustNewServerWith(tb testing.TB, cfg smtpd.Config) *testBundle {
	tb.Helper()
	b := &blockingBackend{entered: make(chan struct{}, 1), release: make(chan struct{}), ended: make(chan error, 1)}
	if cfg.Domain == "" {
		cfg.Domain = "mx.postmill.test"
	}
	srv, err := smtpd.New("test", cfg.WithDefaults(smtpd.Config{}), b, slog.New(slog.DiscardHandler),
		func(s *smtp.Server) { s.AllowInsecureAuth = true })
	if err != nil {
		tb.Fatal(err)
	}
	b.srv = srv
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.srv.Shutdown(ctx)
	})
	return &testBundle{srv: b.srv, backend: b}
}

// MustServe listens on 127.0.0.1:0 and serves in the background; the channel yields Serve's result.
func (tb *testBundle) MustServe(t testing.TB) (net.Addr, <-chan error) {
	t.Helper()
	addr, err := tb.srv.Listen()
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	return addr, tb.serve()
}

// serve runs Serve in the background; the channel yields its result.
func (tb *testBundle) serve() <-chan error {
	served := make(chan error, 1)
	go func() { served <- tb.srv.Serve() }()
	return served
}

// mustGreetThenStop proves the server on addr answers, then that a Shutdown with no client left returns
// nil at once and makes Serve return nil.
func (tb *testBundle) mustGreetThenStop(t testing.TB, addr net.Addr, served <-chan error) {
	t.Helper()
	conn, _ := MustGreet(t, addr)
	conn.Close() // a graceful Shutdown without a deadline waits for every client to leave
	if err := tb.srv.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := mustReceive(t, served, "return from Serve"); err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
}

// MustGreet dials addr and reads the 220 greeting line (RFC 5321 §4.2), so the connection is known to be
// accepted and tracked by the server.
func MustGreet(tb testing.TB, addr net.Addr) (net.Conn, *bufio.Reader) {
	tb.Helper()
	conn, err := net.Dial("tcp", addr.String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "220 mx.postmill.test") {
		tb.Fatalf("greeting %q: %v", line, err)
	}
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		tb.Fatal(err)
	}
	return conn, r
}

// mustRefuseConnections polls until nothing accepts on addr any more.
func mustRefuseConnections(tb testing.TB, addr net.Addr) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		conn, err := net.DialTimeout("tcp", addr.String(), time.Second)
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			tb.Fatal("still accepting after Shutdown")
		}
	}
}

// mustReceive waits for ch, failing the test instead of hanging it when the value never comes.
func mustReceive[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		tb.Fatalf("no %s after 30 seconds", what)
		panic("unreachable")
	}
}

func TestListenBindsPortZeroAndReportsIt(t *testing.T) {
	t.Parallel()
	b := MustNewServer(t, "127.0.0.1:0")
	if b.srv.Addr() != nil {
		t.Errorf("Addr before Listen = %v", b.srv.Addr())
	}
	addr, served := b.MustServe(t)
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.Port == 0 || !tcp.IP.IsLoopback() {
		t.Fatalf("Listen returned %v", addr)
	}
	if got := b.srv.Addr(); got == nil || got.String() != addr.String() {
		t.Errorf("Addr() = %v, Listen said %v", got, addr)
	}
	if _, err := b.srv.Listen(); err == nil || !strings.HasPrefix(err.Error(), "test: ") {
		t.Errorf("a second Listen: %v", err)
	}
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := b.srv.Attach(other); err == nil {
		t.Error("Attach succeeded while listening")
	}
	b.mustGreetThenStop(t, addr, served)
}

func TestServeListensByItself(t *testing.T) {
	t.Parallel()
	b := MustNewServer(t, "127.0.0.1:0")
	served := b.serve()
	var addr net.Addr
	for deadline := time.Now().Add(10 * time.Second); addr == nil; time.Sleep(5 * time.Millisecond) {
		if addr = b.srv.Addr(); addr == nil && time.Now().After(deadline) {
			t.Fatal("Serve did not listen")
		}
	}
	b.mustGreetThenStop(t, addr, served)
}

func TestListenFailureNamesTheServer(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	b := MustNewServer(t, taken.Addr().String())
	if _, err := b.srv.Listen(); err == nil || !strings.HasPrefix(err.Error(), "test: ") {
		t.Errorf("Listen on a taken port: %v", err)
	}
	// Serve reports the same failure instead of nil: nothing asked it to stop.
	if err := b.srv.Serve(); err == nil || !strings.HasPrefix(err.Error(), "test: ") {
		t.Errorf("Serve on a taken port: %v", err)
	}
	if b.srv.Addr() != nil {
		t.Errorf("Addr after a failed Listen = %v", b.srv.Addr())
	}
}

func TestAttachServesOnTheCallersListener(t *testing.T) {
	t.Parallel()
	b := MustNewServer(t, "192.0.2.1:25") // never bound: Attach replaces Listen
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := b.srv.Attach(ln)
	if err != nil {
		t.Fatal(err)
	}
	if addr.String() != ln.Addr().String() || b.srv.Addr().String() != ln.Addr().String() {
		t.Errorf("Attach returned %v, Addr() %v, listener %v", addr, b.srv.Addr(), ln.Addr())
	}
	if _, err := b.srv.Listen(); err == nil {
		t.Error("Listen succeeded after Attach")
	}
	served := b.serve()
	b.mustGreetThenStop(t, addr, served)
	mustRefuseConnections(t, addr) // Shutdown closed the attached listener
}

func TestShutdownWaitsForASessionInProgress(t *testing.T) {
	t.Parallel()
	b := MustNewServer(t, "127.0.0.1:0")
	addr, served := b.MustServe(t)
	c, err := smtp.Dial(addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.postmill.test"); err != nil {
		t.Fatal(err)
	}
	replied := make(chan error, 1)
	go func() {
		replied <- c.SendMail("a@sender.test", []string{"b@rcpt.test"}, strings.NewReader("Subject: x\r\n\r\nbody\r\n"))
	}()
	mustReceive(t, b.backend.entered, "core call") // DATA's core call is in progress

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- b.srv.Shutdown(ctx)
	}()
	mustRefuseConnections(t, addr)
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned with a transaction in progress: %v", err)
	default:
	}
	if err := b.srv.Context().Err(); err != nil {
		t.Fatalf("Context ended while Shutdown still waits for clients: %v", err)
	}

	close(b.backend.release)
	if err := mustReceive(t, b.backend.ended, "end of the core call"); err != nil {
		t.Errorf("the core call was cancelled: %v", err)
	}
	if err := mustReceive(t, replied, "DATA reply"); err != nil {
		t.Fatalf("the transaction in progress was not completed: %v", err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned while the client was still connected: %v", err)
	default:
	}
	if err := c.Quit(); err != nil {
		t.Errorf("QUIT: %v", err)
	}
	if err := mustReceive(t, stopped, "return from Shutdown"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := mustReceive(t, served, "return from Serve"); err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	if !errors.Is(b.srv.Context().Err(), context.Canceled) {
		t.Errorf("Context after Shutdown: %v", b.srv.Context().Err())
	}
}

func TestShutdownCutsConnectionsAndCancelsCoreCallsWhenCtxEnds(t *testing.T) {
	t.Parallel()
	b := MustNewServer(t, "127.0.0.1:0")
	addr, served := b.MustServe(t)

	// One client idles after the greeting; another waits on a core call that never finishes by itself.
	idle, idleReader := MustGreet(t, addr)
	busy, err := smtp.Dial(addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	replied := make(chan error, 1)
	go func() {
		replied <- busy.SendMail("a@sender.test", []string{"b@rcpt.test"}, strings.NewReader("Subject: x\r\n\r\nbody\r\n"))
	}()
	mustReceive(t, b.backend.entered, "core call")

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := b.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with clients left: %v", err)
	}
	if err := mustReceive(t, b.backend.ended, "end of the core call"); !errors.Is(err, context.Canceled) {
		t.Errorf("the core call in flight ended with %v, want the server's Context cancelled", err)
	}
	if err := mustReceive(t, served, "return from Serve"); err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	// The idle connection is closed by the server: the read ends (EOF or reset), it does not time out.
	if err := idle.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := io.ReadAll(idleReader); errors.As(err, &ne) && ne.Timeout() {
		t.Error("the idle connection survived the shutdown deadline")
	}
	// The busy client gets no 250 for a transaction whose connection was cut, so its sender retries.
	if err := mustReceive(t, replied, "DATA reply"); err == nil {
		t.Error("the cut transaction was reported as accepted")
	}
	mustRefuseConnections(t, addr)
	if err := b.srv.Shutdown(context.Background()); err != nil {
		t.Errorf("a second Shutdown: %v", err)
	}
}

func TestShutdownBeforeServe(t *testing.T) {
	t.Parallel()
	t.Run("listening", func(t *testing.T) {
		t.Parallel()
		b := MustNewServer(t, "127.0.0.1:0")
		addr, err := b.srv.Listen()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.srv.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := b.srv.Serve(); err != nil {
			t.Errorf("Serve after Shutdown: %v", err)
		}
		mustRefuseConnections(t, addr)
	})
	t.Run("never listened", func(t *testing.T) {
		t.Parallel()
		b := MustNewServer(t, "127.0.0.1:0")
		if err := b.srv.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := b.srv.Serve(); err != nil {
			t.Errorf("Serve after Shutdown: %v", err)
		}
		if b.srv.Addr() != nil {
			t.Errorf("Serve after Shutdown listened on %v", b.srv.Addr())
		}
		if _, err := b.srv.Listen(); !errors.Is(err, smtp.ErrServerClosed) {
			t.Errorf("Listen after Shutdown: %v", err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if _, err := b.srv.Attach(ln); !errors.Is(err, smtp.ErrServerClosed) {
			t.Errorf("Attach after Shutdown: %v", err)
		}
		if !errors.Is(b.srv.Context().Err(), context.Canceled) {
			t.Errorf("Context after Shutdown: %v", b.srv.Context().Err())
		}
	})
}

func TestErrorLogWritesWarnings(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := smtpd.ErrorLog{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	log.Printf("accept error: %s; retrying in %s", "too many open files", "5ms")
	log.Println("broken pipe from ", 42)
	got := buf.String()
	for _, want := range []string{
		`level=WARN msg="accept error: too many open files; retrying in 5ms"`,
		`level=WARN msg="broken pipe from 42"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
}

// TestLimitConnections: beyond the cap a client is greeted with 421 and disconnected; once a connection
// leaves, the next client is served again.
func TestLimitConnections(t *testing.T) {
	t.Parallel()
	b := MustNewServerWith(t, smtpd.Config{Addr: "127.0.0.1:0", MaxConnections: 2})
	addr, _ := b.MustServe(t)
	first, _ := MustGreet(t, addr)
	MustGreet(t, addr)

	mustBeRefused(t, addr, nil, "421 4.3.2 ")
	// The limit is the server's, not an address's: another client address is refused as well.
	mustBeRefused(t, addr, otherLoopback(t), "421 4.3.2 ")

	first.Close()
	mustBeServedAgain(t, addr, nil)
}

// TestLimitConnectionsPerIP: one client address holds at most MaxConnectionsPerIP sessions; the next one
// from that address is greeted with 421 while another address is still served, and the address gets its
// slot back when one of its connections ends.
func TestLimitConnectionsPerIP(t *testing.T) {
	t.Parallel()
	b := MustNewServerWith(t, smtpd.Config{Addr: "127.0.0.1:0", MaxConnections: 10, MaxConnectionsPerIP: 3})
	addr, _ := b.MustServe(t)
	var held []net.Conn
	for range 3 {
		c, _ := MustGreet(t, addr)
		held = append(held, c)
	}
	mustBeRefused(t, addr, nil, "421 4.7.0 Too many connections from your address")
	other := otherLoopback(t)
	c, err := (&net.Dialer{LocalAddr: other}).Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "220 ") {
		t.Fatalf("a client from %v while 127.0.0.1 is at its limit: %q %v", other, line, err)
	}
	held[0].Close()
	mustBeServedAgain(t, addr, nil)
}

// otherLoopback is a second loopback client address (Linux routes all of 127.0.0.0/8 to lo); the test is
// skipped where it cannot be bound.
func otherLoopback(t *testing.T) *net.TCPAddr {
	t.Helper()
	a := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	ln, err := net.ListenTCP("tcp", a)
	if err != nil {
		t.Skipf("127.0.0.2 is not usable here: %v", err)
	}
	ln.Close()
	return a
}

// mustBeRefused dials addr from local (nil: any) and expects a greeting starting with prefix, then the
// connection closed by the server.
func mustBeRefused(t *testing.T, addr net.Addr, local *net.TCPAddr, prefix string) {
	t.Helper()
	d := net.Dialer{}
	if local != nil {
		d.LocalAddr = local
	}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, prefix) {
		t.Fatalf("greeted %q (%v), want %q", line, err, prefix)
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("the refused connection stayed open")
	}
}

// mustBeServedAgain polls until a client from local (nil: any) is greeted with 220.
func mustBeServedAgain(t *testing.T, addr net.Addr, local *net.TCPAddr) {
	t.Helper()
	d := net.Dialer{}
	if local != nil {
		d.LocalAddr = local
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		conn, err := d.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if strings.HasPrefix(line, "220 ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room after a client left: %q", line)
		}
	}
}

func TestClientKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 25}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 25}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1"), Port: 25}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:bbbb::9"), Port: 25}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:3::1"), Port: 25, Zone: "eth0"}, "2001:db8:1:3::/64"},
		{&net.UDPAddr{IP: net.ParseIP("198.51.100.1"), Port: 1}, "198.51.100.1"},
		{pipeAddr{}, "pipe"},
		{nil, ""},
	} {
		if got := smtpd.ClientKey(c.addr); got != c.want {
			t.Errorf("ClientKey(%v) = %q, want %q", c.addr, got, c.want)
		}
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
