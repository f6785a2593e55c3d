package inbound_test

import (
	"bufio"
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
	"github.com/postmill/postmill/inbound"
)

func TestMessageSizeLimit(t *testing.T) {
	t.Parallel()
	const rcpt = "b-ok4rysuwisrgp327vvs5x4n75o5a12d41bc9@bounce.example.com"
	b := MustStartInbound(t, newFakeFeedback(rcpt), func(c *inbound.Config) { c.MaxMessageBytes = 2048 })
	c := b.dial(t)
	if size, ok := c.MaxMessageSize(); !ok || size != 2048 {
		t.Errorf("SIZE %d %v", size, ok)
	}
	raw := MustReadFixture(t, "postfix-hard-511.eml")
	if len(raw) <= 2048 {
		t.Fatalf("fixture of %d bytes does not exceed the limit", len(raw))
	}
	_, err := send(t, c, "", []string{rcpt}, raw)
	mustSMTPError(t, err, 552, smtp.EnhancedCode{5, 3, 4}, "")
	if bounces, _ := b.fake.snapshot(); len(bounces) != 0 {
		t.Error("an oversized message reached the core")
	}
	// The connection survives for a report that fits.
	small := "From: MAILER-DAEMON@mx.example.org\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=B\r\n\r\n" +
		"--B\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.example.org\r\n\r\n" +
		"Final-Recipient: rfc822; nobody@example.org\r\nAction: failed\r\nStatus: 5.1.1\r\n--B--\r\n"
	if reply, err := send(t, c, "", []string{rcpt}, []byte(small)); err != nil || reply != "2.0.0 Ok: bounce recorded" {
		t.Errorf("a report within the limit: %q %v", reply, err)
	}
}

