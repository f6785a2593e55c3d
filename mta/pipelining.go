package mta

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/ports"
)

// pipelined runs the mail transaction of transaction over a session whose server offers PIPELINING
// (RFC 2920): MAIL, every RCPT and DATA go in one write and their replies are read in order (§3.1: DATA is
// the last command of a group); then the content and the final dot go in a second write. Two round trips
// per message instead of three plus one per recipient, and the outcome of each recipient is its own RCPT
// reply, exactly as without pipelining. When the server offers CHUNKING too (RFC 3030, session.chunking),
// the content goes in the first write as the chunk of a "BDAT <size> LAST" that takes DATA's place
// (§4.2: BDAT may be pipelined; the server reads and answers the chunk whatever it answered before): one
// round trip a message, and the refusals below read BDAT's reply where they read DATA's.
//
//   - MAIL refused: every recipient of batch takes MAIL's reply; the replies to the RCPTs and DATA that
//     followed it (RFC 2920 §3.1: the server rejects them, having no transaction) are read and dropped;
//   - a RCPT refused: that recipient takes its reply (452 "too many recipients" returns it in rest for the
//     next transaction), the others go on;
//   - no RCPT accepted: the server must refuse DATA (§3.1); if it answers 354 anyway, an empty content is
//     ended with the dot and its reply dropped;
//   - DATA refused: every accepted recipient takes DATA's reply;
//   - 421 or a broken connection anywhere: whatever is not decided yet is deferred and the session closed.
//
// With probe (a reused session, see send), a MAIL that finds the session closed or answers 421 settles
// nothing and returns stale. The results are those of transaction.
func (m *MTA) pipelined(s *session, from string, opts *smtp.MailOptions, data []byte, r *result, batch []int, probe bool) (rest []int, delivered, keep, stale bool) {
	if err := validLines(from, r.rcpts, batch); err != nil {
		r.settleAll(batch, ports.OutcomeDeferred, describe(err))
		return nil, false, true, false
	}
	w, br := s.writer(m.cfg.CommandTimeout), s.reader()
	w.WriteString("MAIL FROM:<")
	w.WriteString(from)
	w.WriteByte('>')
	if ok, _ := s.client.Extension("8BITMIME"); ok {
		w.WriteString(" BODY=8BITMIME")
	}
	if ok, _ := s.client.Extension("SIZE"); ok && opts.Size > 0 {
		w.WriteString(" SIZE=")
		w.WriteString(strconv.FormatInt(opts.Size, 10))
	}
	if opts.UTF8 {
		w.WriteString(" SMTPUTF8")
	}
	w.WriteString("\r\n")
	for _, i := range batch {
		w.WriteString("RCPT TO:<")
		w.WriteString(r.rcpts[i].Address)
		w.WriteString(">\r\n")
	}
	if s.chunking {
		// The content's lines as DATA sends them (crlfLines) without the dot-stuffing and the final dot,
		// so the receiver stores the same bytes either way.
		content := crlfLines(data)
		w.WriteString("BDAT ")
		w.WriteString(strconv.Itoa(len(content)))
		w.WriteString(" LAST\r\n")
		w.Write(content)
	} else {
		w.WriteString("DATA\r\n")
	}
	// endGroup reads the reply to the group's DATA or BDAT when no content follows (MAIL or every RCPT
	// refused) and reports whether the session is still in step.
	endGroup := func() bool {
		if !s.chunking {
			return m.endRefusedData(s, br)
		}
		err := m.readReply(s, br, 25, 2*m.cfg.CommandTimeout)
		return (err == nil || keepable(err)) && !s.held()
	}
	if err := w.Flush(); err != nil {
		if probe {
			return nil, false, false, true
		}
		r.settleAll(batch, ports.OutcomeDeferred, describe(err))
		return nil, false, false, false
	}

	if err := m.readReply(s, br, 250, m.cfg.CommandTimeout); err != nil {
		kind, keep := classify(err)
		if probe && !keep {
			return nil, false, false, true
		}
		r.settleAll(batch, kind, describe(err))
		if !keep {
			return nil, false, false, false
		}
		// Stay in step: the RCPTs and DATA or BDAT were sent and are answered (refused) all the same.
		for range batch {
			if err := m.readReply(s, br, 25, m.cfg.CommandTimeout); err != nil && !keepable(err) {
				return nil, false, false, false
			}
		}
		return nil, false, endGroup(), false
	}
	r.handed = true

	accepted, rest, ok := r.rcptReplies(batch, func(int) error { return m.readReply(s, br, 25, m.cfg.CommandTimeout) })
	if !ok {
		return nil, false, false, false
	}
	if len(accepted) == 0 {
		return nil, false, endGroup(), false
	}

	if !s.chunking {
		if err := m.readReply(s, br, 354, m.cfg.CommandTimeout); err != nil {
			kind, keep := classify(err)
			r.settleAll(accepted, kind, describe(err))
			return nil, false, keep && !s.held(), false
		}
		if err := writeContent(w, data); err != nil {
			r.settleAll(accepted, ports.OutcomeDeferred, describe(err))
			return nil, false, false, false
		}
	}
	code, msg, err := m.readResponse(s, br, 250, 2*m.cfg.CommandTimeout)
	if s.chunking && bdatUnknown(err) {
		// CHUNKING was offered but BDAT is not understood: a server fault, not a verdict on the message.
		// The host is sent DATA from now on, and the recipients are retried (RFC 3030 §2 has a server
		// that offers CHUNKING take BDAT; a 5xx here would bounce a message the server would accept).
		m.noBDAT.Store(s.key, true)
		m.log.Warn("server refused BDAT after offering CHUNKING; using DATA with it from now on", "remote", s.remote, "reply", describe(err))
		r.settleAll(accepted, ports.OutcomeDeferred, truncate("4.5.0 BDAT refused after CHUNKING was offered ("+describe(err)+"); retrying with DATA"))
		return nil, false, false, false
	}
	if err != nil {
		kind, keep := classify(err)
		r.settleAll(accepted, kind, describe(err))
		return nil, false, keep && !s.held(), false
	}
	r.settleAll(accepted, ports.OutcomeDelivered, truncate(strconv.Itoa(code)+" "+oneLine(msg)))
	// Nothing may follow the last reply until the next command: bytes left mean the session is out of step.
	return rest, true, !s.held(), false
}

