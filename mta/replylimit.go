package mta

import (
	"errors"
	"net"
	"sync/atomic"
)

// maxReplyBytes bounds what a receiving server may send between two writes of the MTA. A reply line is
// at most 512 octets (RFC 5321 §4.5.3.1.5); the longest answers in practice — an EHLO with every
// extension, or the replies to a pipelined group of a hundred RCPTs — are a few KiB. The bound also
// covers the TLS handshake's records read after STARTTLS (a certificate chain of tens of KiB).
const maxReplyBytes = 256 << 10

// errReplyTooLong is the read error of a connection whose server went past maxReplyBytes: the session
// fails as a lost connection would (a temporary failure, retried within the job's retry schedule).
var errReplyTooLong = errors.New("the server's reply went on past 256 KiB")

// replyLimitConn is a connection to a receiving server that refuses to read more than maxReplyBytes
// between two writes. net/textproto, which go-smtp's client and the MTA's own reply readers use, grows
// a reply in memory for as long as the server sends it — one endless line or continuation lines without
// end — until the command timeout (minutes); this makes such a reply an error after a bounded read.
type replyLimitConn struct {
	net.Conn
	read  atomic.Int64 // bytes read since the last write
	cut   atomic.Bool  // the bound was reached once
	onCut func()       // called the first time the bound is reached
}

func newReplyLimitConn(c net.Conn, onCut func()) *replyLimitConn {
	return &replyLimitConn{Conn: c, onCut: onCut}
}

func (c *replyLimitConn) Read(p []byte) (int, error) {
	left := maxReplyBytes - c.read.Load()
	if left <= 0 {
		if c.cut.CompareAndSwap(false, true) && c.onCut != nil {
			c.onCut()
		}
		return 0, errReplyTooLong
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *replyLimitConn) Write(p []byte) (int, error) {
	c.read.Store(0)
	return c.Conn.Write(p)
}
