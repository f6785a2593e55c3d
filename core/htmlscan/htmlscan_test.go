package htmlscan_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/postmill/postmill/core/htmlscan"
)

// written renders attrs as they appear in tag: the name, then "=" and the value between its quotes when it
// has one (an unterminated quoted value is shown closed).
func written(tag string, attrs []htmlscan.Attr) []string {
	var out []string
	for _, a := range attrs {
		s := tag[a.NameStart:a.NameEnd]
		if a.HasValue {
			q := ""
			if a.Quote != 0 {
				q = string(a.Quote)
			}
			s += "=" + q + tag[a.ValueStart:a.ValueEnd] + q
		}
		out = append(out, s)
	}
	return out
}

var attrsCases = []struct {
	tag  string
	want []string
}{
	{`<a>`, nil},
	{`<a href="x" b='y' c=z d>`, []string{`href="x"`, `b='y'`, `c=z`, `d`}},
	{`<a  HREF = "x"  >`, []string{`HREF="x"`}},
	{`<a =b c = "d"/>`, []string{`=b`, `c="d"`, ``}},
	{`<a =x href=y>`, []string{`=x`, `href=y`}},
	{`<a ==x>`, []string{`==x`}},
	{`<a b=c/>`, []string{`b=c/`}},
	{`<a href="x"/>`, []string{`href="x"`, ``}},
	{`<a/b/c=d>`, []string{``, `b`, `c=d`}},
	{`<a / b>`, []string{``, `b`}},
	{"<a\tb\n=\f'c'>", []string{`b='c'`}},
	{"<a\thref\n=\r'x'\f>", []string{`href='x'`}},
	{`<a b= >`, []string{`b`}},
	{`<a href=>`, []string{`href`}},
	{`<a b="c"d=e>`, []string{`b="c"`, `d=e`}},
	{`<a b='c'd>`, []string{`b='c'`, `d`}},
	{`<a b=c"d'e>`, []string{`b=c"d'e`}},
	{`<a b="c>d" e='f"g'>`, []string{`b="c>d"`, `e='f"g'`}},
	{`<a b="">`, []string{`b=""`}},
	{`<a href=x href=y HREF=z>`, []string{`href=x`, `href=y`, `HREF=z`}},
	{"<a h\x00ref=x>", []string{"h\x00ref=x"}},
	{`</td class=x>`, []string{`class=x`}},
	// Cut off by the end of the text, as the tokenizer reads a tag at EOF: the last value runs to the end.
	{`<a href="x"`, []string{`href="x"`}},
	{`<a href="x>`, []string{`href="x>"`}},
	{`<a href=x`, []string{`href=x`}},
	{`<a href=`, []string{`href`}},
	{`<a hr`, []string{`hr`}},
}

func TestAttrs(t *testing.T) {
	t.Parallel()
	for _, tc := range attrsCases {
		attrs := htmlscan.Attrs(tc.tag)
		checkSpans(t, tc.tag, attrs)
		if got := written(tc.tag, attrs); !slices.Equal(got, tc.want) {
			t.Errorf("Attrs(%q) = %q, want %q", tc.tag, got, tc.want)
		}
		checkAgrees(t, tc.tag)
	}
}

func TestAttrsValueWithoutQuotesOrValue(t *testing.T) {
	t.Parallel()
	tag := `<a b c=d e="f">`
	attrs := htmlscan.Attrs(tag)
	if len(attrs) != 3 {
		t.Fatalf("Attrs(%q) = %+v", tag, attrs)
	}
	if b := attrs[0]; b.HasValue || b.Quote != 0 || b.ValueStart != b.NameEnd || b.ValueEnd != b.NameEnd {
		t.Errorf("attribute without a value: %+v", b)
	}
	if c := attrs[1]; !c.HasValue || c.Quote != 0 || tag[c.ValueStart:c.ValueEnd] != "d" {
		t.Errorf("unquoted value: %+v", c)
	}
	if e := attrs[2]; !e.HasValue || e.Quote != '"' || tag[e.ValueStart:e.ValueEnd] != "f" {
		t.Errorf("quoted value: %+v", e)
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ tag, want string }{
		{`<a>`, "a"},
		{`<A HREF=x>`, "A"},
		{`<br/>`, "br"},
		{"<td\tclass=x>", "td"},
		{`</TD >`, "TD"},
		{`</p/x>`, "p"},
		{`<v:roundrect href=x>`, "v:roundrect"},
		{"<a\x00b>", "a\x00b"},
		{`<abc`, "abc"},
		{`<`, ""},
		{``, ""},
	} {
		start, end := htmlscan.Name(tc.tag)
		if got := tc.tag[start:end]; got != tc.want {
			t.Errorf("Name(%q) = %q, want %q", tc.tag, got, tc.want)
		}
	}
}