func TestShutdownDrainsASessionInProgress(t *testing.T) {
	t.Parallel()
	const rcpt = "b-ok4rysuwisrgp327vvs5x4n75o5a12d41bc9@bounce.example.com"
	fake := newFakeFeedback(rcpt)
	fake.entered, fake.release = make(chan struct{}, 1), make(chan struct{})
	srv, err := inbound.New(inbound.Config{Config: smtpd.Config{Addr: "127.0.0.1:0"}}, fake, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != nil {
		t.Error("Addr before Listen")
	}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr() == nil || srv.Addr().String() != addr.String() {
		t.Errorf("Addr() = %v, Listen said %v", srv.Addr(), addr)
	}
	if _, err := srv.Listen(); err == nil {
		t.Error("a second Listen succeeded")
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()

	c, err := smtp.Dial(addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("mta.sender.test"); err != nil {
		t.Fatal(err)
	}
	raw := MustReadFixture(t, "postfix-hard-511.eml")
	replied := make(chan error, 1)
	go func() {
		_, err := send(t, c, "", []string{rcpt}, raw)
		replied <- err
	}()
	<-fake.entered // the core call of DATA is in progress

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- srv.Shutdown(ctx)
	}()
	// New connections are refused once Shutdown started; poll until the listener is closed.
	for deadline := time.Now().Add(10 * time.Second); ; {
		conn, err := net.DialTimeout("tcp", addr.String(), time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting after Shutdown")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned with a transaction in progress: %v", err)
	default:
	}

	close(fake.release)
	if err := <-replied; err != nil {
		t.Fatalf("the transaction in progress was not completed: %v", err)
	}
	if bounces, _ := fake.snapshot(); len(bounces) != 1 {
		t.Fatalf("%d bounces recorded", len(bounces))
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned while the client was still connected: %v", err)
	default:
	}
	if err := c.Quit(); err != nil {
		t.Errorf("QUIT: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
}

func TestShutdownCutsIdleClientsAtTheDeadline(t *testing.T) {
	t.Parallel()
	srv, err := inbound.New(inbound.Config{Config: smtpd.Config{Addr: "127.0.0.1:0"}}, newFakeFeedback(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }() // Serve listens by itself when Listen was not called
	var addr net.Addr
	for deadline := time.Now().Add(10 * time.Second); addr == nil; time.Sleep(5 * time.Millisecond) {
		if addr = srv.Addr(); addr == nil && time.Now().After(deadline) {
			t.Fatal("Serve did not listen")
		}
	}
	conn, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if line, _ := r.ReadString('\n'); !strings.HasPrefix(line, "220 ") {
		t.Fatalf("greeting %q", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with an idle client: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ne net.Error
	if _, err := io.ReadAll(r); errors.As(err, &ne) && ne.Timeout() {
		t.Error("the idle connection survived the shutdown deadline")
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Errorf("a second Shutdown: %v", err)
	}
}

func TestNewRejectsBadWiring(t *testing.T) {
	t.Parallel()
	if _, err := inbound.New(inbound.Config{}, nil, nil); err == nil {
		t.Error("New accepted a nil FeedbackService")
	}
	for _, cfg := range []smtpd.Config{{MaxMessageBytes: -1}, {MaxRecipients: -1}, {ReadTimeout: -time.Second},
		{MaxConnections: -1}, {MaxConnectionsPerIP: -1}, {MaxConnections: 2, MaxConnectionsPerIP: 3}} {
		if _, err := inbound.New(inbound.Config{Config: cfg}, newFakeFeedback(), nil); err == nil || !strings.HasPrefix(err.Error(), "inbound: ") {
			t.Errorf("New accepted %+v (%v)", cfg, err)
		}
	}
	if err := (inbound.Config{}).Validate(); err != nil {
		t.Errorf("the zero Config is valid: %v", err)
	}
}

// TestOneHostCannotHoldEverySlot: the MX listener serves at most MaxConnectionsPerIP sessions of one client
// address; the next one from that address is greeted with 421 (RFC 5321 §3.8, the sender retries) while a
// sender from another address is still served.
func TestOneHostCannotHoldEverySlot(t *testing.T) {
	t.Parallel()
	b := MustStartInbound(t, newFakeFeedback(), func(c *inbound.Config) { c.MaxConnections = 6; c.MaxConnectionsPerIP = 2 })
	for range 2 {
		greet(t, b.addr, nil, "220 ")
	}
	greet(t, b.addr, nil, "421 4.7.0 ")
	other := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}
	if ln, err := net.ListenTCP("tcp", other); err != nil {
		t.Skipf("127.0.0.3 is not usable here: %v", err)
	} else {
		ln.Close()
	}
	greet(t, b.addr, other, "220 ")
}

// TestIdleClientsAreDisconnected: a client that stops sending commands is told 421 and disconnected after
// ReadTimeout, so its slot returns to the pool.
func TestIdleClientsAreDisconnected(t *testing.T) {
	t.Parallel()
	b := MustStartInbound(t, newFakeFeedback(), func(c *inbound.Config) { c.ReadTimeout = 300 * time.Millisecond })
	conn, r := greet(t, b.addr, nil, "220 ")
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "421 4.4.2") {
		t.Fatalf("idle client got %q (%v), want 421 4.4.2", line, err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("disconnected after %v", waited)
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("the connection stayed open after the idle timeout")
	}
}

func TestDefaultsKeepSlotsForManySenders(t *testing.T) {
	t.Parallel()
	d := inbound.Defaults
	if d.MaxConnectionsPerIP <= 0 || d.MaxConnectionsPerIP*4 > d.MaxConnections {
		t.Errorf("one address may hold %d of %d slots", d.MaxConnectionsPerIP, d.MaxConnections)
	}
	if d.ReadTimeout <= 0 || d.ReadTimeout > smtpd.DefaultReadTimeout/2 {
		t.Errorf("MX read timeout %v is not shorter than the generic %v", d.ReadTimeout, smtpd.DefaultReadTimeout)
	}
}

// greet dials addr from local (nil: any) and expects a greeting starting with prefix.
func greet(tb testing.TB, addr string, local *net.TCPAddr, prefix string) (net.Conn, *bufio.Reader) {
	tb.Helper()
	d := net.Dialer{}
	if local != nil {
		d.LocalAddr = local
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, prefix) {
		tb.Fatalf("greeting %q (%v), want %q", line, err, prefix)
	}
	return conn, r
}
