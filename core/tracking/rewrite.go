package tracking

import (
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/html"

	"github.com/postmill/postmill/core/htmlscan"
)

// NoTrackAttr is the attribute that keeps one link out of click tracking: <a href="…" data-pm-no-track>.
// Senders use it for links that must reach the destination untouched (a signed URL, a link whose host the
// recipient is meant to see on hover).
const NoTrackAttr = "data-pm-no-track"

// RewriteParams says whose copy of a message is being rewritten and what to track in it.
type RewriteParams struct {
	OrganizationID string
	MessageID      string
	// RecipientID names the one recipient of this copy: delivery splits a tracked message into one job
	// per recipient so that opens and clicks are told apart.
	RecipientID string
	// Domain is the sending (From) domain; tracking URLs point at track.<Domain>, the TRACKING record of
	// SPEC §4.3, so links in the mail name the sender's own domain.
	Domain string
	// Open adds the 1x1 pixel; Click rewrites the trackable links.
	Open  bool
	Click bool
}

// link is one trackable link: the byte span of its href value in the document (inside the quotes, if any)
// and the URL it leads to.
type link struct {
	start, end int
	url        string
}

// Links returns the trackable links of an HTML body in document order, each as the URL it leads to (entity
// references decoded, surrounding whitespace trimmed). Rewrite rewrites exactly these, and the i-th click
// token names Links(html)[i]: the click handler calls Links on the HTML stored at send time to find where
// to redirect, so this function is the whole definition of "the URL recorded at send time".
//
// A trackable link is the href of an <a> or <area> element (the first href, as browsers read it) whose value
// is an absolute http or https URL with a host, except:
//   - links that mention "unsubscribe" anywhere (any letter case): List-Unsubscribe targets (RFC 2369,
//     RFC 8058) and the sender's own opt-out pages must work without a detour through Postmill, and a
//     visit to them is an opt-out, not engagement;
//   - links under PublicBaseURL's /p/ routes (Postmill's unsubscribe and preference pages);
//   - elements carrying NoTrackAttr;
//   - mailto:, tel:, fragment-only and relative links: not web pages a redirect can lead to.
//
// Elements inside raw-text elements (<script>, <style>, <textarea>, <title>, …) and comments are not links.
func (t *Tracker) Links(doc string) []string {
	links, _ := t.scan(doc)
	out := make([]string, len(links))
	for i, l := range links {
		out[i] = l.url
	}
	return out
}

// Rewrite returns the HTML body of one recipient's copy: with p.Click, the href of every trackable link
// (see Links) is replaced by <scheme>://track.<domain>/t/c/<token>; with p.Open, a 1x1 image of
// <scheme>://track.<domain>/t/o/<token> goes just before the last </body> (before the last </html> when
// there is no </body>, at the end when there is neither, but before an unfinished tag the body ends in).
// Everything else is kept byte for byte: only href values are spliced, so the markup the sender tested is
// the markup delivered. Links past the 65536th stay as they are.
//
// Rewrite never fails: when the parameters cannot make tokens (ids that are not UUIDs, an empty or
// malformed domain) it returns the body unchanged, and the recipient gets an untracked copy rather than
// none.
func (t *Tracker) Rewrite(doc string, p RewriteParams) string {
	if !p.Open && !p.Click {
		return doc
	}
	host, ok := trackingHost(p.Domain)
	if !ok {
		return doc
	}
	base := t.scheme + "://" + host + "/t/"
	links, pixelAt := t.scan(doc)

	type edit struct {
		start, end int
		text       string
	}
	var edits []edit
	if p.Click {
		for i, l := range links {
			if i > maxLinkIndex {
				break
			}
			tok, err := t.Encode(Token{Kind: KindClick, OrganizationID: p.OrganizationID, MessageID: p.MessageID,
				RecipientID: p.RecipientID, LinkIndex: i, LinkDigest: LinkDigest(l.url)})
			if err != nil {
				return doc
			}
			edits = append(edits, edit{l.start, l.end, base + "c/" + tok})
		}
	}
	if p.Open {
		tok, err := t.Encode(Token{Kind: KindOpen, OrganizationID: p.OrganizationID, MessageID: p.MessageID,
			RecipientID: p.RecipientID})
		if err != nil {
			return doc
		}
		pixel := `<img src="` + base + "o/" + tok +
			`" width="1" height="1" alt="" style="display:none;border:0;width:1px;height:1px" />`
		// The pixel sits at a tag boundary and links inside tags, so the two never overlap; the stable sort
		// puts it after a link that ends where it starts.
		edits = append(edits, edit{pixelAt, pixelAt, pixel})
		slices.SortStableFunc(edits, func(a, b edit) int { return a.start - b.start })
	}

	var b strings.Builder
	grow := len(doc)
	for _, e := range edits {
		grow += len(e.text)
	}
	b.Grow(grow)
	last := 0
	for _, e := range edits {
		b.WriteString(doc[last:e.start])
		b.WriteString(e.text)
		last = e.end
	}
	b.WriteString(doc[last:])
	return b.String()
}

