package template

import (
	"sort"
	"strings"

	"golang.org/x/net/html"

	"github.com/postmill/postmill/core/htmlscan"
)

// sentinel stands in for a placeholder while the HTML is tokenized: one character from the Private Use Area
// that the tokenizer treats like any other non-ASCII character (part of a name, a value or text, never
// markup). A literal U+E000 in a template is harmless: placeholders are located by offset, not by search.
const sentinel = "\uE000"

// maxPasses bounds the analyse-again loop of compileHTML. Real templates settle in one or two passes; a
// source built to cascade is analysed once more with every placeholder rendering empty.
const maxPasses = 16

// Raw-text elements, whose content the tokenizer does not parse as markup (WHATWG HTML §13.1.2), and the
// kinds of their content.
const (
	textData      = iota // ordinary text: markup starts at "<"
	textRaw              // RAWTEXT or RCDATA: only the element's own end tag ends it
	textScript           // script data, which also has the "<!--" escape states
	textPlaintext        // everything to the end of the document
)

var rawTextElements = map[string]int{
	"iframe": textRaw, "noembed": textRaw, "noframes": textRaw, "noscript": textRaw, "style": textRaw,
	"textarea": textRaw, "title": textRaw, "xmp": textRaw, "script": textScript, "plaintext": textPlaintext,
}

// ambiguityElements start content whose tokenization a browser's tree construction may change: inside SVG
// and MathML a <style> or <title> is not raw text and CDATA sections exist (WHATWG HTML §13.2.6.5); inside
// <select> and <frameset> some raw-text start tags are ignored. From the first of them on, Compile requires
// the constructs to read the same either way.
var ambiguityElements = map[string]bool{"svg": true, "math": true, "select": true, "frameset": true}

// mark is a sentinel in the analysed source.
type mark struct {
	off  int      // byte offset of the sentinel
	ph   int      // index of its placeholder
	path []string // its identifier
}

// origin maps analysed offsets from a to the source offset o.
type origin struct{ a, o int }

// analysed is a template's HTML with every live placeholder replaced by the sentinel and every other one
// removed: exactly what Render writes, with values still to come.
type analysed struct {
	s       string
	marks   []mark
	origins []origin
}

func buildAnalysed(src string, phs []placeholder, live []bool) analysed {
	var (
		b   strings.Builder
		out analysed
	)
	b.Grow(len(src))
	last := 0
	for i, p := range phs {
		out.origins = append(out.origins, origin{a: b.Len(), o: last})
		b.WriteString(src[last:p.start])
		if live[i] {
			out.origins = append(out.origins, origin{a: b.Len(), o: p.start})
			out.marks = append(out.marks, mark{off: b.Len(), ph: i, path: p.path})
			b.WriteString(sentinel)
		}
		last = p.end
	}
	out.origins = append(out.origins, origin{a: b.Len(), o: last})
	b.WriteString(src[last:])
	out.s = b.String()
	return out
}

// sourceOffset maps an offset of the analysed text back to the template source.
func (a *analysed) sourceOffset(off int) int {
	i := sort.Search(len(a.origins), func(i int) bool { return a.origins[i].a > off }) - 1
	if i < 0 {
		return off
	}
	return a.origins[i].o + off - a.origins[i].a
}

// compileHTML analyses src until no placeholder has to be removed, then returns the ops of that analysis.
func compileHTML(src string) (*Compiled, error) {
	phs := scanPlaceholders(src)
	live := make([]bool, len(phs))
	for i, p := range phs {
		live[i] = p.path != nil
	}
	for pass := 0; ; pass++ {
		if pass == maxPasses {
			clear(live)
		}
		a := buildAnalysed(src, phs, live)
		r := analyse(&a)
		if len(r.remove) > 0 {
			for _, m := range r.remove {
				live[a.marks[m].ph] = false
			}
			continue
		}
		if r.err != nil {
			line, col := position(src, a.sourceOffset(r.errAt))
			r.err.Line, r.err.Column = line, col
			return nil, r.err
		}
		return r.ops.compiled(HTML), nil
	}
}

// analysis is the result of one pass over an analysed text.
type analysis struct {
	a         *analysed
	ops       opBuilder
	remove    []int // indices into a.marks of placeholders that must render empty
	err       *SyntaxError
	errAt     int
	ambiguous bool
}

func (r *analysis) fail(at int, msg string) {
	if r.err == nil {
		r.err, r.errAt = &SyntaxError{Msg: msg}, at
	}
}

