package e2e

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
)

// mailParts returns the decoded text/html and text/plain bodies of a delivered message, walking nested
// multiparts as a mail client would.
func mailParts(tb testing.TB, data []byte) (subject, html, text string) {
	tb.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("parsing delivered mail: %v", err)
	}
	dec := new(mime.WordDecoder)
	subject, _ = dec.DecodeHeader(m.Header.Get("Subject"))
	var walk func(h map[string][]string, body io.Reader)
	walk = func(h map[string][]string, body io.Reader) {
		get := func(k string) string {
			if v := h[k]; len(v) > 0 {
				return v[0]
			}
			return ""
		}
		mt, params, _ := mime.ParseMediaType(get("Content-Type"))
		if strings.HasPrefix(mt, "multipart/") {
			mr := multipart.NewReader(body, params["boundary"])
			for {
				p, err := mr.NextRawPart()
				if err != nil {
					return
				}
				walk(p.Header, p)
			}
		}
		var r io.Reader = body
		switch strings.ToLower(get("Content-Transfer-Encoding")) {
		case "quoted-printable":
			r = quotedprintable.NewReader(body)
		case "base64":
			r = base64.NewDecoder(base64.StdEncoding, &crlfStripper{body})
		}
		b, _ := io.ReadAll(r)
		switch mt {
		case "text/html":
			html = string(b)
		case "text/plain", "":
			text = string(b)
		}
	}
	walk(m.Header, m.Body)
	return subject, html, text
}

// crlfStripper drops line breaks from base64 bodies.
type crlfStripper struct{ r io.Reader }

func (c *crlfStripper) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	out := p[:0]
	for _, b := range p[:n] {
		if b != '\r' && b != '\n' {
			out = append(out, b)
		}
	}
	return len(out), err
}
