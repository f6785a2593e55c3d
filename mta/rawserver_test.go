package mta_test

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// rawOptions tell a rawServer how to misbehave.
type rawOptions struct {
	// DataReply is written, as is, after the message's final dot (CRLF appended); default "250 ok".
	DataReply string
	// StartTLS advertises STARTTLS. With StartTLSReply "" the server then answers 220 and, instead of a
	// TLS handshake, writes plain text and hangs up: a handshake that fails on the server's side.
	// Otherwise it answers StartTLSReply and carries on in plaintext.
	StartTLS      bool
	StartTLSReply string
}

// rawServer is a tiny SMTP server on a loopback socket written byte by byte, for replies a real server
// library would never send (NUL and other control bytes, a broken STARTTLS). It counts what it sees.
type rawServer struct {
	Addr string
	opts rawOptions

	mu       sync.Mutex
	conns    int
	mails    int
	datas    int
	startTLS int
}

// rawCounts is what a rawServer saw.
type rawCounts struct{ Conns, Mails, Datas, StartTLS int }

func mustRawServer(tb testing.TB, ip string, opts rawOptions) *rawServer {
	tb.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		tb.Fatal(err)
	}
	s := &rawServer{Addr: l.Addr().String(), opts: opts}
	var wg sync.WaitGroup
	tb.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
			wg.Go(func() { defer c.Close(); s.serve(c) })
		}
	})
	return s
}

func (s *rawServer) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

func (s *rawServer) Counts() rawCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rawCounts{s.conns, s.mails, s.datas, s.startTLS}
}

func (s *rawServer) serve(c net.Conn) {
	r := bufio.NewReaderSize(io.LimitReader(c, 64<<20), 4096)
	say := func(lines ...string) bool {
		_, err := io.WriteString(c, strings.Join(lines, "\r\n")+"\r\n")
		return err == nil
	}
	if !say("220 raw.test ESMTP") {
		return
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		verb := strings.ToUpper(strings.TrimSpace(line))
		if i := strings.IndexAny(verb, " :"); i >= 0 {
			verb = verb[:i]
		}
		switch verb {
		case "EHLO", "HELO":
			lines := []string{"250-raw.test"}
			if s.opts.StartTLS {
				lines = append(lines, "250-STARTTLS")
			}
			say(append(lines, "250 8BITMIME")...)
		case "STARTTLS":
			s.count(&s.startTLS)
			if s.opts.StartTLSReply != "" {
				say(s.opts.StartTLSReply)
				continue
			}
			say("220 go ahead", "this is not a TLS handshake")
			return
		case "MAIL":
			s.count(&s.mails)
			say("250 ok")
		case "RCPT", "RSET", "NOOP":
			say("250 ok")
		case "DATA":
			s.count(&s.datas)
			say("354 go ahead")
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
			}
			reply := s.opts.DataReply
			if reply == "" {
				reply = "250 ok"
			}
			say(reply)
		case "QUIT":
			say("221 bye")
			return
		default:
			say("502 unknown command")
		}
	}
}

func (s *rawServer) count(n *int) {
	s.mu.Lock()
	*n++
	s.mu.Unlock()
}