// analyse tokenizes a.s once, records the placeholders that must render empty and, for the case where there
// are none, the ops that render it.
func analyse(a *analysed) *analysis {
	r := &analysis{a: a}
	z := html.NewTokenizer(strings.NewReader(a.s))
	pos, mi := 0, 0
	rawKind, rawTag := textData, ""
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			// The tokenizer stops at the end of the input; what is left is a tag cut off by it, which a
			// browser drops (WHATWG HTML §13.2.5, eof-in-tag). So does Render.
			for ; mi < len(a.marks); mi++ {
				r.remove = append(r.remove, mi)
			}
			return r
		}
		end := pos + len(z.Raw())
		mj := mi
		for mj < len(a.marks) && a.marks[mj].off < end {
			mj++
		}
		switch tt {
		case html.TextToken:
			kind := textData
			if rawTag != "" {
				kind = rawKind
				if lt := strings.IndexByte(a.s[pos:end], '<'); r.ambiguous && lt >= 0 {
					r.fail(pos+lt, "the content of <"+rawTag+"> must not contain \"<\" after an <svg>, <math>, "+
						"<select> or <frameset> tag: a browser may read it as markup or as text")
				}
			}
			r.text(pos, end, mi, mj, kind)
		case html.CommentToken:
			raw := a.s[pos:end]
			if strings.HasPrefix(raw, "<!--") {
				r.comment(pos, end, mi, mj)
				break
			}
			if r.ambiguous && strings.HasPrefix(raw, "<![CDATA[") && !strings.HasSuffix(raw, "]]>") {
				r.fail(pos, "a CDATA section after an <svg>, <math>, <select> or <frameset> tag must not "+
					"contain \">\" before its closing \"]]>\"")
			}
			r.opaque(pos, end, mi, mj)
		case html.DoctypeToken:
			r.opaque(pos, end, mi, mj)
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			name := r.tag(pos, end, mi, mj, tt == html.EndTagToken)
			rawTag = ""
			if tt != html.EndTagToken {
				if k, ok := rawTextElements[name]; ok {
					rawKind, rawTag = k, name
				}
				if ambiguityElements[name] {
					r.ambiguous = true
				}
			}
			pos, mi = end, mj
			continue
		}
		rawTag = ""
		pos, mi = end, mj
	}
}

// runs calls f for each run of adjacent marks in a.marks[mi:mj]: their values concatenate, so a run acts as
// one placeholder.
func (r *analysis) runs(mi, mj int, f func(first, last int)) {
	for first := mi; first < mj; {
		last := first
		for last+1 < mj && r.a.marks[last+1].off == r.a.marks[last].off+len(sentinel) {
			last++
		}
		f(first, last)
		first = last + 1
	}
}

func (r *analysis) removeRun(first, last int) {
	for m := first; m <= last; m++ {
		r.remove = append(r.remove, m)
	}
}

// around returns the bytes just before and just after a run (0 at either end of the text).
func (r *analysis) around(first, last int) (prev, next byte) {
	s := r.a.s
	if start := r.a.marks[first].off; start > 0 {
		prev = s[start-1]
	}
	if end := r.a.marks[last].off + len(sentinel); end < len(s) {
		next = s[end]
	}
	return prev, next
}

// text handles a text token: placeholders are substituted unless a value, or its absence, could turn the
// text around it into markup.
func (r *analysis) text(pos, end, mi, mj, kind int) {
	// tagOpen tracks, from pos up to scanned, whether the text ends with "<" followed only by characters
	// that can continue a tag name or markup declaration: one pass over the token, however many runs.
	tagOpen, scanned := false, pos
	r.runs(mi, mj, func(first, last int) {
		prev, next := r.around(first, last)
		switch kind {
		case textData:
			// "<" followed by a letter, "/", "!" or "?" opens a tag, end tag or comment (§13.2.5.6);
			// with the sentinel after it, the tokenizer took the "<" for text.
			if prev == '<' {
				r.removeRun(first, last)
			}
		default:
			// Raw text ends at "</" and the element's name (§13.2.5.9-11); script data also changes
			// state at "<!--", "<script" and "-->" (§13.2.5.15-30).
			for start := r.a.marks[first].off; scanned < start; scanned++ {
				tagOpen = continuesTag(r.a.s[scanned], tagOpen)
			}
			if tagOpen || kind == textScript && (prev == '-' || next == '-' || next == '>') {
				r.removeRun(first, last)
			}
		}
	})
	r.emit(pos, end, mi, mj, escHTML)
}

// continuesTag says whether, after byte c, the text still ends with "<" and characters that can continue a
// tag name or markup declaration (letters, digits, "/", "!", "?", "-"; any non-ASCII byte, which includes
// the sentinels, counts as a letter), given whether it did before c.
func continuesTag(c byte, open bool) bool {
	switch {
	case c == '<':
		return true
	case c >= 0x80, 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
		c == '/', c == '!', c == '?', c == '-':
		return open
	}
	return false
}

