package mta

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// dialError is a failure to open a usable session to one address (or to find one to open). tlsFailed
// marks a failed TLS handshake, after which an opportunistic sender retries in plaintext, and tlsNote says
// what failed, for the outcome of what is then sent in plaintext; forbidden marks a host whose every
// address is forbidden (ports/netguard).
type dialError struct {
	response  string
	tlsFailed bool
	tlsNote   string
	forbidden bool
}

func (e *dialError) Error() string { return e.response }

// dial opens a session to d, trying each of its addresses in turn (RFC 5321 §5.1: "the SMTP client
// SHOULD try at least two addresses" of a multihomed host before the next MX).
//
// A failed TLS handshake is retried in plaintext when the destination does not require TLS (opportunistic
// TLS, RFC 3207 §4 leaves the choice to the client): the session then carries the downgrade, which every
// outcome decided over it records, and the downgrade is logged and counted. A destination that requires
// TLS gets no plaintext session.
//
// budget is how many more connections the delivery attempt may open (maxAddressesPerAttempt); each
// address tried takes one.
func (m *MTA) dial(ctx context.Context, d destination, budget *int) (*session, error) {
	if *budget <= 0 { // spent on earlier hosts: not even a lookup
		return nil, &dialError{response: fmt.Sprintf("4.4.1 no connection left to try for %s in this attempt", d.host)}
	}
	addrs, err := m.addresses(ctx, d)
	if err != nil {
		return nil, err
	}
	var last error
	for _, addr := range addrs {
		if *budget <= 0 {
			break
		}
		*budget--
		start := time.Now()
		s, err := m.open(ctx, d, addr, true)
		var de *dialError
		if errors.As(err, &de) && de.tlsFailed && !d.requireTLS {
			m.log.Warn("STARTTLS handshake failed; retrying without TLS", "host", d.host, "addr", addr.String(), "error", de.response)
			s, err = m.open(ctx, d, addr, false)
			if err == nil {
				s.downgrade = de.tlsNote
				m.metrics.tlsDowngrades.WithLabelValues("handshake").Inc()
			}
		}
		if err == nil {
			m.metrics.smtp.WithLabelValues("connect").Observe(time.Since(start).Seconds())
			return s, nil
		}
		last = err
		m.log.Debug("connection failed", "host", d.host, "addr", addr.String(), "error", err)
	}
	return nil, last
}

