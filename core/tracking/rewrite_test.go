package tracking

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

func params(open, click bool) RewriteParams {
	return RewriteParams{OrganizationID: orgID, MessageID: msgID, RecipientID: rcpID, Domain: "Example.ORG",
		Open: open, Click: click}
}

// trackingURL matches what Rewrite writes for the domain example.org.
var trackingURL = regexp.MustCompile(`(https?)://track\.example\.org/t/([oc])/([A-Za-z0-9_-]+)`)

const pixelMarkup = `<img src="{o}" width="1" height="1" alt="" style="display:none;border:0;width:1px;height:1px" />`

// MustPlaceholders checks every tracking URL in out (scheme, kind, ids, and for clicks the digest of the
// link at the token's index among links) and returns out with each replaced by {o} or {c<index>}, so tests
// can compare the rest byte for byte.
func MustPlaceholders(tb testing.TB, tr *Tracker, out string, links []string) string {
	tb.Helper()
	return trackingURL.ReplaceAllStringFunc(out, func(m string) string {
		sub := trackingURL.FindStringSubmatch(m)
		if sub[1] != tr.scheme {
			tb.Errorf("tracking URL %q: scheme %q, want %q", m, sub[1], tr.scheme)
		}
		tok, err := tr.Decode(sub[3])
		if err != nil {
			tb.Fatalf("tracking URL %q: %v", m, err)
		}
		if tok.OrganizationID != orgID || tok.MessageID != msgID || tok.RecipientID != rcpID || tok.Kind != sub[2][0] {
			tb.Errorf("tracking URL %q names %+v", m, tok)
		}
		if tok.Kind == KindOpen {
			return "{o}"
		}
		if tok.LinkIndex >= len(links) || LinkDigest(links[tok.LinkIndex]) != tok.LinkDigest {
			tb.Errorf("click token %d does not name a link of %q", tok.LinkIndex, links)
		}
		return fmt.Sprintf("{c%d}", tok.LinkIndex)
	})
}

func TestRewrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		in          string
		open, click bool
		want        string   // with {o} and {c<i>} for the tracking URLs
		links       []string // Links(in)
	}{
		{name: "pixel before </body>", open: true,
			in:   "<html><body><p>Hi</p></body></html>",
			want: "<html><body><p>Hi</p>" + pixelMarkup + "</body></html>"},
		{name: "pixel before an upper-case </BODY >", open: true,
			in:   "<HTML><BODY><P>Hi</P></BODY ></HTML>",
			want: "<HTML><BODY><P>Hi</P>" + pixelMarkup + "</BODY ></HTML>"},
		{name: "pixel before the last </body>", open: true,
			in:   "<body>a</body>b</body>\n",
			want: "<body>a</body>b" + pixelMarkup + "</body>\n"},
		{name: "pixel before </html> without </body>", open: true,
			in:   "<html><p>Hi</p></html>\n",
			want: "<html><p>Hi</p>" + pixelMarkup + "</html>\n"},
		{name: "pixel appended to a fragment", open: true,
			in:   "<p>Hi</p>",
			want: "<p>Hi</p>" + pixelMarkup},
		{name: "a </body> in a comment or a script is not the end of the body", open: true,
			in:   "<body><!-- </body> --><script>var s = '</body>';</script></body>",
			want: "<body><!-- </body> --><script>var s = '</body>';</script>" + pixelMarkup + "</body>"},
		{name: "pixel into an empty body", open: true, in: "", want: pixelMarkup},
		{name: "pixel before an unfinished tag at the end", open: true,
			in:   "<p>Hi</p><a href=https://",
			want: "<p>Hi</p>" + pixelMarkup + "<a href=https://"},
		{name: "open only leaves links", open: true,
			in:    `<body><a href="https://example.com/">x</a></body>`,
			want:  `<body><a href="https://example.com/">x</a>` + pixelMarkup + `</body>`,
			links: []string{"https://example.com/"}},
		{name: "links rewritten in order, with the pixel", open: true, click: true,
			in:    `<body><a href="https://a.test/1">1</a> <a href='http://b.test/2'>2</a> <a href=https://c.test/3>3</a></body>`,
			want:  `<body><a href="{c0}">1</a> <a href='{c1}'>2</a> <a href={c2}>3</a>` + pixelMarkup + `</body>`,
			links: []string{"https://a.test/1", "http://b.test/2", "https://c.test/3"}},
		{name: "click only adds no pixel", click: true,
			in:    `<body><a href="https://a.test/">1</a></body>`,
			want:  `<body><a href="{c0}">1</a></body>`,
			links: []string{"https://a.test/"}},
		{name: "upper-case tags and attributes, other attributes kept", click: true,
			in:    `<A CLASS="btn" HREF = "https://a.test/" TARGET=_blank>1</A><AREA SHAPE=rect HREF='https://b.test/'>`,
			want:  `<A CLASS="btn" HREF = "{c0}" TARGET=_blank>1</A><AREA SHAPE=rect HREF='{c1}'>`,
			links: []string{"https://a.test/", "https://b.test/"}},
		{name: "entities are decoded in Links and the whole value replaced", click: true,
			in:    `<a href="https://a.test/?x=1&amp;y=2">1</a><a href="&#104;ttps://b.test/&#x3F;q">2</a><a href="https://c.test/?a=1&copy=2">3</a>`,
			want:  `<a href="{c0}">1</a><a href="{c1}">2</a><a href="{c2}">3</a>`,
			links: []string{"https://a.test/?x=1&y=2", "https://b.test/?q", "https://c.test/?a=1&copy=2"}},
		{name: "surrounding whitespace is trimmed from the URL and replaced", click: true,
			in:    "<a href=\" \n https://a.test/x \t\">1</a>",
			want:  `<a href="{c0}">1</a>`,
			links: []string{"https://a.test/x"}},
		{name: "self-closing and unquoted values ending in a slash", click: true,
			in:    `<a href=https://a.test/ /><a href=https://b.test/>2</a>`,
			want:  `<a href={c0} /><a href={c1}>2</a>`,
			links: []string{"https://a.test/", "https://b.test/"}},
		{name: "the first of repeated hrefs is the link", click: true,
			in:    `<a href="https://first.test/" HREF="https://second.test/">1</a>`,
			want:  `<a href="{c0}" HREF="https://second.test/">1</a>`,
			links: []string{"https://first.test/"}},
		{name: "a quoted > inside the value", click: true,
			in:    `<a title="a>b" href="https://a.test/?q=<x>">1</a>`,
			want:  `<a title="a>b" href="{c0}">1</a>`,
			links: []string{"https://a.test/?q=<x>"}},
		{name: "links that are not tracked", open: false, click: true,
			in: `<a href="mailto:a@b.test">m</a>` +
				`<a href="tel:+15551234">t</a>` +
				`<a href="#top">anchor</a>` +
				`<a href="/relative/path">rel</a>` +
				`<a href="relative">rel</a>` +
				`<a href="//scheme-relative.test/">sr</a>` +
				`<a href="javascript:alert(1)">js</a>` +
				`<a href="ftp://files.test/">ftp</a>` +
				`<a href="https:no-host">nh</a>` +
				`<a href="">empty</a><a href>bare</a><a name="x">no href</a>` +
				`<a href="https://example.com/UnSubscribe?u=1">unsub</a>` +
				`<a href="https://example.com/list?action=unsubscribe">unsub</a>` +
				`<a href="https://POSTMILL.test/p/u/abc">our unsubscribe page</a>` +
				`<a href="https://example.com/keep" data-pm-no-track>no track</a>` +
				`<a DATA-PM-NO-TRACK="" href="https://example.com/keep2">no track</a>` +
				`<link rel="stylesheet" href="https://cdn.test/a.css"><img src="https://cdn.test/i.png">` +
				`<!-- <a href="https://commented.test/">c</a> -->` +
				`<script>document.write('<a href="https://script.test/">s</a>')</script>` +
				`<textarea><a href="https://textarea.test/">t</a></textarea>` +
				`<title><a href="https://title.test/">t</a></title>`,
			links: nil},
		{name: "a /p/ link on another host is tracked", click: true,
			in:    `<a href="https://shop.test/p/123">1</a>`,
			want:  `<a href="{c0}">1</a>`,
			links: []string{"https://shop.test/p/123"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := MustTracker(t)
			links := tr.Links(tt.in)
			if !slices.Equal(links, tt.links) {
				t.Fatalf("Links =\n%q\nwant\n%q", links, tt.links)
			}
			want := tt.want
			if want == "" {
				want = tt.in
			}
			out := tr.Rewrite(tt.in, params(tt.open, tt.click))
			if got := MustPlaceholders(t, tr, out, links); got != want {
				t.Fatalf("Rewrite =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestRewriteScheme(t *testing.T) {
	t.Parallel()
	tr, err := NewTracker(MustKeyring(t, masterA), "http")
	if err != nil {
		t.Fatal(err)
	}
	in := `<a href="https://a.test/">1</a></body>`
	out := tr.Rewrite(in, params(true, true))
	if got := MustPlaceholders(t, tr, out, tr.Links(in)); got != `<a href="{c0}">1</a>`+pixelMarkup+`</body>` {
		t.Fatalf("Rewrite = %s", out)
	}
	if !strings.Contains(out, `"http://track.example.org/t/o/`) || !strings.Contains(out, `"http://track.example.org/t/c/`) {
		t.Fatalf("Rewrite = %s, want http tracking URLs", out)
	}
}

func TestRewriteUnchanged(t *testing.T) {
	t.Parallel()
	tr := MustTracker(t)
	in := `<body><a href="https://a.test/">1</a></body>`
	for name, p := range map[string]RewriteParams{
		"nothing to track":   params(false, false),
		"no domain":          {OrganizationID: orgID, MessageID: msgID, RecipientID: rcpID, Open: true, Click: true},
		"domain with quotes": {OrganizationID: orgID, MessageID: msgID, RecipientID: rcpID, Domain: `x.test"><script>`, Open: true, Click: true},
		"domain with a path": {OrganizationID: orgID, MessageID: msgID, RecipientID: rcpID, Domain: "x.test/evil", Open: true},
		"empty label":        {OrganizationID: orgID, MessageID: msgID, RecipientID: rcpID, Domain: "x..test", Open: true},
		"recipient not uuid": {OrganizationID: orgID, MessageID: msgID, RecipientID: "r1", Domain: "x.test", Open: true, Click: true},
		"message not uuid":   {OrganizationID: orgID, MessageID: "", RecipientID: rcpID, Domain: "x.test", Click: true},
	} {
		if out := tr.Rewrite(in, p); out != in {
			t.Errorf("%s: Rewrite = %s, want the body unchanged", name, out)
		}
	}
}

// TestRewriteMatchesBrowserLinks parses the rewritten document as a browser would (the html5 tree
// builder) and checks that every <a> the sender had still leads where Links says, through its token.
func TestRewriteMatchesBrowserLinks(t *testing.T) {
	t.Parallel()
	tr := MustTracker(t)
	in := `<!DOCTYPE html><html><head><title>T</title><style>a{color:red}</style></head><body>
<table><tr><td><a href="https://a.test/1?x=1&amp;y=2" class=b>One</a></td></tr></table>
<p><a HREF='https://b.test/2'>Two</a> and <a href=mailto:x@y.test>mail</a></p>
<a href="https://postmill.test/p/unsub/abc">Unsubscribe</a></body></html>`
	links := tr.Links(in)
	out := tr.Rewrite(in, params(true, true))
	node, err := html.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	var hrefs, pixels []string
	for n := range node.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		for _, a := range n.Attr {
			switch {
			case n.Data == "a" && a.Key == "href":
				hrefs = append(hrefs, a.Val)
			case n.Data == "img" && a.Key == "src":
				pixels = append(pixels, a.Val)
			}
		}
	}
	var got []string
	for _, h := range hrefs {
		got = append(got, MustPlaceholders(t, tr, h, links))
	}
	want := []string{"{c0}", "{c1}", "mailto:x@y.test", "https://postmill.test/p/unsub/abc"}
	if !slices.Equal(got, want) {
		t.Fatalf("hrefs = %q, want %q", got, want)
	}
	if len(pixels) != 1 || MustPlaceholders(t, tr, pixels[0], links) != "{o}" {
		t.Fatalf("pixels = %q", pixels)
	}
	if want := []string{"https://a.test/1?x=1&y=2", "https://b.test/2"}; !slices.Equal(links, want) {
		t.Fatalf("Links = %q, want %q", links, want)
	}
}

// FuzzRewriteLinks checks, for any document, that Rewrite and Links agree: the k-th rewritten href carries
// a click token whose index is k and whose digest is that of Links()[k]; the rewritten document's links
// are exactly the tracking URLs; and every byte outside the spliced hrefs and the pixel is kept.
func FuzzRewriteLinks(f *testing.F) {
	for _, seed := range []string{
		"",
		"<p>Hi</p>",
		`<html><body><a href="https://a.test/">a</a></body></html>`,
		`<A HREF=https://a.test/ /><area href='http://b.test/?a=1&amp;b=2'>`,
		`<a href="https://x.test/" href="https://y.test/" data-pm-no-track>`,
		`<a href=" https://x.test/unsubscribe ">`,
		`<a =x href=y><a/href="https://z.test/"><a href=>`,
		`<script><a href="https://s.test/"></script><a href="https://t.test/">`,
		`<body></body></body><a href="https://late.test/">late</a>`,
		`<a title="a>b" href="https://a.test/?q=<x>">1</a>`,
		"<a h\x00ref=https://n.test/ href\x00=https://m.test/>",
		"<plaintext><a href=https://p.test/>",
		`<a href="https://postmill.test/p/x">p</a><a href="https://postmill.test/px">px</a>`,
	} {
		f.Add(seed)
	}
	tr := MustTracker(f)
	f.Fuzz(func(t *testing.T, doc string) {
		links := tr.Links(doc)
		out := tr.Rewrite(doc, params(true, true))

		// The rewritten hrefs, in document order, are tokens 0, 1, 2, … naming links[0], links[1], ….
		outLinks := tr.Links(out)
		if len(outLinks) != len(links) {
			t.Fatalf("Links(in) = %q, Links(out) = %q", links, outLinks)
		}
		for k, u := range outLinks {
			m := trackingURL.FindStringSubmatch(u)
			if m == nil || m[0] != u || m[2] != "c" {
				t.Fatalf("rewritten link %d is %q", k, u)
			}
			tok, err := tr.Decode(m[3])
			if err != nil {
				t.Fatalf("rewritten link %d: %v", k, err)
			}
			if tok.LinkIndex != k || tok.LinkDigest != LinkDigest(links[k]) {
				t.Fatalf("rewritten link %d names index %d (digest %x), want %q", k, tok.LinkIndex, tok.LinkDigest, links[k])
			}
			if got, ok := resolveLink(links, tok); !ok || got != links[k] {
				t.Fatalf("resolveLink(%d) = %q, %v; want %q", k, got, ok, links[k])
			}
		}

		// Outside the spliced hrefs and the pixel, the bytes are the sender's.
		spans, pixelAt := tr.scan(doc)
		var want strings.Builder
		last := 0
		pixelDone := false
		for k, s := range spans {
			if !pixelDone && pixelAt <= s.start {
				want.WriteString(doc[last:pixelAt] + pixelMarkup)
				last, pixelDone = pixelAt, true
			}
			want.WriteString(doc[last:s.start] + fmt.Sprintf("{c%d}", k))
			last = s.end
		}
		if !pixelDone {
			want.WriteString(doc[last:pixelAt] + pixelMarkup)
			last = pixelAt
		}
		want.WriteString(doc[last:])
		if got := MustPlaceholders(t, tr, out, links); got != want.String() {
			t.Fatalf("Rewrite(%q) =\n%q\nwant\n%q", doc, got, want.String())
		}
	})
}

func BenchmarkRewrite(b *testing.B) {
	tr := MustTracker(b)
	var doc strings.Builder
	doc.WriteString("<!DOCTYPE html><html><head><style>p{margin:0}</style></head><body><table>")
	for i := range 20 {
		fmt.Fprintf(&doc, `<tr><td><p>Paragraph %d with <a href="https://shop.test/item/%d?utm_source=mail&amp;utm_medium=email" class="btn">a link</a>.</p></td></tr>`, i, i)
	}
	doc.WriteString(`</table><a href="https://postmill.test/p/unsubscribe/x">Unsubscribe</a></body></html>`)
	in := doc.String()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		tr.Rewrite(in, params(true, true))
	}
}
