package smtpd

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

type nopSession struct{}

func (nopSession) Reset()                               {}
func (nopSession) Logout() error                        { return nil }
func (nopSession) Mail(string, *smtp.MailOptions) error { return nil }
func (nopSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (nopSession) Data(r io.Reader) error               { _, err := io.Copy(io.Discard, r); return err }

func (s *Server) trackedConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) trackedClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.perClient)
}

// TestClosedConnectionsAreForgotten guards against a leak: a long-running listener sees millions of
// connections, and the set Shutdown cuts from must hold only the open ones.
func TestClosedConnectionsAreForgotten(t *testing.T) {
	t.Parallel()
	backend := smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return nopSession{}, nil })
	s, err := New("test", Config{Addr: "127.0.0.1:0"}.WithDefaults(Config{}), backend, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	for i := range 3 {
		conn, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(conn)
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "220 ") {
			t.Fatalf("greeting %q: %v", line, err)
		}
		if n, k := s.trackedConns(), s.trackedClients(); n != 1 || k != 1 {
			t.Errorf("connection %d: %d connections and %d client addresses tracked while one is open", i, n, k)
		}
		if _, err := conn.Write([]byte("QUIT\r\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "221 ") {
			t.Fatalf("QUIT reply %q: %v", line, err)
		}
		conn.Close()
		for deadline := time.Now().Add(10 * time.Second); s.trackedConns() != 0 || s.trackedClients() != 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("connection %d still tracked after QUIT", i)
			}
		}
	}
}

// TestRefusalsAreBounded: in a flood beyond the limit, connections that find every refusal goroutine busy
// are closed without a greeting instead of each costing a goroutine.
func TestRefusalsAreBounded(t *testing.T) {
	t.Parallel()
	backend := smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return nopSession{}, nil })
	s, err := New("test", Config{Addr: "127.0.0.1:0", MaxConnections: 1}.WithDefaults(Config{}), backend, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.maxRefusal = 0
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	held, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if line, err := bufio.NewReader(held).ReadString('\n'); err != nil || !strings.HasPrefix(line, "220 ") {
		t.Fatalf("greeting %q: %v", line, err)
	}
	extra, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(extra); len(b) != 0 || err != nil {
		t.Errorf("a connection beyond every limit read %q (%v), want a silent close", b, err)
	}
}
