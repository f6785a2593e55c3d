package mta

import (
	"bytes"
	"crypto/tls"
	"net"
	"syscall"
)

// replyConn is the plaintext side of a session to a receiving server (the TCP connection, or the TLS
// connection over it) as the session's reply readers see it: go-smtp's client and the MTA's own.
//
//   - A reply line that is its code alone ("250" CRLF) gets the space textproto wants after the code.
//     RFC 5321 §4.2 makes the text optional ("Reply-code [ SP textstring ] CRLF") and tells the client to
//     act on the code, but net/textproto refuses such a line as a "short response", which turned a
//     server's bare 250 after the content into a broken connection, and the message was sent again on
//     every retry.
//   - Each Read hands on at most one line, so the readers above never buffer past the reply they read.
//     What a server sends that nobody asked for stays here, where pending sees it, instead of in a reader
//     whose next reply it would become (see inputWaiting).
type replyConn struct {
	net.Conn
	in      []byte // read from Conn, not yet handed on: a window of inBack
	out     []byte // the line being handed on: a window of outBack
	inBack  []byte
	outBack []byte
}

// lineChunk bounds what replyConn holds of a line without its end before handing it on in pieces (the
// reply readers bound a line themselves, and replyLimitConn what a server may send between writes).
const lineChunk = 4096

func newReplyConn(c net.Conn) *replyConn { return &replyConn{Conn: c} }

func (c *replyConn) Read(p []byte) (int, error) {
	if len(c.out) == 0 {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// fill makes the next line (or piece of a long one) the one handed on, reading when no whole line is
// held. A read error is returned only when nothing is held: what came before it is handed on first.
func (c *replyConn) fill() error {
	for {
		if i := bytes.IndexByte(c.in, '\n'); i >= 0 {
			c.take(i + 1)
			return nil
		}
		if len(c.in) >= lineChunk {
			c.take(len(c.in))
			return nil
		}
		if c.inBack == nil {
			c.inBack, c.outBack = make([]byte, 0, 2*lineChunk), make([]byte, 0, lineChunk+1)
		}
		if cap(c.in)-len(c.in) < lineChunk { // move what is held to the front: a read's worth of room
			c.in = append(c.inBack[:0], c.in...)
		}
		n, err := c.Conn.Read(c.in[len(c.in):cap(c.in)])
		c.in = c.in[:len(c.in)+n]
		if err != nil && n == 0 {
			if len(c.in) > 0 {
				c.take(len(c.in))
				return nil
			}
			return err
		}
	}
}

// take hands on the first k bytes of in, with a bare reply code given its space.
func (c *replyConn) take(k int) {
	line := c.in[:k]
	c.out = c.outBack[:0]
	if bareCode(line) {
		c.out = append(append(c.out, line[:3]...), ' ')
		line = line[3:]
	}
	c.out = append(c.out, line...)
	c.in = c.in[k:]
}

// bareCode reports whether line is three digits and its end ("250" CRLF, or a bare LF).
func bareCode(line []byte) bool {
	if len(line) < 4 || len(line) > 5 {
		return false
	}
	for _, b := range line[:3] {
		if b < '0' || b > '9' {
			return false
		}
	}
	rest := string(line[3:])
	return rest == "\r\n" || rest == "\n"
}

// ConnectionState is the TLS connection's state when the session is under TLS (security.go reads the
// verified chains through it), and the zero state otherwise.
func (c *replyConn) ConnectionState() tls.ConnectionState {
	if t, ok := c.Conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		return t.ConnectionState()
	}
	return tls.ConnectionState{}
}

// pending reports whether input is held that no reader has taken.
func (c *replyConn) pending() bool { return len(c.in) > 0 || len(c.out) > 0 }

// inputWaiting reports whether the server has sent anything the session has not read as the reply to a
// command: held by its readers, or waiting on the socket (socketReadable). Between transactions nothing
// may be (RFC 5321 §4.1.1: a reply answers a command; RFC 2920 §3.1 matches replies to commands in order),
// so such a session is out of step, and reusing it would read those lines as the next transaction's
// replies: a refused recipient delivered, a delivered one bounced and suppressed. A closed connection
// reads as waiting input too.
func (s *session) inputWaiting() bool {
	return s.held() || (s.sock != nil && socketReadable(s.sock))
}

// sockOf returns the socket under c (through replyLimitConn), or nil.
func sockOf(c net.Conn) syscall.Conn {
	if l, ok := c.(*replyLimitConn); ok {
		c = l.Conn
	}
	sc, _ := c.(syscall.Conn)
	return sc
}