func TestDistinct(t *testing.T) {
	t.Parallel()
	many := func(n int) string {
		var b strings.Builder
		b.WriteString("<a")
		for i := range n {
			fmt.Fprintf(&b, " x%d=%d X%d=dup%d", i, i, i%7, i)
		}
		b.WriteString(">")
		return b.String()
	}
	manyWant := func(n int) []string {
		var want []string
		for i := range n {
			want = append(want, fmt.Sprintf("x%d=%d", i, i))
		}
		return want
	}
	for _, tc := range []struct {
		tag  string
		want []string // key=value
	}{
		{`<a>`, nil},
		{`<a href='x' b=y c>`, []string{"href=x", "b=y", "c="}},
		{`<a  HREF = "x"  >`, []string{"href=x"}},
		{`<a href=x href=y HREF=z>`, []string{"href=x"}},
		{`<a/b/c=d>`, []string{"b=", "c=d"}},
		{`<a =x href=y>`, []string{"=x=", "href=y"}},
		{"<a h\x00ref=x>", []string{"h\uFFFDref=x"}},
		// The tokenizer tells repeats apart before it replaces NUL, so both stay.
		{"<a h\x00ref=1 h\uFFFDref=2>", []string{"h\uFFFDref=1", "h\uFFFDref=2"}},
		// More names than Distinct compares one by one.
		{many(40), manyWant(40)},
	} {
		var got []string
		for _, a := range htmlscan.Distinct(tc.tag, htmlscan.Attrs(tc.tag)) {
			got = append(got, a.Key(tc.tag)+"="+tc.tag[a.ValueStart:a.ValueEnd])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Distinct(%q) = %q, want %q", tc.tag, got, tc.want)
		}
		checkAgrees(t, tc.tag)
	}
}

