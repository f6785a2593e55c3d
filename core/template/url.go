package template

import (
	"html"
	"strings"
)

// urlKind says how an attribute's value carries URLs.
type urlKind uint8

const (
	urlNone   urlKind = iota
	urlSingle         // the whole value is one URL
	urlList           // several URLs and descriptors: every item separated by ",", ";" or whitespace is checked
)

// urlAttrs are the attributes whose value a browser or mail client may load or navigate to, on any element:
// HTML's URL attributes (WHATWG HTML §2.4, §4.8, §4.10), obsolete ones that clients still honour
// (background, longdesc, lowsrc, dynsrc, profile, icon, codebase, classid), and SVG animation values
// (SVG 1.1 §19.2.9), which can set an href to a javascript: URL.
var urlAttrs = map[string]urlKind{
	"href":        urlSingle,
	"src":         urlSingle,
	"action":      urlSingle,
	"formaction":  urlSingle,
	"background":  urlSingle,
	"poster":      urlSingle,
	"cite":        urlSingle,
	"longdesc":    urlSingle,
	"data":        urlSingle,
	"codebase":    urlSingle,
	"classid":     urlSingle,
	"manifest":    urlSingle,
	"profile":     urlSingle,
	"icon":        urlSingle,
	"lowsrc":      urlSingle,
	"dynsrc":      urlSingle,
	"xml:base":    urlSingle,
	"to":          urlSingle,
	"from":        urlSingle,
	"by":          urlSingle,
	"values":      urlList,
	"srcset":      urlList,
	"imagesrcset": urlList,
	"ping":        urlList,
	"archive":     urlList,
}

// urlAttrKind classifies attribute attr (lower-case) of element tag (lower-case). A namespaced *:href
// (xlink:href) is an href. A <meta>'s content is a list: http-equiv="refresh" turns it into a redirect
// ("0; url=..."), and the http-equiv may itself come from a variable.
func urlAttrKind(tag, attr string) urlKind {
	if k, ok := urlAttrs[attr]; ok {
		return k
	}
	if strings.HasSuffix(attr, ":href") {
		return urlSingle
	}
	if tag == "meta" && attr == "content" {
		return urlList
	}
	return urlNone
}

// dangerousRaw reports whether an attribute value as written in the HTML (character references not yet
// decoded) carries a dangerous URL for kind.
func dangerousRaw[T ~string | ~[]byte](kind urlKind, raw T) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] == '&' {
			return dangerousDecoded(kind, html.UnescapeString(string(raw)))
		}
	}
	return dangerousDecoded(kind, raw)
}

// dangerousDecoded reports whether a decoded attribute value carries a dangerous URL for kind. A list's items
// may also be written url=... or quoted, as a refresh's URL is (WHATWG HTML §4.2.5.3).
func dangerousDecoded[T ~string | ~[]byte](kind urlKind, v T) bool {
	if kind != urlList {
		return dangerousScheme(v)
	}
	start := 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) && !isListSeparator(v[i]) {
			continue
		}
		if item := v[start:i]; len(item) > 0 && dangerousScheme(trimRefreshPrefix(item)) {
			return true
		}
		start = i + 1
	}
	return false
}

func isListSeparator(c byte) bool {
	switch c {
	case ',', ';', ' ', '\t', '\n', '\f', '\r':
		return true
	}
	return false
}

// trimRefreshPrefix removes a leading "url=" (any case) and an opening quote from a list item.
func trimRefreshPrefix[T ~string | ~[]byte](item T) T {
	if len(item) >= 4 && lower(item[0]) == 'u' && lower(item[1]) == 'r' && lower(item[2]) == 'l' && item[3] == '=' {
		item = item[4:]
	}
	if len(item) > 0 && (item[0] == '\'' || item[0] == '"') {
		item = item[1:]
	}
	return item
}

// maxSchemeProbe bounds how much of a value dangerousScheme reads: "data:image/x-icon" and its terminator
// are the longest prefix it needs.
const maxSchemeProbe = 32

// dangerousScheme reports whether decoded URL v starts with javascript:, vbscript: or a data: URL that is
// not a raster image, ignoring ASCII whitespace and control characters anywhere (browsers strip leading
// ones and tabs and newlines inside a URL, WHATWG URL §4.4) and ASCII case. NUL is the exception: the HTML
// tokenizer turns it into U+FFFD before any URL is parsed (§13.2.5.36-38), so it counts as a character,
// and "data:image/png" followed by NUL is not a PNG.
func dangerousScheme[T ~string | ~[]byte](v T) bool {
	var probe [maxSchemeProbe]byte
	n := 0
	for i := 0; i < len(v) && n < len(probe); i++ {
		c := v[i]
		switch {
		case c == 0:
			c = 0xff // stands for U+FFFD: matches no scheme or media type character
		case c <= ' ' || c == 0x7f:
			continue
		}
		probe[n] = lower(c)
		n++
	}
	p := string(probe[:n]) // does not escape: the compiler keeps it on the stack
	switch {
	case strings.HasPrefix(p, "javascript:"), strings.HasPrefix(p, "vbscript:"):
		return true
	case strings.HasPrefix(p, "data:"):
		return !rasterImage(p[len("data:"):])
	}
	return false
}

// rasterImages are the data: media types allowed in a URL attribute: images that cannot carry script.
var rasterImages = []string{
	"image/png", "image/gif", "image/jpeg", "image/jpg", "image/webp", "image/bmp", "image/avif", "image/x-icon",
}

// rasterImage reports whether a data: URL's remainder (lower-case) starts with an allowed media type that is
// complete: followed by ";" (parameters, base64), "," (the data) or nothing.
func rasterImage(rest string) bool {
	for _, t := range rasterImages {
		if strings.HasPrefix(rest, t) {
			if len(rest) == len(t) || rest[len(t)] == ';' || rest[len(t)] == ',' {
				return true
			}
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
