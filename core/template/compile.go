package template

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// Mode is the kind of content a template renders to; it decides the escaping and, for HTML, the analysis of
// the markup.
type Mode uint8

// The modes of a template version's three parts.
const (
	// Text is a text/plain part.
	Text Mode = iota + 1
	// HTML is a text/html part, analysed at Compile (see the package documentation).
	HTML
	// Subject is a Subject header: no CR or LF in the source, and values' CR and LF become spaces.
	Subject
)

// String names the mode as the version field it compiles.
func (m Mode) String() string {
	switch m {
	case Text:
		return "text"
	case HTML:
		return "html"
	case Subject:
		return "subject"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// SyntaxError is why a template does not compile. Msg is written to be shown against the version field (it
// says what is expected); Line and Column (1-based, the column in characters) locate the problem when it
// has a place.
type SyntaxError struct {
	Msg          string
	Line, Column int
}

// Error implements error.
func (e *SyntaxError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("%s (line %d, column %d)", e.Msg, e.Line, e.Column)
}

// Compiled is a template analysed once, ready to render any number of times from any number of goroutines.
// Versions are immutable, so a Compiled is kept as long as its version is in use (see Cache).
type Compiled struct {
	mode   Mode
	ops    []op
	litLen int // bytes of literal text, to size the output
	values int // placeholders that may write something
}

// opKind is what one step of Render does.
type opKind uint8

const (
	opLiteral  opKind = iota // write lit
	opValue                  // write the variable at path, escaped with esc
	opURLStart               // remember where a URL attribute's value starts
	opURLEnd                 // drop the value written since opURLStart when it is a dangerous URL of kind url
)

type op struct {
	kind opKind
	esc  escaper
	url  urlKind
	lit  string
	path []string
}

// Compile analyses src as a template of mode; it is the costly step, done once per version (see Cache). It
// fails, with a *SyntaxError, for a Subject with CR or LF and for the HTML constructs the package
// documentation lists; any other input compiles, whatever its placeholders hold.
func Compile(src string, mode Mode) (*Compiled, error) {
	switch mode {
	case Text:
		return compilePlain(src, mode, escHTML), nil
	case Subject:
		if i := strings.IndexAny(src, "\r\n"); i >= 0 {
			line, col := position(src, i)
			return nil, &SyntaxError{Msg: "must not contain CR or LF", Line: line, Column: col}
		}
		return compilePlain(src, mode, escSubject), nil
	case HTML:
		return compileHTML(src)
	}
	return nil, fmt.Errorf("template: unknown mode %d", mode)
}

// compilePlain compiles a subject or text part: literal text and escaped values, nothing else.
func compilePlain(src string, mode Mode, esc escaper) *Compiled {
	var b opBuilder
	last := 0
	for _, p := range scanPlaceholders(src) {
		b.literal(src[last:p.start])
		if p.path != nil {
			b.value(p.path, esc)
		}
		last = p.end
	}
	b.literal(src[last:])
	return b.compiled(mode)
}

// position converts a byte offset of src to a 1-based line and character column.
func position(src string, off int) (line, col int) {
	before := src[:off]
	line = 1 + strings.Count(before, "\n")
	if nl := strings.LastIndexByte(before, '\n'); nl >= 0 {
		before = before[nl+1:]
	}
	return line, 1 + utf8.RuneCountInString(before)
}

// opBuilder accumulates ops, merging adjacent literal text into one op.
type opBuilder struct {
	ops     []op
	pending []byte
	litLen  int
	values  int
}

func (b *opBuilder) literal(s string) {
	b.pending = append(b.pending, s...)
}

func (b *opBuilder) flush() {
	if len(b.pending) > 0 {
		b.ops = append(b.ops, op{kind: opLiteral, lit: string(b.pending)})
		b.litLen += len(b.pending)
		b.pending = b.pending[:0]
	}
}

func (b *opBuilder) value(path []string, esc escaper) {
	b.flush()
	b.ops = append(b.ops, op{kind: opValue, path: path, esc: esc})
	b.values++
}

func (b *opBuilder) urlStart() {
	b.flush()
	b.ops = append(b.ops, op{kind: opURLStart})
}

func (b *opBuilder) urlEnd(kind urlKind) {
	b.flush()
	b.ops = append(b.ops, op{kind: opURLEnd, url: kind})
}

func (b *opBuilder) compiled(mode Mode) *Compiled {
	b.flush()
	return &Compiled{mode: mode, ops: b.ops, litLen: b.litLen, values: b.values}
}

// Mode returns the mode c was compiled for.
func (c *Compiled) Mode() Mode { return c.mode }

// Placeholders returns the identifiers c substitutes, in order, as written (dotted); placeholders that
// always render empty are not listed. It lets a caller tell which variables a template uses.
func (c *Compiled) Placeholders() []string {
	var out []string
	for _, o := range c.ops {
		if o.kind == opValue {
			out = append(out, strings.Join(o.path, "."))
		}
	}
	return out
}

// valueAllowance is the room Render reserves per placeholder beyond the literal text, so that a typical
// value fits without growing the buffer.
const valueAllowance = 32

// maxPooledBuffer keeps one very large render from pinning its buffer in the pool.
const maxPooledBuffer = 1 << 20

var bufferPool = sync.Pool{New: func() any { return new([]byte) }}

// Render writes the template with vars substituted (vars may be nil: every placeholder renders empty). It
// reads c without changing it, so concurrent calls are safe.
func (c *Compiled) Render(vars map[string]any) string { return c.RenderAtMost(vars, 0) }

// RenderAtMost is Render that stops once the output passes max bytes (max <= 0: no bound) and returns
// its first max+1 bytes: what a caller that refuses output over max needs to see, without building the
// rest. A short template with a large variable repeated in it would otherwise make hundreds of MiB out of
// a small request before any bound is checked.
func (c *Compiled) RenderAtMost(vars map[string]any, max int) string {
	bp := bufferPool.Get().(*[]byte)
	buf := (*bp)[:0]
	if need := c.litLen + valueAllowance*c.values; cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	urlStart := 0
	for i := range c.ops {
		o := &c.ops[i]
		switch o.kind {
		case opLiteral:
			buf = append(buf, o.lit...)
		case opValue:
			buf = appendValue(buf, lookup(vars, o.path), o.esc)
		case opURLStart:
			urlStart = len(buf)
		case opURLEnd:
			if dangerousRaw(o.url, buf[urlStart:]) {
				buf = buf[:urlStart]
			}
		}
		if max > 0 && len(buf) > max {
			buf = buf[:max+1]
			break
		}
	}
	out := string(buf)
	if cap(buf) <= maxPooledBuffer {
		*bp = buf
		bufferPool.Put(bp)
	}
	return out
}
