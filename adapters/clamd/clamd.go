// Package clamd is the ports.Scanner backed by a ClamAV daemon, for deployments that want a maintained
// signature database instead of (or besides) the builtin checks. It speaks clamd's INSTREAM command over
// TCP: the content is streamed in length-prefixed chunks, so nothing is written to a disk clamd must share.
//
// Protocol (clamd(8), "INSTREAM"): the client sends "zINSTREAM\0", then chunks each preceded by its length
// as a 4-byte unsigned big-endian integer, then a zero length; clamd answers one NUL-terminated line:
// "stream: OK", "stream: <signature> FOUND" or "<reason> ERROR". The "z" prefix asks for NUL-terminated
// replies, which cannot be confused with a newline inside a reason.
package clamd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultChunkSize = 64 << 10
)

// Config locates the daemon.
type Config struct {
	Addr    string        // host:port of clamd's TCPSocket
	Timeout time.Duration // per scan, dial included; default DefaultTimeout
	// ChunkSize is the largest INSTREAM chunk; default DefaultChunkSize. clamd reassembles chunks, so this
	// only trades syscalls for memory.
	ChunkSize int
}

// Validate reports a missing address, so that a misconfigured deployment fails at start.
func (c Config) Validate() error {
	if c.Addr == "" {
		return errors.New("clamd: address is empty")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("clamd: address %q: %w", c.Addr, err)
	}
	if c.Timeout < 0 || c.ChunkSize < 0 {
		return errors.New("clamd: timeout and chunk size must not be negative")
	}
	return nil
}

// Scanner asks clamd about each attachment over a fresh connection (clamd handles one command per
// connection unless IDSESSION is used, and a fresh connection keeps a failed scan from poisoning the next).
// It is safe for concurrent use.
type Scanner struct {
	cfg    Config
	dialer net.Dialer
}

var _ ports.Scanner = (*Scanner)(nil)

// New returns a Scanner for cfg. It does not connect: use Ping to check the daemon is there.
func New(cfg Config) (*Scanner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	return &Scanner{cfg: cfg}, nil
}

// Ping sends PING and expects PONG: a readiness check that loads nothing.
func (s *Scanner) Ping(ctx context.Context) error {
	conn, done, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer done()
	if _, err := conn.Write([]byte("zPING\x00")); err != nil {
		return fmt.Errorf("clamd: ping: %w", s.cause(ctx, err))
	}
	reply, err := readReply(conn)
	if err != nil {
		return fmt.Errorf("clamd: ping: %w", s.cause(ctx, err))
	}
	if reply != "PONG" {
		return fmt.Errorf("clamd: ping answered %q", reply)
	}
	return nil
}

// Scan streams data to clamd. The verdict is clamd's: clean on "stream: OK", otherwise the signature it
// names (for example "Eicar-Test-Signature" or, from an unofficial database, "Eicar-Test-Signature.UNOFFICIAL").
// filename and contentType are not sent: clamd judges content only. Any other answer — clamd's own ERROR
// (for example "INSTREAM size limit exceeded", when data is larger than its StreamMaxLength), a broken
// connection, the timeout — is an error, never a clean verdict, so that a failing scanner fails closed.
func (s *Scanner) Scan(ctx context.Context, _ string, _ string, data []byte) (ports.ScanVerdict, error) {
	conn, done, err := s.dial(ctx)
	if err != nil {
		return ports.ScanVerdict{}, err
	}
	defer done()

	w := bufio.NewWriterSize(conn, s.cfg.ChunkSize+4)
	werr := writeStream(w, data, s.cfg.ChunkSize)
	if werr == nil {
		werr = w.Flush()
	}
	// clamd may answer and close early (size limit): its reply says more than the broken pipe does.
	reply, rerr := readReply(conn)
	if rerr != nil {
		if werr != nil {
			return ports.ScanVerdict{}, fmt.Errorf("clamd: scan: %w", s.cause(ctx, werr))
		}
		return ports.ScanVerdict{}, fmt.Errorf("clamd: scan: reading the reply: %w", s.cause(ctx, rerr))
	}
	return parseReply(reply)
}

func writeStream(w *bufio.Writer, data []byte, chunk int) error {
	if _, err := w.WriteString("zINSTREAM\x00"); err != nil {
		return err
	}
	var size [4]byte
	for len(data) > 0 {
		n := min(len(data), chunk)
		binary.BigEndian.PutUint32(size[:], uint32(n))
		if _, err := w.Write(size[:]); err != nil {
			return err
		}
		if _, err := w.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	binary.BigEndian.PutUint32(size[:], 0)
	_, err := w.Write(size[:])
	return err
}

// parseReply reads "stream: OK", "stream: <signature> FOUND" and "... ERROR".
func parseReply(reply string) (ports.ScanVerdict, error) {
	body, ok := strings.CutPrefix(reply, "stream: ")
	switch {
	case ok && body == "OK":
		return ports.ScanVerdict{Clean: true}, nil
	case ok && strings.HasSuffix(body, " FOUND"):
		sig := strings.TrimSpace(strings.TrimSuffix(body, " FOUND"))
		if sig == "" {
			return ports.ScanVerdict{}, fmt.Errorf("clamd: reply %q names no signature", reply)
		}
		return ports.ScanVerdict{Signature: sig}, nil
	case strings.HasSuffix(reply, " ERROR"):
		return ports.ScanVerdict{}, fmt.Errorf("clamd: %s", strings.TrimSuffix(reply, " ERROR"))
	default:
		return ports.ScanVerdict{}, fmt.Errorf("clamd: unexpected reply %q", reply)
	}
}

// dial connects with a deadline of the timeout or ctx's, whichever comes first, and makes ctx's end
// interrupt any blocked read or write. done releases both.
func (s *Scanner) dial(ctx context.Context) (net.Conn, func(), error) {
	deadline := time.Now().Add(s.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	conn, err := s.dialer.DialContext(dctx, "tcp", s.cfg.Addr)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("clamd: connect %s: %w", s.cfg.Addr, s.cause(ctx, err))
	}
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("clamd: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	return conn, func() { stop(); conn.Close() }, nil
}

// cause prefers ctx's error to the deadline error it provoked, so callers can tell cancellation apart.
func (s *Scanner) cause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// maxReply bounds a reply: clamd's lines are short, and a peer that is not clamd must not grow memory.
const maxReply = 4 << 10

// readReply reads one NUL-terminated reply (the "z" commands), tolerating a newline terminator or a close
// from a daemon that answers otherwise.
func readReply(conn net.Conn) (string, error) {
	var buf bytes.Buffer
	b := make([]byte, 512)
	for buf.Len() < maxReply {
		n, err := conn.Read(b)
		buf.Write(b[:n])
		if i := bytes.IndexByte(buf.Bytes(), 0); i >= 0 {
			return strings.TrimSpace(string(buf.Bytes()[:i])), nil
		}
		if err != nil {
			if buf.Len() > 0 && errors.Is(err, io.EOF) {
				return strings.TrimSpace(buf.String()), nil
			}
			return "", err
		}
	}
	return "", fmt.Errorf("reply longer than %d bytes", maxReply)
}
