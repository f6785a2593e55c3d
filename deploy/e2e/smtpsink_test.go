package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// sink is a real SMTP server on loopback that stores what it accepts, standing in for recipients' MX hosts.
// Addresses listed in reject get a permanent 550 5.1.1 (user unknown) at RCPT; those in block a 554 5.7.1
// naming a blocklist; those in defer a 451.
type sink struct {
	srv    *smtp.Server
	addr   string
	mu     sync.Mutex
	mails  []sunkMail
	reject map[string]bool
	blocks map[string]bool
	defers map[string]bool
}

type sunkMail struct {
	from string
	to   []string
	data []byte
}

// MustSink starts a sink on host (e.g. 127.0.0.1) at port ("0" for any); all sinks of a test share the
// MTA port, so MX hosts are told apart by their loopback address.
func MustSink(tb testing.TB, host, port string) *sink {
	tb.Helper()
	s := &sink{reject: map[string]bool{}, blocks: map[string]bool{}, defers: map[string]bool{}}
	srv := smtp.NewServer(&sinkBackend{s: s})
	srv.Domain = "sink.test"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.MaxMessageBytes = 64 << 20
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		tb.Fatalf("sink listen: %v", err)
	}
	s.srv = srv
	s.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *sink) port() string {
	_, p, _ := net.SplitHostPort(s.addr)
	return p
}

func (s *sink) setReject(addr string) {
	s.mu.Lock()
	s.reject[strings.ToLower(addr)] = true
	s.mu.Unlock()
}
func (s *sink) setBlock(addr string) {
	s.mu.Lock()
	s.blocks[strings.ToLower(addr)] = true
	s.mu.Unlock()
}
func (s *sink) setDefer(addr string, on bool) {
	s.mu.Lock()
	s.defers[strings.ToLower(addr)] = on
	s.mu.Unlock()
}

// waitFor returns the first mail whose data contains needle, polling until timeout.
func (s *sink) waitFor(tb testing.TB, needle string, timeout time.Duration) sunkMail {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		for _, m := range s.mails {
			if bytes.Contains(m.data, []byte(needle)) {
				s.mu.Unlock()
				return m
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			tb.Fatalf("no mail containing %q arrived", needle)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *sink) count(needle string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.mails {
		if bytes.Contains(m.data, []byte(needle)) {
			n++
		}
	}
	return n
}

type sinkBackend struct{ s *sink }

func (b *sinkBackend) NewSession(*smtp.Conn) (smtp.Session, error) { return &sinkSession{s: b.s}, nil }

type sinkSession struct {
	s    *sink
	from string
	to   []string
}

func (ss *sinkSession) Mail(from string, _ *smtp.MailOptions) error { ss.from = from; return nil }
func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.s.mu.Lock()
	rej, blk, def := ss.s.reject[strings.ToLower(to)], ss.s.blocks[strings.ToLower(to)], ss.s.defers[strings.ToLower(to)]
	ss.s.mu.Unlock()
	if rej {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: fmt.Sprintf("<%s>: Recipient address rejected: User unknown", to)}
	}
	if blk {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Service unavailable; Client host [127.0.0.1] blocked using zen.spamhaus.org"}
	}
	if def {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Try again later"}
	}
	ss.to = append(ss.to, to)
	return nil
}
func (ss *sinkSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.s.mu.Lock()
	ss.s.mails = append(ss.s.mails, sunkMail{from: ss.from, to: ss.to, data: data})
	ss.s.mu.Unlock()
	return nil
}
func (ss *sinkSession) Reset()        { ss.from, ss.to = "", nil }
func (ss *sinkSession) Logout() error { return nil }
