package mta_test

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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
	// Pipelining advertises PIPELINING (RFC 2920) and holds every reply until the DATA command, then writes
	// them in one go: a client that waits for a reply before sending the next command of the group waits
	// for ever.
	Pipelining bool
	// MailReply answers MAIL (default "250 ok"); RcptReplies answer a transaction's RCPTs in turn (the last
	// one repeats; default "250 ok"); DataCommandReply answers DATA (default "354 go ahead", after which
	// the content is read).
	MailReply        string
	RcptReplies      []string
	DataCommandReply string
	// ReplyDelay is waited before every write of replies, as a network's round trip would add.
	ReplyDelay time.Duration
	// Chunking advertises CHUNKING (RFC 3030): "BDAT <size> [LAST]" reads size octets and answers
	// BdatReply (default "250 ok"), after the replies held for its group.
	Chunking  bool
	BdatReply string
	// Unsolicited lines are written, in a write of their own 20 ms after the reply that ends a message, by
	// a server that is out of step.
	Unsolicited []string
	// AcceptFirst answers the RCPTs of the server's first transaction (on any connection) "250 ok" whatever
	// RcptReplies says.
	AcceptFirst bool
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
	groups   int
	contents int
	bdats    int
	chunks   [][]byte
}

// rawCounts is what a rawServer saw: connections, MAIL and DATA commands, STARTTLS, groups of held replies
// written at once (Pipelining), message contents received after DATA, and BDAT commands.
type rawCounts struct{ Conns, Mails, Datas, StartTLS, Groups, Contents, Bdats int }

func mustRawServer(tb testing.TB, ip string, opts rawOptions) *rawServer {
	tb.Helper()
	s := &rawServer{opts: opts}
	s.Addr = serveLoopback(tb, ip, func(c net.Conn) {
		s.count(&s.conns)
		s.serve(c)
	})
	return s
}

// serveLoopback accepts connections on a free port of ip (a loopback address) until the test ends and
// hands each to handle on a goroutine of its own, closing it after; the test's cleanup waits for them.
// It returns the listening address.
func serveLoopback(tb testing.TB, ip string, handle func(net.Conn)) string {
	tb.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); handle(c) })
		}
	})
	return l.Addr().String()
}

func (s *rawServer) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

func (s *rawServer) Counts() rawCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rawCounts{s.conns, s.mails, s.datas, s.startTLS, s.groups, s.contents, s.bdats}
}

// Chunks returns the BDAT chunks received, in order.
func (s *rawServer) Chunks() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.chunks...)
}

func (s *rawServer) serve(c net.Conn) {
	r := bufio.NewReaderSize(io.LimitReader(c, 64<<20), 4096)
	var held []string
	say := func(lines ...string) bool {
		time.Sleep(s.opts.ReplyDelay)
		_, err := io.WriteString(c, strings.Join(lines, "\r\n")+"\r\n")
		return err == nil
	}
	// hold keeps a reply for the end of the group when pipelining; otherwise it is said at once.
	hold := func(line string) {
		if s.opts.Pipelining {
			held = append(held, line)
			return
		}
		say(line)
	}
	// endGroup says the replies held for the group, then reply, in one write.
	endGroup := func(reply string) {
		if len(held) > 0 {
			s.count(&s.groups)
			say(append(held, reply)...)
			held = nil
			return
		}
		say(reply)
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	rcpts := 0
	unsolicited := func() {
		if len(s.opts.Unsolicited) > 0 {
			time.Sleep(20 * time.Millisecond)
			say(s.opts.Unsolicited...)
		}
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
			if s.opts.Pipelining {
				lines = append(lines, "250-PIPELINING")
			}
			if s.opts.Chunking {
				lines = append(lines, "250-CHUNKING")
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
			rcpts = 0
			hold(or(s.opts.MailReply, "250 ok"))
		case "RCPT":
			reply := "250 ok"
			if n := len(s.opts.RcptReplies); n > 0 && !(s.opts.AcceptFirst && s.Counts().Contents+s.Counts().Bdats == 0) {
				reply = s.opts.RcptReplies[min(rcpts, n-1)]
			}
			rcpts++
			hold(reply)
		case "RSET", "NOOP":
			say("250 ok")
		case "DATA":
			s.count(&s.datas)
			reply := or(s.opts.DataCommandReply, "354 go ahead")
			endGroup(reply)
			if !strings.HasPrefix(reply, "354") {
				continue
			}
			s.count(&s.contents)
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
			}
			say(or(s.opts.DataReply, "250 ok"))
			unsolicited()
		case "BDAT":
			s.count(&s.bdats)
			fields := strings.Fields(line)
			size, err := strconv.Atoi(fields[min(1, len(fields)-1)])
			if !s.opts.Chunking || err != nil || size < 0 {
				say("501 bad BDAT")
				return
			}
			chunk := make([]byte, size)
			if _, err := io.ReadFull(r, chunk); err != nil {
				return
			}
			s.mu.Lock()
			s.chunks = append(s.chunks, chunk)
			s.mu.Unlock()
			endGroup(or(s.opts.BdatReply, "250 ok"))
			unsolicited()
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