// open connects to one address: greeting, EHLO, STARTTLS when offered and useTLS (RFC 3207), AUTH PLAIN
// to the relay when configured (RFC 4954).
func (m *MTA) open(ctx context.Context, d destination, addr netip.Addr, useTLS bool) (*session, error) {
	remote := fmt.Sprintf("%s[%s]:%d", d.host, addr, d.port)
	fail := func(format string, args ...any) error {
		return &dialError{response: fmt.Sprintf(format, args...)}
	}
	dialer := net.Dialer{Timeout: m.cfg.ConnectTimeout}
	conn, err := dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(addr, uint16(d.port)).String())
	if err != nil {
		return nil, fail("4.4.1 connect to %s: %v", remote, unwrapOpError(err))
	}
	// Every read of the session, TLS included, goes through the bound.
	raw := newReplyLimitConn(conn, func() {
		m.metrics.repliesCut.Inc()
		m.log.Warn("receiving server's reply went on past 256 KiB; session ended", "host", d.host, "addr", addr.String())
	})
	rc := newReplyConn(raw)
	c := m.newClient(rc)
	if err := c.Hello(m.cfg.HELO); err != nil {
		_ = c.Close()
		return nil, fail("%s (greeting from %s)", describe(err), remote)
	}
	s := &session{client: c, conn: rc, remote: remote, rc: rc, sock: sockOf(raw)}

	if ok, _ := c.Extension("STARTTLS"); ok && useTLS {
		if rc.pending() {
			// Lines after the EHLO reply that nobody asked for would be read after the handshake as if the
			// server had said them under TLS (the plaintext injection of RFC 3207 §4.2's reset rule).
			_ = raw.Close()
			return nil, fail("4.5.0 %s sent more than its reply to EHLO before STARTTLS", remote)
		}
		tc, err := m.startTLS(ctx, raw, d)
		var se *smtp.SMTPError
		switch {
		case errors.As(err, &se) && se.Code != 421 && !d.requireTLS:
			// STARTTLS refused (454 and the like): the session goes on in plaintext (RFC 3207 §4), and
			// what it carries says so.
			s.downgrade = fmt.Sprintf("STARTTLS refused by %s: %s", remote, tlsFailure(se))
			m.log.Warn("STARTTLS refused; continuing without TLS", "host", d.host, "addr", addr.String(), "reply", smtpReply(se))
			m.metrics.tlsDowngrades.WithLabelValues("refused").Inc()
		case err != nil:
			_ = raw.Close()
			return nil, &dialError{
				response:  fmt.Sprintf("4.7.0 STARTTLS with %s failed: %v", remote, describe(err)),
				tlsFailed: true,
				tlsNote:   fmt.Sprintf("STARTTLS handshake with %s failed: %v", remote, tlsFailure(err)),
			}
		default:
			// After the handshake the session starts over with EHLO (RFC 3207 §4.2) on a new client; the
			// greeting it expects was given before STARTTLS, so it is replayed locally.
			trc := newReplyConn(tc)
			c = m.newClient(&greetedConn{Conn: trc, r: io.MultiReader(strings.NewReader("220 "+d.host+" TLS session ready\r\n"), trc)})
			if err := c.Hello(m.cfg.HELO); err != nil {
				_ = c.Close()
				return nil, fail("%s (EHLO over TLS to %s)", describe(err), remote)
			}
			s = &session{client: c, conn: trc, remote: remote, tls: true, rc: trc, sock: sockOf(raw)}
		}
	} else if useTLS {
		m.tlsAttempt(d, errNoSTARTTLS) // a policy's TLS-RPT counts it (security.go)
	}
	s.pipelining, _ = s.client.Extension("PIPELINING")
	if s.pipelining && !m.cfg.NoChunking {
		s.chunking, _ = s.client.Extension("CHUNKING")
		if _, refused := m.noBDAT.Load(d.key()); refused {
			s.chunking = false
		}
	}
	if !s.tls && d.requireTLS {
		m.quit(s)
		return nil, fail("4.7.10 %s offers no usable STARTTLS and TLS is required", remote)
	}

	if d.relay && m.cfg.RelayUsername != "" {
		if !credentialsAllowed(s.tls, addr) {
			m.quit(s)
			return nil, fail("4.7.10 refusing to send relay credentials over plaintext to %s", remote)
		}
		if err := c.Auth(sasl.NewPlainClient("", m.cfg.RelayUsername, m.cfg.RelayPassword)); err != nil {
			_ = c.Close()
			return nil, fail("%s (AUTH to %s)", describe(err), remote)
		}
	}
	return s, nil
}

// credentialsAllowed says whether the relay password may be sent: under TLS, or in plaintext only to a
// loopback address where nothing crosses a network (RFC 4954 §4 and RFC 4616 §6: PLAIN must be
// protected by a secure channel).
func credentialsAllowed(tls bool, addr netip.Addr) bool {
	return tls || addr.Unmap().IsLoopback()
}

func (m *MTA) newClient(conn net.Conn) *smtp.Client {
	c := smtp.NewClient(conn)
	c.CommandTimeout = m.cfg.CommandTimeout
	c.SubmissionTimeout = 2 * m.cfg.CommandTimeout
	return c
}

// startTLS sends STARTTLS on raw (after the client's EHLO) and performs the handshake, checking the
// certificate as d's policy says (security.go). go-smtp's own STARTTLS entry points say EHLO as
// "localhost" and cannot continue in plaintext when the extension is missing, so the command is spoken
// here and the client is recreated over TLS.
func (m *MTA) startTLS(ctx context.Context, raw net.Conn, d destination) (_ *tls.Conn, err error) {
	defer func() { m.tlsAttempt(d, err) }()
	_ = raw.SetDeadline(time.Now().Add(m.cfg.CommandTimeout))
	defer func() { _ = raw.SetDeadline(time.Time{}) }()
	if _, err := io.WriteString(raw, "STARTTLS\r\n"); err != nil {
		return nil, err
	}
	if err := readReply(raw, 220); err != nil {
		return nil, err
	}
	tc := tls.Client(raw, m.tlsConfig(d))
	hctx, cancel := context.WithTimeout(ctx, m.cfg.CommandTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, err
	}
	return tc, nil
}

