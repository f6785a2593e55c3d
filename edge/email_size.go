package edge

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// A send body over the route's bound is not buffered, but SPEC §4.2 and §8 still want the bound it breaks
// reported as a 400 with the field's path: attachments over 10 MiB each or 25 MiB together, decided from
// the base64 length. sizeGuard watches the body as huma reads it, through a streaming scanner that keeps
// no more than the path it is at and a few counters. A body within the bound is left to the schema and
// Resolve, which report every violation at once. At the bound, the guard reads on without keeping what it
// reads, up to the bound again, until it finds a size violation; it then answers 400 with it, and
// otherwise lets huma answer 413 Request body is too large.

// Violation messages of the scanner; the first two are Resolve's, the third the core's for html and text.
const (
	msgAttachmentOver = "expected at most 10 MiB after base64 decoding"
	msgAttachmentsSum = "expected attachments to total at most 25 MiB after base64 decoding"
	msgBodyPartOver   = "must be at most 5 MiB"
)

// sizeGuard is the operation middleware of the send routes; batch says whether the body is {emails: [...]}.
// The bound is the operation's: register gives huma one byte more than it, so that exactly the bound fits.
func sizeGuard(batch bool) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		limit := ctx.Operation().MaxBodyBytes - 1
		g := &bodyGuard{body: ctx.BodyReader(), limit: limit, drain: limit, scan: newSizeScanner(batch)}
		next(guardedContext{humaContext: ctx, body: g})
	}
}

// humaContext lets guardedContext embed huma.Context under a field name other than Context, which is
// also one of its methods.
type humaContext = huma.Context

// guardedContext is a huma.Context whose body is read through the guard.
type guardedContext struct {
	humaContext
	body io.Reader
}

// BodyReader implements huma.Context.
func (c guardedContext) BodyReader() io.Reader { return c.body }

// bodyGuard hands huma at most limit bytes of body, scanning them. Asked for more, it reads one byte to
// tell a body of exactly the bound from a larger one; for a larger one it scans up to drain more bytes for
// a size violation. Found, the violation is the read error, which huma passes to the error hook (a 400
// with details); not found, the extra byte goes to huma, which answers 413.
type bodyGuard struct {
	body  io.Reader
	limit int64
	drain int64
	n     int64
	scan  *sizeScanner
	err   error
}

// Read implements io.Reader.
func (g *bodyGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if g.n < g.limit {
		if rest := g.limit - g.n; int64(len(p)) > rest {
			p = p[:rest]
		}
		k, err := g.body.Read(p)
		g.scan.feed(p[:k])
		g.n += int64(k)
		return k, err
	}
	var one [1]byte
	if k, err := io.ReadFull(g.body, one[:]); k == 0 {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return 0, err
	}
	g.scan.feed(one[:])
	if v := g.drainForViolation(); len(v) > 0 {
		g.err = ports.ValidationError(v...)
		return 0, g.err
	}
	p[0] = one[0]
	g.n++
	return 1, nil
}

// drainForViolation reads the rest of an oversized body, up to drain bytes, until the scanner has found a
// size violation, and returns the violations found.
func (g *bodyGuard) drainForViolation() []ports.FieldViolation {
	buf := make([]byte, 32<<10)
	for read := int64(0); len(g.scan.violations) == 0 && read < g.drain; {
		k, err := g.body.Read(buf[:min(int64(len(buf)), g.drain-read)])
		g.scan.feed(buf[:k])
		read += int64(k)
		if err != nil {
			break
		}
	}
	return g.scan.violations
}

