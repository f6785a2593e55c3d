package mta

import (
	"cmp"
	"context"
	"errors"
	"net"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/ports"
)

// result collects one job's per-recipient outcomes.
type result struct {
	rcpts    []ports.Recipient
	outcomes []ports.RecipientOutcome // Kind "" = not decided yet
	handed   bool
	// note is appended to every response decided while it is set: why the session in use is not under
	// TLS although the server offered it.
	note string
}

func newResult(rcpts []ports.Recipient) *result {
	r := &result{rcpts: rcpts, outcomes: make([]ports.RecipientOutcome, len(rcpts))}
	for i, rc := range rcpts {
		r.outcomes[i].RecipientID = rc.ID
	}
	return r
}

// settle records a recipient's outcome. The response is cleaned (cleanText) and bounded here, the one
// place every outcome passes: a server's reply (or a DNS answer quoted in an error) may carry any bytes,
// while the timeline, the journal and the Connect hop to the core hold text — and a NUL the store refuses
// would have the report fail and the job retried.
func (r *result) settle(i int, kind ports.DeliveryOutcomeKind, response string) {
	r.outcomes[i].Kind, r.outcomes[i].Response = kind, cleanTextWithNote(response, r.note, maxResponse)
}

// settleAll decides the recipients idx alike.
func (r *result) settleAll(idx []int, kind ports.DeliveryOutcomeKind, response string) {
	for _, i := range idx {
		r.settle(i, kind, response)
	}
}

// rcptReplies decides the recipients of batch by their RCPT replies, which reply returns in turn: refused
// ones take their reply (452 "too many recipients" returns one in rest, deferred, for a next transaction),
// accepted ones are returned. A reply that ends the session (421, a broken connection) defers every
// recipient not decided yet and returns ok false.
func (r *result) rcptReplies(batch []int, reply func(i int) error) (accepted, rest []int, ok bool) {
	accepted = make([]int, 0, len(batch))
	for _, i := range batch {
		err := reply(i)
		if err == nil {
			accepted = append(accepted, i)
			continue
		}
		kind, keep := classify(err)
		if !keep {
			r.settleRest(ports.OutcomeDeferred, describe(err))
			return nil, nil, false
		}
		if tooManyRecipients(err) {
			kind = ports.OutcomeDeferred
			rest = append(rest, i)
		}
		r.settle(i, kind, describe(err))
	}
	return accepted, rest, true
}

// settleRest decides every recipient not decided yet.
func (r *result) settleRest(kind ports.DeliveryOutcomeKind, response string) {
	for i := range r.outcomes {
		if r.outcomes[i].Kind == "" {
			r.settle(i, kind, response)
		}
	}
}