// rset sends RSET (RFC 5321 §4.1.1.5) before a session is reused: it clears whatever state the previous
// transaction left and proves the server has not dropped the idle connection. go-smtp's Client.Reset
// also forgets the EHLO, so the next command would repeat it (a round trip per message, and a chance for
// a server to drop the AUTH state); the command is spoken here on the session's connection instead.
//
// It runs once per message, so its reply is read through a buffer (one read in practice) rather than a
// byte at a time as readReply does. Nothing may follow the reply until the next command, so bytes left in
// the buffer mean the session is out of step: rset then fails, and the caller does not reuse the session.
func (m *MTA) rset(s *session) error {
	_ = s.conn.SetDeadline(time.Now().Add(m.cfg.CommandTimeout))
	defer func() { _ = s.conn.SetDeadline(time.Time{}) }()
	if _, err := io.WriteString(s.conn, "RSET\r\n"); err != nil {
		return err
	}
	br := bufio.NewReaderSize(s.conn, 512)
	_, _, err := textproto.NewReader(br).ReadResponse(250)
	if err == nil && (br.Buffered() > 0 || s.held()) {
		return errors.New("unexpected data after the reply to RSET")
	}
	return smtpError(err)
}

// readReply reads one reply from conn without reading past it.
func readReply(conn net.Conn, code int) error {
	_, _, err := textproto.NewReader(bufio.NewReaderSize(byteReader{conn}, 16)).ReadResponse(code)
	return smtpError(err)
}

// smtpError turns a textproto reply error into the *smtp.SMTPError that classify and describe read.
func smtpError(err error) error {
	var pe *textproto.Error
	if errors.As(err, &pe) {
		return &smtp.SMTPError{Code: pe.Code, Message: pe.Msg}
	}
	return err
}

// quit ends a session with QUIT, waiting briefly for the reply, and closes it.
func (m *MTA) quit(s *session) {
	s.client.CommandTimeout = min(m.cfg.CommandTimeout, 5*time.Second)
	if err := s.client.Quit(); err != nil {
		_ = s.client.Close()
	}
}

// greetedConn replays a greeting before the connection's own bytes.
type greetedConn struct {
	net.Conn
	r io.Reader
}

func (g *greetedConn) Read(p []byte) (int, error) { return g.r.Read(p) }

// byteReader reads one byte at a time so that a reply is read without consuming what follows it (the
// TLS handshake after STARTTLS, or bytes the SMTP client has yet to read).
type byteReader struct{ r io.Reader }

func (b byteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return b.r.Read(p)
}

// describe renders an error as a reply for the timeline: the server's reply for SMTP errors, the enhanced
// status 4.4.2 (bad connection, RFC 3463) for the rest.
func describe(err error) string {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return smtpReply(se)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "4.4.2 timeout: " + unwrapOpError(err).Error()
	}
	return "4.4.2 connection failed: " + unwrapOpError(err).Error()
}

// smtpReply renders a server reply as "550 5.1.1 text" on one line.
func smtpReply(e *smtp.SMTPError) string {
	msg := oneLine(e.Message)
	if e.EnhancedCode != smtp.EnhancedCodeNotSet && e.EnhancedCode != smtp.NoEnhancedCode {
		return truncate(fmt.Sprintf("%d %d.%d.%d %s", e.Code, e.EnhancedCode[0], e.EnhancedCode[1], e.EnhancedCode[2], msg))
	}
	return truncate(strconv.Itoa(e.Code) + " " + msg)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// truncate bounds a reply early; settle bounds (and cleans) every outcome again.
func truncate(s string) string {
	if len(s) > maxResponse {
		return s[:maxResponse]
	}
	return s
}

// tlsFailure names what went wrong in a STARTTLS exchange without an enhanced status code, so a note
// about it never reads as the status of the reply it follows.
func tlsFailure(err error) string {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		msg := oneLine(se.Message)
		if code, rest, ok := strings.Cut(msg, " "); ok && isEnhancedCode(code) {
			msg = rest
		}
		return fmt.Sprintf("%d %s", se.Code, msg)
	}
	return unwrapOpError(err).Error()
}

// isEnhancedCode recognizes an RFC 3463 status code such as 4.7.0.
func isEnhancedCode(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || (parts[0] != "2" && parts[0] != "4" && parts[0] != "5") {
		return false
	}
	for _, p := range parts[1:] {
		if len(p) < 1 || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// unwrapOpError drops the "dial tcp a:b:" prefix of net errors: the remote is named by the caller.
func unwrapOpError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}