// trackingHost returns track.<domain> when domain is a plausible DNS name. The name ends up inside HTML
// attributes unescaped, so anything but letters, digits, hyphens and dots is refused.
func trackingHost(domain string) (string, bool) {
	d := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(domain)), ".")
	if d == "" || len(d) > 253 || strings.HasPrefix(d, ".") || strings.Contains(d, "..") {
		return "", false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return "", false
		}
	}
	return "track." + d, true
}

// scan tokenizes doc once (golang.org/x/net/html, the WHATWG tokenizer) and returns the trackable links in
// document order and the offset where the open pixel belongs. Token offsets come from the tokenizer's raw
// bytes, which partition the input, so every offset indexes doc itself.
func (t *Tracker) scan(doc string) (links []link, pixelAt int) {
	z := html.NewTokenizer(strings.NewReader(doc))
	off, bodyEnd, htmlEnd := 0, -1, -1
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		n := len(z.Raw())
		if off+n > len(doc) {
			break
		}
		raw := doc[off : off+n]
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if hasAttr && (string(name) == "a" || string(name) == "area") {
				if l, ok := t.trackable(z, raw); ok {
					l.start += off
					l.end += off
					links = append(links, l)
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "body":
				bodyEnd = off
			case "html":
				htmlEnd = off
			}
		}
		off += n
	}
	switch {
	case bodyEnd >= 0:
		return links, bodyEnd
	case htmlEnd >= 0:
		return links, htmlEnd
	}
	// The end of the last whole token: a document cut off inside a tag ("<a href=https://") keeps its
	// unfinished bytes after the pixel, which would otherwise complete that tag.
	return links, off
}

// trackable reads the current tag's attributes and returns its link when the element is one to track. The
// tokenizer decodes values but gives no offsets; htmlscan gives offsets. Both must list the same keys in
// the same order, or the element is left alone: a span is only ever spliced when it is known to be the
// href the tokenizer read.
func (t *Tracker) trackable(z *html.Tokenizer, raw string) (link, bool) {
	attrs := htmlscan.Distinct(raw, htmlscan.Attrs(raw))
	var (
		href    *htmlscan.Attr
		value   string
		noTrack bool
		i       int
	)
	for more := true; more; i++ {
		var key, val []byte
		key, val, more = z.TagAttr()
		if i >= len(attrs) || attrs[i].Key(raw) != string(key) {
			return link{}, false
		}
		switch string(key) {
		case "href":
			href, value = &attrs[i], string(val)
		case NoTrackAttr:
			noTrack = true
		}
	}
	if i != len(attrs) || href == nil || noTrack {
		return link{}, false
	}
	u := strings.Trim(value, htmlSpace)
	if !t.trackableURL(u) {
		return link{}, false
	}
	return link{start: href.ValueStart, end: href.ValueEnd, url: u}, true
}

// htmlSpace is ASCII whitespace as HTML defines it (WHATWG Infra), which browsers strip from both ends of a
// URL attribute.
const htmlSpace = " \t\n\f\r"

// trackableURL applies the rules of Links to a decoded, trimmed href.
func (t *Tracker) trackableURL(u string) bool {
	if u == "" || strings.Contains(strings.ToLower(u), "unsubscribe") {
		return false
	}
	if base := strings.TrimRight(strings.TrimSpace(t.PublicBaseURL), "/"); base != "" {
		prefix := base + "/p/"
		if len(u) >= len(prefix) && strings.EqualFold(u[:len(prefix)], prefix) {
			return false
		}
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return false
	}
	switch strings.ToLower(parsed.Scheme) {
	case "http", "https":
		return parsed.Host != ""
	}
	return false
}