// send delivers data to the first destination that takes a session: each MX in preference order (RFC 5321
// §5.1), each of its addresses, reusing a pooled session when one is idle. Once a session is open its
// replies decide the outcome; only failures to open a session move on to the next destination.
//
// A reused session must still be open: one whose last transaction did not end cleanly is reset and probed
// with RSET first; one whose last transaction ended with 250 after DATA is already back in the initial
// state (RFC 5321 §4.1.1.4), so its MAIL is the probe: when MAIL on a reused session meets a closed
// connection or 421, nothing has been handed over, and the message goes over another session as after a
// failed RSET. This saves a round trip per message on busy connections.
//
// When every destination failed because its host has only forbidden addresses (ports/netguard), the
// recipients fail for good: retrying cannot make those addresses reachable.
//
// The site of the destinations (site.go) sets how many connections may be open, how many messages each
// carries and how long it stays idle; every reply is fed to the site's adaptive back-off. A transactional
// job (bulk false) waiting for a session is given one before any bulk job (pool.get).
func (m *MTA) send(ctx context.Context, dests []destination, from string, data []byte, r *result, st *site, bulk bool) {
	conns, perConn, idle := st.limits(m.sites.shaping.Adaptive, m.now())
	last := "4.4.1 no destination reachable"
	forbidden, allForbidden := "", true
	budget := maxAddressesPerAttempt // connections this attempt may open (route.go)
	for _, d := range dests {
		if budget <= 0 {
			break
		}
		for tries := 0; tries <= m.cfg.Concurrency; tries++ {
			s, err := m.pool.get(ctx, d.key(), conns, bulk, func(ctx context.Context) (*session, error) { return m.dial(ctx, d, &budget) })
			if err != nil {
				last = describeDialError(err)
				m.observeSite(st, last)
				var de *dialError
				if errors.As(err, &de) && de.forbidden {
					forbidden = cmp.Or(forbidden, de.response)
				} else {
					allForbidden = false
				}
				break
			}
			allForbidden = false
			s.idleFor = idle
			if s.uses > 0 && s.inputWaiting() {
				// Replies nobody asked for, or a closed connection: out of step, not to be reused.
				m.log.Debug("reused connection had unexpected input; closing it", "remote", s.remote)
				m.pool.discard(s)
				last = "4.4.2 reused connection to " + s.remote + " was out of step"
				continue
			}
			probe := s.uses > 0 && s.clean
			if s.uses > 0 && !s.clean {
				if err := m.rset(s); err != nil {
					m.pool.discard(s)
					last = describe(err)
					continue
				}
			}
			s.uses++
			start := time.Now()
			r.note = m.tlsNote(d, s) // which TLS carries it, or why none (security.go)
			keep, stale := m.transact(s, from, data, r, probe)
			r.note = ""
			if stale {
				m.pool.discard(s)
				last = "4.4.2 reused connection to " + s.remote + " was closed"
				continue
			}
			m.metrics.smtp.WithLabelValues("transaction").Observe(time.Since(start).Seconds())
			m.observeResult(st, r)
			switch {
			case keep && perConn > 0 && s.uses >= perConn: // the site's messages per connection
				m.pool.quitAll([]*session{s})
			case keep:
				m.pool.put(s, conns)
			default:
				m.pool.discard(s)
			}
			return
		}
	}
	if allForbidden && forbidden != "" {
		r.settleRest(ports.OutcomeFailed, forbidden)
		return
	}
	r.settleRest(ports.OutcomeDeferred, last)
}

// maxNote bounds the downgrade note of an outcome, leaving most of maxResponse to the server's reply.
const maxNote = 300

// transact delivers to every recipient of r over s and reports whether the session can be reused. All
// recipients go in one transaction; when the server refuses some with "too many recipients" (RFC 5321
// §4.5.3.1.10: 452, or 552 with X.5.3, which §4.5.3.1.10 says to treat as temporary) after accepting
// others, the rest follow in further transactions on the same session (§4.5.3.1.8's 100-recipient
// chunks), as long as each transaction delivers. With probe (see send), a first MAIL that finds the
// session closed settles nothing and reports stale instead.
func (m *MTA) transact(s *session, from string, data []byte, r *result, probe bool) (keep, stale bool) {
	batch := make([]int, len(r.rcpts))
	for i := range batch {
		batch[i] = i
	}
	s.clean = false
	for {
		rest, delivered, keep, stale := m.transaction(s, from, data, r, batch, probe)
		if stale {
			return false, true
		}
		probe = false
		s.clean = delivered && keep
		if !keep || !delivered || len(rest) == 0 {
			return keep, false
		}
		batch = rest // the transaction ended with 250: the server is ready for the next MAIL (§4.1.1.4)
	}
}

