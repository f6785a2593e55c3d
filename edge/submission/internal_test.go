package submission

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/ports"
)

// pipeListener hands out in-memory connections whose peer address is not a loopback IP, so the
// "plaintext AUTH only from loopback" rule can be exercised without traffic leaving the machine.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial returns the client end of a new connection.
func (l *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	l.conns <- remoteConn{server}
	return client
}

// remoteConn reports a documentation address (RFC 5737) as its peer.
type remoteConn struct{ net.Conn }

func (remoteConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 40000}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

type authOnlyCore struct{ sent chan ports.SendRequest }

func (authOnlyCore) AuthenticateSMTP(_ context.Context, u, p string) (ports.Principal, error) {
	if u == "user" && p == "pass" {
		return ports.Principal{Kind: ports.PrincipalSMTP, OrganizationID: "org"}, nil
	}
	return ports.Principal{}, ports.Unauthenticated("bad")
}
func (authOnlyCore) AuthenticateAPIKey(context.Context, string) (ports.Principal, error) {
	return ports.Principal{}, ports.Unauthenticated("bad")
}
func (authOnlyCore) AuthenticateSession(context.Context, string) (ports.Principal, error) {
	return ports.Principal{}, ports.Unauthenticated("bad")
}
func (c authOnlyCore) Send(_ context.Context, _ string, r ports.SendRequest) (ports.SendResult, error) {
	c.sent <- r
	return ports.SendResult{ID: "id-1", Status: ports.StatusQueued}, nil
}
func (authOnlyCore) SendBatch(context.Context, string, []ports.SendRequest) ([]ports.BatchItemResult, error) {
	return nil, nil
}
func (authOnlyCore) GetEmail(context.Context, string, string) (ports.Message, error) {
	return ports.Message{}, nil
}
func (authOnlyCore) CancelEmail(context.Context, string, string) (ports.Message, error) {
	return ports.Message{}, nil
}
func (authOnlyCore) ListEmails(context.Context, string, ports.ListEmailsQuery) (ports.EmailPage, error) {
	return ports.EmailPage{}, nil
}

// selfSigned makes a throwaway certificate for STARTTLS.
func selfSigned(tb testing.TB) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "submit.postmill.test"},
		DNSNames: []string{"submit.postmill.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// mustPipeServer serves over a pipeListener: every client looks remote.
func mustPipeServer(tb testing.TB, tlsConfig *tls.Config) (*pipeListener, authOnlyCore) {
	tb.Helper()
	core := authOnlyCore{sent: make(chan ports.SendRequest, 1)}
	s, err := New(Config{Config: smtpd.Config{TLSConfig: tlsConfig, Domain: "submit.postmill.test"}}, ports.Core{Auth: core, Emails: core}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	pl := newPipeListener()
	if _, err := s.smtpd.Attach(pl); err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	})
	return pl, core
}

func TestPlaintextAuthFromRemoteClientsIsRefused(t *testing.T) {
	t.Parallel()
	pl, core := mustPipeServer(t, nil)
	c := smtp.NewClient(pl.dial())
	defer c.Close()
	if err := c.Hello("remote.test"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Extension("AUTH"); ok {
		t.Error("AUTH advertised on a plaintext connection from a remote client")
	}
	err := c.Auth(sasl.NewPlainClient("", "user", "pass"))
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 538 || se.EnhancedCode != (smtp.EnhancedCode{5, 7, 11}) {
		t.Fatalf("plaintext AUTH from a remote client: %v", err)
	}
	if err := c.Mail("a@sender.example", nil); !errors.As(err, &se) || se.Code != 530 {
		t.Errorf("MAIL after a refused AUTH: %v", err)
	}
	select {
	case <-core.sent:
		t.Error("a message reached the core")
	default:
	}
}

func TestStartTLSAllowsAuthFromRemoteClients(t *testing.T) {
	t.Parallel()
	pl, core := mustPipeServer(t, &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})
	// NewClientStartTLS fails unless the server offers STARTTLS.
	c, err := smtp.NewClientStartTLS(pl.dial(), &tls.Config{ServerName: "submit.postmill.test", InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("STARTTLS: %v", err)
	}
	defer c.Close()
	if _, ok := c.TLSConnectionState(); !ok {
		t.Fatal("not on TLS")
	}
	if ok, mechs := c.Extension("AUTH"); !ok || !strings.Contains(mechs, "PLAIN") {
		t.Errorf("AUTH not advertised after STARTTLS: %q", mechs)
	}
	if err := c.Auth(sasl.NewPlainClient("", "user", "pass")); err != nil {
		t.Fatalf("AUTH over TLS: %v", err)
	}
	if state, _ := c.TLSConnectionState(); !state.HandshakeComplete {
		t.Error("AUTH did not run over TLS")
	}
	if err := c.Mail("a@sender.example", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("bob@rcpt.example", nil); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("From: a@sender.example\r\nTo: bob@rcpt.example\r\nSubject: tls\r\n\r\nbody\r\n"))
	resp, err := w.CloseWithResponse()
	if err != nil || resp.StatusText != "2.0.0 Ok: queued as id-1" {
		t.Fatalf("DATA over TLS: %v %v", resp, err)
	}
	if got := <-core.sent; got.Subject != "tls" || got.Text != "body\r\n" && got.Text != "body" {
		t.Errorf("sent %+v", got)
	}
}

func TestReplyForIsTheOneTable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err      error
		st       stage
		code     int
		enhanced smtp.EnhancedCode
		text     string
	}{
		{ports.Unauthenticated("x"), stageAuth, 535, smtp.EnhancedCode{5, 7, 8}, "Authentication credentials invalid"},
		{errors.New("boom"), stageAuth, 454, smtp.EnhancedCode{4, 7, 0}, "Temporary authentication failure"},
		{ports.Errorf(ports.CodeInternal, "secret"), stageData, 451, smtp.EnhancedCode{4, 3, 0}, "Temporary local problem, try again later"},
		{ports.NotFound("gone"), stageData, 550, smtp.EnhancedCode{5, 7, 1}, "gone"},
		{ports.RateLimited(30), stageData, 451, smtp.EnhancedCode{4, 7, 0}, "Rate limit exceeded. Try again later. (retry after 30 seconds)"},
		{ports.Errorf(ports.CodeInvalidArgument, "bad\r\nInjected: yes ✓"), stageData, 550, smtp.EnhancedCode{5, 7, 1}, "bad  Injected: yes ?"},
		{ports.Errorf(ports.CodeInvalidArgument, "%s", strings.Repeat("x", 1000)), stageData, 550, smtp.EnhancedCode{5, 7, 1}, strings.Repeat("x", smtpd.MaxReplyText) + "..."},
	} {
		got := replyFor(c.err, c.st)
		if got.Code != c.code || got.EnhancedCode != c.enhanced || got.Message != c.text {
			t.Errorf("replyFor(%v) = %d %v %q, want %d %v %q", c.err, got.Code, got.EnhancedCode, got.Message, c.code, c.enhanced, c.text)
		}
	}
}