func TestLower(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"href", "href"},
		{"HREF", "href"},
		{"Data-PM-No-Track", "data-pm-no-track"},
		{"\u212A", "\u212A"}, // Kelvin sign: strings.ToLower makes it "k", the tokenizer does not
		{"\u00C9", "\u00C9"},
		{"", ""},
	} {
		if got := htmlscan.Lower(tc.in); got != tc.want {
			t.Errorf("Lower(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzAttrs keeps the scanner in step with golang.org/x/net/html: on any document, for every tag the
// tokenizer reads, Name spans the name TagName reports, Distinct lists the keys TagAttr reports in the same
// order, and each value's span holds the value TagAttr decoded wherever decoding changes nothing (no
// character reference, CR or NUL in it). On any text at all, the spans Attrs returns lie in order inside
// it. The seeds run as part of the ordinary tests.
func FuzzAttrs(f *testing.F) {
	for _, tc := range attrsCases {
		f.Add(tc.tag)
	}
	for _, seed := range []string{
		"",
		"<p>Hi</p>",
		`<html><body><a href="https://a.test/">a</a></body></html>`,
		`<A HREF=https://a.test/ /><area href='http://b.test/?a=1&amp;b=2'>`,
		`<a href="https://x.test/" href="https://y.test/" data-pm-no-track>`,
		`<a =x href=y><a/href="https://z.test/"><a href=>`,
		`<script><a href="https://s.test/"></script><a href="https://t.test/">`,
		`<a title="a>b" href="https://a.test/?q=<x>">1</a>`,
		"<a h\x00ref=https://n.test/ href\x00=https://m.test/>",
		"<plaintext><a href=https://p.test/>",
		`<p>Hello {{ user.firstName }},</p><a href="{{ url }}">open</a>`,
		`<a href={{url}} title=x>go</a>`,
		`<{{x}}a href="javascript:1">`,
		`<!--[if mso]><v:roundrect href="{{url}}">{{name}}</v:roundrect><![endif]-->`,
		`<svg><style><a title="</style>" href="{{x}}">`,
		`<iframe srcdoc="{{x}}"></iframe>`,
		`<p title='{{x}}'>{{x}}</p>`,
		"<A srC=dAtA:imAge/png\x00>",
		"<A \x00>",
		"<A HREF=https://",
		"</A B=c></a\x00 d><a\x00 b>",
		"<a b=\"c\r\nd\" e=&amp; f=\x00>",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		checkAgrees(t, doc)
		checkSpans(t, doc, htmlscan.Attrs(doc))
	})
}

// checkAgrees fails unless Name, Attrs and Distinct read every tag of doc as the tokenizer does.
func checkAgrees(tb testing.TB, doc string) {
	tb.Helper()
	z := html.NewTokenizer(strings.NewReader(doc))
	off := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return
		}
		n := len(z.Raw())
		if off+n > len(doc) || string(z.Raw()) != doc[off:off+n] {
			tb.Fatalf("raw token %q is not the %d bytes at %d of %q", z.Raw(), n, off, doc)
		}
		raw := doc[off : off+n]
		off += n
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken && tt != html.EndTagToken {
			continue
		}
		start, end := htmlscan.Name(raw)
		name, _ := z.TagName()
		if got := htmlscan.Lower(strings.ReplaceAll(raw[start:end], "\x00", "\uFFFD")); got != string(name) {
			tb.Fatalf("tag %q: Name gives %q, the tokenizer %q", raw, got, name)
		}
		attrs := htmlscan.Attrs(raw)
		checkSpans(tb, raw, attrs)
		if tt == html.EndTagToken {
			continue // the tokenizer reads an end tag's attributes but does not report them
		}
		var mine, theirs []string
		for _, a := range htmlscan.Distinct(raw, attrs) {
			mine = append(mine, a.Key(raw)+"="+raw[a.ValueStart:a.ValueEnd])
		}
		for {
			key, val, more := z.TagAttr()
			if key == nil {
				break
			}
			theirs = append(theirs, string(key)+"="+string(val))
			if !more {
				break
			}
		}
		if len(mine) != len(theirs) {
			tb.Fatalf("tag %q: Distinct gives %q, the tokenizer %q", raw, mine, theirs)
		}
		for i := range mine {
			myKey, myVal, _ := strings.Cut(mine[i], "=")
			key, val, _ := strings.Cut(theirs[i], "=")
			if myKey != key || !strings.ContainsAny(myVal, "&\r\x00") && myVal != val {
				tb.Fatalf("tag %q: Distinct gives %q, the tokenizer %q", raw, mine, theirs)
			}
		}
	}
}

// checkSpans fails unless every span of attrs lies inside tag, after the name and after the attribute
// before it, with the quote it claims around the value.
func checkSpans(tb testing.TB, tag string, attrs []htmlscan.Attr) {
	tb.Helper()
	start, end := htmlscan.Name(tag)
	if start < 0 || start > end || end > len(tag) {
		tb.Fatalf("Name(%q) = %d, %d", tag, start, end)
	}
	prev := end
	for i, a := range attrs {
		if !(prev <= a.NameStart && a.NameStart <= a.NameEnd && a.NameEnd <= a.ValueStart &&
			a.ValueStart <= a.ValueEnd && a.ValueEnd <= len(tag)) {
			tb.Fatalf("Attrs(%q)[%d] = %+v out of order (previous span ends at %d)", tag, i, a, prev)
		}
		switch {
		case !a.HasValue:
			if a.Quote != 0 || a.ValueStart != a.NameEnd || a.ValueEnd != a.NameEnd {
				tb.Fatalf("Attrs(%q)[%d] = %+v: no value but a value span", tag, i, a)
			}
		case a.Quote != 0:
			if a.Quote != '"' && a.Quote != '\'' || tag[a.ValueStart-1] != a.Quote ||
				a.ValueEnd < len(tag) && tag[a.ValueEnd] != a.Quote {
				tb.Fatalf("Attrs(%q)[%d] = %+v: quote not around the value", tag, i, a)
			}
		}
		prev = a.ValueEnd
	}
}