// Close closes the request body when huma is done with it.
func (g *bodyGuard) Close() error {
	if c, ok := g.body.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// maxScanDepth bounds the nesting the scanner keeps frames for; deeper values (metadata, template
// variables) hold nothing it measures and are only counted.
const maxScanDepth = 32

// maxKeyLen is the longest object key the scanner keeps; every key it looks for is shorter.
const maxKeyLen = 16

// scanFrame is one open object or array.
type scanFrame struct {
	array     bool
	index     int    // arrays: the element being read
	key       string // objects: the key of the value being read
	expectKey bool   // objects: the next string is a key
}

// stringRole is what a string value being read is, for the bounds.
type stringRole int

const (
	roleNone stringRole = iota
	roleContent
	roleBodyPart
)

// sizeScanner follows a JSON send body byte by byte (it need not be valid JSON: anything it does not
// understand simply measures nothing) and records the size violations of SPEC §8 it sees: an attachment's
// content over ports.MaxAttachmentBytes or a message's attachments over ports.MaxTotalAttachmentBytes
// (decoded sizes from the base64 length, as decodedLen counts them), html or text over
// ports.MaxBodyPartBytes.
type sizeScanner struct {
	batch      bool
	stack      []scanFrame
	deep       int // levels opened beyond maxScanDepth
	violations []ports.FieldViolation

	inString bool
	isKey    bool
	key      []byte
	keyOK    bool
	esc      int // 0: none; 1: after a backslash; 2-5: reading the four hex digits of \u
	hex      rune

	role     stringRole
	path     string // of the value being read
	n        int64  // bytes of the value so far, decoded; CR and LF left out of content
	pad      int    // trailing '=' of content
	reported bool

	item      int // the message whose attachments are summed (the batch index; 0 for a single send)
	total     int64
	overTotal bool
}

func newSizeScanner(batch bool) *sizeScanner {
	return &sizeScanner{batch: batch, item: -1, stack: make([]scanFrame, 0, 8)}
}

// feed scans the next bytes of the body.
func (s *sizeScanner) feed(p []byte) {
	for i := 0; i < len(p); {
		if s.inString {
			i += s.stringBytes(p[i:])
			continue
		}
		s.structural(p[i])
		i++
	}
}

// structural handles one byte outside strings.
func (s *sizeScanner) structural(c byte) {
	switch c {
	case '{', '[':
		if len(s.stack) >= maxScanDepth {
			s.deep++
			return
		}
		s.stack = append(s.stack, scanFrame{array: c == '[', expectKey: c == '{'})
	case '}', ']':
		if s.deep > 0 {
			s.deep--
		} else if len(s.stack) > 0 {
			s.stack = s.stack[:len(s.stack)-1]
		}
	case ',':
		if top := s.top(); top != nil {
			if top.array {
				top.index++
			} else {
				top.expectKey, top.key = true, ""
			}
		}
	case ':':
		if top := s.top(); top != nil && !top.array {
			top.expectKey = false
		}
	case '"':
		s.inString, s.esc, s.n, s.pad, s.reported = true, 0, 0, 0, false
		top := s.top()
		s.isKey = top != nil && !top.array && top.expectKey
		if s.isKey {
			s.key, s.keyOK = s.key[:0], true
			return
		}
		s.role, s.path = s.roleOf()
	}
}

func (s *sizeScanner) top() *scanFrame {
	if s.deep > 0 || len(s.stack) == 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

// roleOf names the string value that starts at the current path: a top-level html or text, or
// attachments.N.content, of the send or (batch) of emails.N.
func (s *sizeScanner) roleOf() (stringRole, string) {
	if s.deep > 0 {
		return roleNone, ""
	}
	f, prefix := s.stack, ""
	if s.batch {
		if len(f) < 2 || f[0].array || f[0].key != "emails" || !f[1].array {
			return roleNone, ""
		}
		prefix = "emails." + strconv.Itoa(f[1].index) + "."
		s.startItem(f[1].index)
		f = f[2:]
	} else {
		s.startItem(0)
	}
	switch {
	case len(f) == 1 && !f[0].array && (f[0].key == "html" || f[0].key == "text"):
		return roleBodyPart, prefix + f[0].key
	case len(f) == 3 && !f[0].array && f[0].key == "attachments" && f[1].array && !f[2].array && f[2].key == "content":
		return roleContent, prefix + "attachments." + strconv.Itoa(f[1].index) + ".content"
	}
	return roleNone, ""
}

// startItem resets the attachment total when the scanner reaches another message of a batch.
func (s *sizeScanner) startItem(item int) {
	if item != s.item {
		s.item, s.total, s.overTotal = item, 0, false
	}
}

// stringBytes consumes string bytes from p up to and including the closing quote and returns how many.
func (s *sizeScanner) stringBytes(p []byte) int {
	i := 0
	for i < len(p) {
		if s.esc > 0 {
			s.escapeByte(p[i])
			i++
			continue
		}
		j := bytes.IndexAny(p[i:], `"\`)
		if j < 0 {
			s.plain(p[i:])
			return len(p)
		}
		s.plain(p[i : i+j])
		i += j
		if p[i] == '\\' {
			s.esc = 1
			i++
			continue
		}
		s.endString()
		return i + 1
	}
	return i
}

// plain accounts for a run of string bytes without escapes.
func (s *sizeScanner) plain(run []byte) {
	if len(run) == 0 {
		return
	}
	if s.isKey {
		s.keyBytes(run)
		return
	}
	if s.role == roleNone {
		return
	}
	s.n += int64(len(run))
	if s.role == roleContent {
		trailing := len(run) - len(bytes.TrimRight(run, "="))
		if trailing == len(run) {
			s.pad += trailing
		} else {
			s.pad = trailing
		}
	}
	s.check()
}

// escapeByte handles one byte of an escape sequence (RFC 8259 §7).
func (s *sizeScanner) escapeByte(c byte) {
	if s.esc == 1 {
		switch c {
		case 'u':
			s.esc, s.hex = 2, 0
			return
		case 'n':
			s.decoded('\n')
		case 'r':
			s.decoded('\r')
		case 'b':
			s.decoded('\b')
		case 'f':
			s.decoded('\f')
		case 't':
			s.decoded('\t')
		default: // '"', '\\', '/' and anything a decoder would refuse
			s.decoded(rune(c))
		}
		s.esc = 0
		return
	}
	var d rune
	switch {
	case c >= '0' && c <= '9':
		d = rune(c - '0')
	case c >= 'a' && c <= 'f':
		d = rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		d = rune(c-'A') + 10
	default:
		s.keyOK = false // not JSON; count the escape as one character and move on
		s.esc = 0
		s.decoded('?')
		return
	}
	s.hex = s.hex<<4 | d
	if s.esc++; s.esc == 6 {
		s.esc = 0
		s.decoded(s.hex)
	}
}

// decoded accounts for one character written as an escape.
func (s *sizeScanner) decoded(r rune) {
	if s.isKey {
		if r < utf8.RuneSelf {
			s.keyBytes([]byte{byte(r)})
		} else {
			s.keyOK = false
		}
		return
	}
	switch s.role {
	case roleNone:
		return
	case roleContent:
		switch r {
		case '\r', '\n': // skipped by base64 decoding
			return
		case '=':
			s.pad++
		default:
			s.pad = 0
		}
	}
	switch {
	case r >= 0xD800 && r <= 0xDFFF: // half of a surrogate pair: the pair is four bytes of UTF-8
		s.n += 2
	default:
		s.n += int64(utf8.RuneLen(r))
	}
	s.check()
}

func (s *sizeScanner) keyBytes(b []byte) {
	if !s.keyOK || len(s.key)+len(b) > maxKeyLen {
		s.keyOK = false
		return
	}
	s.key = append(s.key, b...)
}

// check reports a bound crossed while the value is still being read: for content, once even the most
// padding cannot bring it back under.
func (s *sizeScanner) check() {
	if s.reported {
		return
	}
	switch s.role {
	case roleBodyPart:
		if s.n > ports.MaxBodyPartBytes {
			s.report(msgBodyPartOver)
		}
	case roleContent:
		if (s.n-2)*3/4 > ports.MaxAttachmentBytes {
			s.report(msgAttachmentOver)
		}
	}
}

func (s *sizeScanner) report(msg string) {
	s.reported = true
	s.violations = append(s.violations, ports.FieldViolation{Path: s.path, Message: msg})
}

// endString finishes a key or a value. A finished attachment is judged on its exact decoded size and adds
// it to its message's total; the attachment that takes the total past the bound is named once, unless it
// is over the bound itself, as Resolve names them.
func (s *sizeScanner) endString() {
	s.inString = false
	if s.isKey {
		if top := s.top(); top != nil {
			top.key = ""
			if s.keyOK {
				top.key = string(s.key)
			}
			top.expectKey = false
		}
		return
	}
	if s.role != roleContent {
		return
	}
	size := (s.n - int64(min(s.pad, 2))) * 3 / 4
	s.total += size
	if size > ports.MaxAttachmentBytes {
		if !s.reported {
			s.report(msgAttachmentOver)
		}
		return
	}
	if s.total > ports.MaxTotalAttachmentBytes && !s.overTotal {
		s.overTotal = true
		s.violations = append(s.violations, ports.FieldViolation{Path: s.path, Message: msgAttachmentsSum})
	}
}