// bdatUnknown reports whether err is a reply saying the BDAT command itself is unknown or not
// implemented (RFC 5321 §4.2.4: 500, 502, 504), as opposed to a refusal of the message.
func bdatUnknown(err error) bool {
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		return false
	}
	return se.Code == 500 || se.Code == 502 || se.Code == 504
}

// crlfLines returns data with every bare LF made CRLF and a CRLF at the end: the lines of the content
// both DATA (writeContent, which adds the dot-stuffing) and BDAT send. data itself when nothing needs
// changing (a composed message's lines all end with CRLF).
func crlfLines(data []byte) []byte {
	bare := 0
	for i, c := range data {
		if c == '\n' && (i == 0 || data[i-1] != '\r') {
			bare++
		}
	}
	end := len(data) > 0 && data[len(data)-1] != '\n'
	if bare == 0 && !end && len(data) > 0 {
		return data
	}
	out := make([]byte, 0, len(data)+bare+2)
	for i, c := range data {
		if c == '\n' && (i == 0 || data[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, c)
	}
	if end {
		out = append(out, '\r', '\n')
	}
	return out
}

// endRefusedData reads the reply to a DATA that followed a refused MAIL or only refused RCPTs. The server
// must refuse it; should it answer 354, the empty content is ended with the dot and that reply dropped. It
// reports whether the session is still in step.
func (m *MTA) endRefusedData(s *session, br *bufio.Reader) bool {
	err := m.readReply(s, br, 354, m.cfg.CommandTimeout)
	if err != nil {
		return keepable(err) && !s.held()
	}
	w := s.writer(m.cfg.CommandTimeout)
	w.WriteString(".\r\n")
	if w.Flush() != nil {
		return false
	}
	err = m.readReply(s, br, 250, 2*m.cfg.CommandTimeout)
	return (err == nil || keepable(err)) && !s.held()
}

// keepable reports whether a session survives err, a reply that refused a command.
func keepable(err error) bool {
	_, keep := classify(err)
	return keep
}

// readReply reads one reply within timeout; a reply whose code does not start with expect is returned as
// an *smtp.SMTPError (textproto's rule: expect 25 accepts 250 and 251).
func (m *MTA) readReply(s *session, br *bufio.Reader, expect int, timeout time.Duration) error {
	_, _, err := m.readResponse(s, br, expect, timeout)
	return err
}

func (m *MTA) readResponse(s *session, br *bufio.Reader, expect int, timeout time.Duration) (int, string, error) {
	_ = s.conn.SetReadDeadline(time.Now().Add(timeout))
	defer func() { _ = s.conn.SetReadDeadline(time.Time{}) }()
	code, msg, err := textproto.NewReader(br).ReadResponse(expect)
	var pe *textproto.Error
	if errors.As(err, &pe) {
		return code, msg, replyError(pe)
	}
	return code, msg, err
}

// replyError turns a refusal into the *smtp.SMTPError that go-smtp's client would return for it, with its
// enhanced status code (RFC 3463) split off the text, so classify, tooManyRecipients and describe read
// pipelined and unpipelined replies alike.
func replyError(pe *textproto.Error) *smtp.SMTPError {
	e := &smtp.SMTPError{Code: pe.Code, Message: pe.Msg}
	first, rest, ok := strings.Cut(pe.Msg, " ")
	if !ok || !isEnhancedCode(first) {
		return e
	}
	var code smtp.EnhancedCode
	for i, part := range strings.Split(first, ".") {
		code[i], _ = strconv.Atoi(part)
	}
	e.EnhancedCode = code
	e.Message = strings.ReplaceAll(rest, "\n"+first+" ", "\n")
	return e
}

// validLines refuses a path that would break the command line it goes into (go-smtp's rule).
func validLines(from string, rcpts []ports.Recipient, batch []int) error {
	if strings.ContainsAny(from, "\r\n") {
		return errors.New("smtp: a line must not contain CR or LF")
	}
	for _, i := range batch {
		if strings.ContainsAny(rcpts[i].Address, "\r\n") {
			return errors.New("smtp: a line must not contain CR or LF")
		}
	}
	return nil
}

// writeContent writes data as the content of DATA (RFC 5321 §4.5.2): the lines of crlfLines (a bare LF
// sent as CRLF, as go-smtp's DotWriter does), one more dot before a line starting with a dot, and the
// final dot.
func writeContent(w *bufio.Writer, data []byte) error {
	for line := range bytes.Lines(crlfLines(data)) {
		if line[0] == '.' {
			w.WriteByte('.')
		}
		w.Write(line)
	}
	w.WriteString(".\r\n")
	return w.Flush()
}

// deadlineWriter sets a write deadline before every write, so each block of a large message gets its own
// (RFC 5321 §4.5.3.2.5).
type deadlineWriter struct {
	conn    net.Conn
	timeout time.Duration
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	_ = d.conn.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.conn.Write(p)
}

// sessionBuffer is the size of a pipelining session's write buffer: the commands of a transaction of up
// to a hundred recipients, or a block of content, per write.
const sessionBuffer = 32 << 10

// writer returns the session's buffered writer (created on first use).
func (s *session) writer(timeout time.Duration) *bufio.Writer {
	if s.bw == nil {
		s.bw = bufio.NewWriterSize(deadlineWriter{conn: s.conn, timeout: timeout}, sessionBuffer)
	}
	return s.bw
}

// held reports whether the session's readers hold input that no reply read has taken: nothing may
// follow the last reply of a transaction until the next command.
func (s *session) held() bool {
	return (s.br != nil && s.br.Buffered() > 0) || (s.rc != nil && s.rc.pending())
}

// reader returns the session's buffered reader (created on first use). Transactions read every reply they
// asked for, so nothing is left in it between transactions; RSET and QUIT read on their own.
func (s *session) reader() *bufio.Reader {
	if s.br == nil {
		s.br = bufio.NewReaderSize(s.conn, 4096)
	}
	return s.br
}
