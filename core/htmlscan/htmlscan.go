// Package htmlscan locates the name and the attributes of one HTML tag inside the tag's raw text, as byte
// offsets.
//
// Postmill reads HTML with golang.org/x/net/html, the WHATWG tokenizer, and changes it by splicing bytes: the
// template engine puts values into attribute values, and click tracking replaces href values, both keeping
// every other byte the sender wrote. The tokenizer gives each tag's raw text (Raw) and its decoded
// attributes (TagAttr) but not where in the raw text an attribute's value is. This package finds those
// offsets by following, state for state, the tokenizer's tag reading (readTagName, readTagAttrKey,
// readTagAttrVal; WHATWG HTML §13.2.5.8 and §13.2.5.32–§13.2.5.40): a span that differed from what the
// tokenizer read would splice into the wrong place, or into a place a browser reads differently from the
// analysis that decided the splice was safe.
//
// A mirror can drift when golang.org/x/net changes, so it is checked rather than trusted: FuzzAttrs
// tokenizes any document with html.NewTokenizer and requires, for every tag, the same name, the same
// attributes in the same order (after Distinct) and, where the tokenizer does not decode them, the same
// value bytes. Its seeds run with the ordinary tests, so an upgrade that changes the tokenizer's reading
// fails them.
package htmlscan

import "strings"

// Attr is one attribute of a tag, as offsets into the tag's raw text.
type Attr struct {
	// NameStart and NameEnd delimit the name as written: any letter case, possibly empty (a "/" between
	// attributes reads as an attribute with an empty name), possibly beginning with "=" (§13.2.5.32).
	NameStart, NameEnd int
	// ValueStart and ValueEnd delimit the value as written: inside the quotes if any, character references
	// not decoded. Without a value both are NameEnd.
	ValueStart, ValueEnd int
	// Quote is '"' or '\'' for a quoted value and 0 for an unquoted one or none; a splice that makes a
	// value longer must know whether a space would end it.
	Quote byte
	// HasValue is false for an attribute with no "=" or with nothing but whitespace between "=" and ">":
	// such an attribute's value is empty and has no place in the text to splice into.
	HasValue bool
}

// Name returns the byte span of the tag name within tag, the raw text of a start tag ("<a …>") or an end
// tag ("</a …>") as the tokenizer returns it. The name ends at whitespace, "/" or ">" (§13.2.5.8); the
// tokenizer lower-cases ASCII letters and turns NUL into U+FFFD in what it reports.
func Name(tag string) (start, end int) {
	start = min(1, len(tag))
	if len(tag) > 1 && tag[1] == '/' {
		start = 2
	}
	end = start
	for end < len(tag) && !isSpace(tag[end]) && tag[end] != '/' && tag[end] != '>' {
		end++
	}
	return start, end
}

// Attrs lists every attribute of tag, the raw text of a start or end tag, in document order, including
// those the tokenizer does not report: empty names and repeated ones (Distinct removes them). A tag cut off
// by the end of the text reads as the tokenizer reads it up to there: the last name or value runs to the
// end.
func Attrs(tag string) []Attr {
	_, j := Name(tag)
	var attrs []Attr
	for {
		j = skipSpace(tag, j)
		if j >= len(tag) || tag[j] == '>' {
			return attrs
		}
		a := Attr{NameStart: j}
		for ; j < len(tag); j++ {
			c := tag[j]
			if c == '=' && j == a.NameStart {
				continue // §13.2.5.32: an "=" where a name would start is part of the name
			}
			if c == '=' || c == '/' || c == '>' || isSpace(c) {
				break
			}
		}
		a.NameEnd, a.ValueStart, a.ValueEnd = j, j, j
		j = skipSpace(tag, j)
		if j >= len(tag) || tag[j] != '=' {
			if j < len(tag) && tag[j] == '/' {
				j++ // §13.2.5.34: "/" after a name is consumed (the self-closing start tag state)
			}
			attrs = append(attrs, a)
			continue
		}
		j = skipSpace(tag, j+1)
		if j >= len(tag) || tag[j] == '>' {
			attrs = append(attrs, a) // §13.2.5.35: "=" then ">" is a missing value
			continue
		}
		a.HasValue = true
		switch q := tag[j]; q {
		case '"', '\'':
			a.Quote, a.ValueStart = q, j+1
			if k := strings.IndexByte(tag[j+1:], q); k >= 0 {
				a.ValueEnd = j + 1 + k
				j = a.ValueEnd + 1
			} else {
				a.ValueEnd, j = len(tag), len(tag)
			}
		default:
			a.ValueStart = j
			for j < len(tag) && !isSpace(tag[j]) && tag[j] != '>' {
				j++
			}
			a.ValueEnd = j
		}
		attrs = append(attrs, a)
	}
}

// linearMax is how many distinct names Distinct compares one by one before it switches to a map: tags
// have a handful of attributes, and a crafted tag with thousands must not cost a comparison per pair.
const linearMax = 16

// Distinct returns the attributes of a start tag that the tokenizer reports, in its order, so that the i-th
// of them is the i-th pair TagAttr returns: those with a non-empty name, and of names equal but for ASCII
// letter case the first (a repeated attribute is a parse error and is dropped, §13.2.5.33). It reuses the
// storage of attrs, which the caller must not use afterwards.
func Distinct(tag string, attrs []Attr) []Attr {
	out := attrs[:0]
	var seen map[string]bool // lower-cased names, once out is longer than linearMax
	for _, a := range attrs {
		name := tag[a.NameStart:a.NameEnd]
		if name == "" {
			continue
		}
		if seen == nil && len(out) == linearMax {
			seen = make(map[string]bool, 2*linearMax)
			for _, k := range out {
				seen[Lower(tag[k.NameStart:k.NameEnd])] = true
			}
		}
		if seen != nil {
			lower := Lower(name)
			if seen[lower] {
				continue
			}
			seen[lower] = true
		} else if repeats(tag, out, name) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// repeats reports whether name equals the name of one of kept but for ASCII letter case.
func repeats(tag string, kept []Attr, name string) bool {
	for _, k := range kept {
		if equalFoldASCII(tag[k.NameStart:k.NameEnd], name) {
			return true
		}
	}
	return false
}

// Key returns the attribute's name as the tokenizer's TagAttr reports it: NUL turned into U+FFFD, ASCII
// letters lower-cased.
func (a Attr) Key(tag string) string {
	return Lower(strings.ReplaceAll(tag[a.NameStart:a.NameEnd], "\x00", "\uFFFD"))
}

// Lower lower-cases ASCII letters only, as the tokenizer does with tag and attribute names (§13.2.5.8,
// §13.2.5.33): strings.ToLower would also map the Kelvin sign to "k". A name already in lower case is
// returned as it is, without a copy.
func Lower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = lowerByte(b[j])
			}
			return string(b)
		}
	}
	return s
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerByte(a[i]) != lowerByte(b[i]) {
			return false
		}
	}
	return true
}

// isSpace reports ASCII whitespace as the tokenizer's tag states know it: tab, LF, FF, CR and space.
func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f'
}

func skipSpace(s string, j int) int {
	for j < len(s) && isSpace(s[j]) {
		j++
	}
	return j
}
