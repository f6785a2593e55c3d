package template

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// placeholder is one "{{ ... }}" of a template source.
type placeholder struct {
	start, end int      // byte offsets of the opening "{{" and just past the closing braces
	path       []string // the identifier's segments; nil when the content is not a bare identifier
}

// scanPlaceholders finds the placeholders of src, left to right. An opening "{{" pairs with the first "}}"
// after it ("{{{" with the first "}}}", when there is one); once an opening has no closing, none after it
// has one either, so the rest is literal.
func scanPlaceholders(src string) []placeholder {
	var out []placeholder
	for i := 0; ; {
		k := strings.Index(src[i:], "{{")
		if k < 0 {
			return out
		}
		open := i + k
		if open+2 < len(src) && src[open+2] == '{' {
			if c := strings.Index(src[open+3:], "}}}"); c >= 0 {
				end := open + 3 + c + 3
				out = append(out, placeholder{start: open, end: end})
				i = end
				continue
			}
		}
		c := strings.Index(src[open+2:], "}}")
		if c < 0 {
			return out
		}
		end := open + 2 + c + 2
		out = append(out, placeholder{start: open, end: end, path: parsePath(src[open+2 : end-2])})
		i = end
	}
}

// parsePath returns the segments of a bare dotted identifier surrounded by optional ASCII whitespace, or nil
// when inner is anything else.
func parsePath(inner string) []string {
	inner = strings.Trim(inner, " \t\n\f\r")
	if inner == "" {
		return nil
	}
	segments := strings.Split(inner, ".")
	for _, s := range segments {
		if !isSegment(s) {
			return nil
		}
	}
	return segments
}

// isSegment reports whether s matches [A-Za-z_][A-Za-z0-9_]*.
func isSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// lookup resolves path against vars through nested JSON objects; nil when any step is missing or is not an
// object.
func lookup(vars map[string]any, path []string) any {
	v, ok := vars[path[0]]
	for _, key := range path[1:] {
		if !ok {
			return nil
		}
		switch m := v.(type) {
		case map[string]any:
			v, ok = m[key]
		case map[string]string:
			var s string
			s, ok = m[key]
			v = s
		default:
			return nil
		}
	}
	if !ok {
		return nil
	}
	return v
}

// escaper selects how a substituted value is written.
type escaper uint8

const (
	// escHTML is html.EscapeString's escaping.
	escHTML escaper = iota
	// escComment also escapes "-" and "!", so a value inside an HTML comment cannot end it ("-->", "--!>").
	escComment
	// escSubject is escHTML with CR and LF turned into spaces: a header field cannot carry them.
	escSubject
)

// appendValue appends the text of a resolved variable to dst, escaped. Only scalars have a text: a missing
// variable, null, an array, an object or any other Go type appends nothing.
func appendValue(dst []byte, v any, esc escaper) []byte {
	switch x := v.(type) {
	case string:
		return appendEscaped(dst, x, esc)
	case json.Number:
		return appendEscaped(dst, string(x), esc)
	case float64:
		return appendNumber(dst, x, 64)
	case float32:
		return appendNumber(dst, float64(x), 32)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int8:
		return strconv.AppendInt(dst, int64(x), 10)
	case int16:
		return strconv.AppendInt(dst, int64(x), 10)
	case int32:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint64:
		return strconv.AppendUint(dst, x, 10)
	case bool:
		return strconv.AppendBool(dst, x)
	}
	return dst
}

// appendNumber prints a JSON number the way JavaScript's Number#toString does in the common range: integers
// without a fraction, fractions in the shortest form that reads back the same, and exponent notation only
// for magnitudes from 1e21 up or below 1e-6. Its characters (digits, ".", "-", "+", "e", "NaN", "Inf") need
// no escaping in any context.
func appendNumber(dst []byte, f float64, bits int) []byte {
	if f == 0 {
		return append(dst, '0') // also for -0, which JavaScript prints as 0
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		return strconv.AppendFloat(dst, f, 'g', -1, bits)
	}
	return strconv.AppendFloat(dst, f, 'f', -1, bits)
}

// appendEscaped appends s escaped for esc. It writes the same entities as html.EscapeString, without the
// intermediate string.
func appendEscaped(dst []byte, s string, esc escaper) []byte {
	last := 0
	for i := 0; i < len(s); i++ {
		var rep string
		switch s[i] {
		case '&':
			rep = "&amp;"
		case '<':
			rep = "&lt;"
		case '>':
			rep = "&gt;"
		case '"':
			rep = "&#34;"
		case '\'':
			rep = "&#39;"
		case '-':
			if esc != escComment {
				continue
			}
			rep = "&#45;"
		case '!':
			if esc != escComment {
				continue
			}
			rep = "&#33;"
		case '\r', '\n':
			if esc != escSubject {
				continue
			}
			rep = " "
		default:
			continue
		}
		dst = append(dst, s[last:i]...)
		dst = append(dst, rep...)
		last = i + 1
	}
	return append(dst, s[last:]...)
}