// comment handles a "<!--" comment: values are escaped so that they cannot end it, and a placeholder next
// to "-", "!" or ">" renders empty since its absence could join the text around it into an end
// (§13.2.5.43-52: "-->", "--!>", and "<!-->" or "<!--->" at the start).
func (r *analysis) comment(pos, end, mi, mj int) {
	r.runs(mi, mj, func(first, last int) {
		prev, next := r.around(first, last)
		if prev == '-' || prev == '!' || next == '-' || next == '!' || next == '>' {
			r.removeRun(first, last)
		}
	})
	r.emit(pos, end, mi, mj, escComment)
}

// opaque handles a doctype or a bogus comment: nothing in it is substituted.
func (r *analysis) opaque(pos, end, mi, mj int) {
	for m := mi; m < mj; m++ {
		r.remove = append(r.remove, m)
	}
	r.ops.literal(r.a.s[pos:end])
}

// emit writes text from pos to end with the marks in it as values.
func (r *analysis) emit(pos, end, mi, mj int, esc escaper) {
	s := r.a.s
	for m := mi; m < mj; m++ {
		off := r.a.marks[m].off
		r.ops.literal(s[pos:off])
		r.ops.value(r.phPath(m), esc)
		pos = off + len(sentinel)
	}
	r.ops.literal(s[pos:end])
}

// phPath is the identifier of mark m. Every live placeholder has one.
func (r *analysis) phPath(m int) []string { return r.a.marks[m].path }

// tag handles a start, self-closing or end tag and returns its lower-case name. Placeholders are substituted
// only in a start tag's attribute values (not srcdoc's, which is a whole document); URL attribute values
// are checked now when literal and by Render when they hold placeholders; a value holding placeholders is
// quoted if it was not.
func (r *analysis) tag(pos, end, mi, mj int, endTag bool) string {
	t := r.a.s[pos:end]
	nameStart, nameEnd := htmlscan.Name(t)
	attrs := htmlscan.Attrs(t)
	name := htmlscan.Lower(t[nameStart:nameEnd])

	// Which marks are in a value that takes them.
	m := mi
	for _, at := range attrs {
		if !at.HasValue {
			continue
		}
		for m < mj && r.a.marks[m].off-pos < at.ValueStart {
			r.remove = append(r.remove, m)
			m++
		}
		substitutes := !endTag && htmlscan.Lower(t[at.NameStart:at.NameEnd]) != "srcdoc"
		for m < mj && r.a.marks[m].off-pos < at.ValueEnd {
			if !substitutes {
				r.remove = append(r.remove, m)
			}
			m++
		}
	}
	for ; m < mj; m++ {
		r.remove = append(r.remove, m)
	}
	if endTag {
		r.ops.literal(t)
		return name
	}

	m, cur := mi, 0
	for _, at := range attrs {
		if !at.HasValue {
			continue
		}
		for m < mj && r.a.marks[m].off-pos < at.ValueStart {
			m++ // in a name: removed above
		}
		first := m
		for m < mj && r.a.marks[m].off-pos < at.ValueEnd {
			m++
		}
		kind := urlAttrKind(name, htmlscan.Lower(t[at.NameStart:at.NameEnd]))
		value := t[at.ValueStart:at.ValueEnd]
		if first == m {
			if kind != urlNone && dangerousRaw(kind, value) {
				r.ops.literal(t[cur:at.ValueStart])
				if at.Quote == 0 {
					r.ops.literal(`""`)
				}
				cur = at.ValueEnd
			}
			continue
		}
		r.ops.literal(t[cur:at.ValueStart])
		if at.Quote == 0 {
			r.ops.literal(`"`)
		}
		if kind != urlNone {
			r.ops.urlStart()
		}
		off := at.ValueStart
		for k := first; k < m; k++ {
			rel := r.a.marks[k].off - pos
			r.attrLiteral(t[off:rel], at.Quote)
			r.ops.value(r.phPath(k), escHTML)
			off = rel + len(sentinel)
		}
		r.attrLiteral(t[off:at.ValueEnd], at.Quote)
		if kind != urlNone {
			r.ops.urlEnd(kind)
		}
		if at.Quote == 0 {
			r.ops.literal(`"`)
		}
		cur = at.ValueEnd
	}
	r.ops.literal(t[cur:])
	return name
}

// attrLiteral writes literal text of an attribute value; in a value that was unquoted and is now double
// quoted, a '"' (a parse error, but part of the value) becomes a character reference.
func (r *analysis) attrLiteral(s string, quote byte) {
	if quote == 0 && strings.Contains(s, `"`) {
		s = strings.ReplaceAll(s, `"`, "&quot;")
	}
	r.ops.literal(s)
}