// transaction runs one mail transaction (RFC 5321 §3.3) for the recipients batch of r: MAIL FROM, one
// RCPT TO each, DATA. A 5xx reply is a permanent failure (bounced), a 4xx reply a transient one
// (deferred); 421 or a broken connection defers everything not decided yet (§3.8). It returns the
// recipients refused as too many (settled deferred until a later transaction takes them), whether the
// message was delivered, and whether the session can be reused. With probe, a MAIL that fails on the
// connection (or with 421) settles nothing and returns stale.
func (m *MTA) transaction(s *session, from string, data []byte, r *result, batch []int, probe bool) (rest []int, delivered, keep, stale bool) {
	c := s.client
	opts := &smtp.MailOptions{Size: int64(len(data))} // SIZE (RFC 1870): an oversized message is refused at MAIL
	if !isASCII(from) || !allRecipientsASCII(r.rcpts) {
		if ok, _ := c.Extension("SMTPUTF8"); !ok {
			// RFC 6531 §3.2: without SMTPUTF8 such addresses cannot be transmitted.
			r.settleRest(ports.OutcomeBounced, "553 5.6.7 the receiving server does not support internationalized addresses (SMTPUTF8)")
			return nil, false, true, false
		}
		opts.UTF8 = true
	}
	if s.pipelining {
		return m.pipelined(s, from, opts, data, r, batch, probe)
	}
	if err := c.Mail(from, opts); err != nil {
		kind, keep := classify(err)
		if probe && !keep {
			return nil, false, false, true
		}
		r.settleAll(batch, kind, describe(err))
		return nil, false, keep, false
	}
	r.handed = true

	accepted, rest, ok := r.rcptReplies(batch, func(i int) error { return c.Rcpt(r.rcpts[i].Address, nil) })
	if !ok {
		return nil, false, false, false
	}
	if len(accepted) == 0 {
		return nil, false, true, false // the next transaction starts with RSET
	}

	w, err := c.Data()
	if err != nil {
		kind, keep := classify(err)
		r.settleAll(accepted, kind, describe(err))
		return nil, false, keep, false
	}
	if err := m.writeData(s.conn, w, data); err != nil {
		r.settleAll(accepted, ports.OutcomeDeferred, describe(err))
		return nil, false, false, false
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		kind, keep := classify(err)
		r.settleAll(accepted, kind, describe(err))
		return nil, false, keep, false
	}
	r.settleAll(accepted, ports.OutcomeDelivered, truncate("250 "+oneLine(resp.StatusText)))
	return rest, true, true, false
}

// tooManyRecipients recognizes RFC 5321 §4.5.3.1.10's reply: 452, or 552 with the enhanced status X.5.3
// "too many recipients" (RFC 3463).
func tooManyRecipients(err error) bool {
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		return false
	}
	switch se.EnhancedCode {
	case smtp.EnhancedCode{4, 5, 3}, smtp.EnhancedCode{5, 5, 3}:
		return se.Code == 452 || se.Code == 552
	case smtp.EnhancedCodeNotSet:
		return se.Code == 452
	}
	return false
}

// writeData writes the message in blocks, each with its own deadline (RFC 5321 §4.5.3.2.5: the data
// block timeout applies per send, so a large message on a slow link is not cut off).
func (m *MTA) writeData(conn net.Conn, w *smtp.DataCommand, data []byte) error {
	const block = 64 << 10
	for len(data) > 0 {
		n := min(len(data), block)
		_ = conn.SetWriteDeadline(time.Now().Add(m.cfg.CommandTimeout))
		if _, err := w.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// classify maps an error of a transaction command to an outcome and whether the session survives it.
func classify(err error) (kind ports.DeliveryOutcomeKind, keep bool) {
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		return ports.OutcomeDeferred, false
	}
	switch {
	case se.Code == 421: // the server is closing the channel (RFC 5321 §3.8)
		return ports.OutcomeDeferred, false
	case se.Code >= 500 && se.Code < 600:
		return ports.OutcomeBounced, true
	case se.Code >= 400 && se.Code < 500:
		return ports.OutcomeDeferred, true
	default: // a reply the protocol does not allow here: the session state is unknown
		return ports.OutcomeDeferred, false
	}
}

func describeDialError(err error) string {
	var de *dialError
	if errors.As(err, &de) {
		return de.response
	}
	return describe(err)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func allRecipientsASCII(rcpts []ports.Recipient) bool {
	for _, rc := range rcpts {
		if !isASCII(rc.Address) {
			return false
		}
	}
	return true
}
