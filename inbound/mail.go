package inbound

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // registers the charsets go-message decodes (ISO-8859-*, Shift_JIS, ...)
	"github.com/emersion/go-message/mail"

	"github.com/postmill/postmill/ports"
)

// Bounds on what is read out of a received message: its sender chose every byte of it.
const (
	maxParts       = 500
	maxHeaderCount = 500
	maxDepth       = 10
)

// parseMail reads a customer's message into what the core keeps: decoded headers, the first text/plain and
// text/html bodies (decoded to UTF-8 from their charsets), and every other leaf as an attachment or inline
// part, with RFC 2047 and RFC 2231 file names decoded. A message/rfc822 part is walked into when it is not
// an attachment; one with an attachment disposition is kept whole as an attachment. A message whose MIME
// structure is broken is still kept: what could be read is returned, the raw bytes stay authoritative.
func parseMail(raw []byte, from string, rcpts []string) ports.InboundMessage {
	m := ports.InboundMessage{From: from, Rcpts: rcpts, Raw: raw, Headers: map[string][]string{}}
	e, err := message.Read(bytes.NewReader(raw))
	if e == nil {
		return m
	}
	_ = err // an unknown charset or encoding still yields the entity
	h := mail.Header{Header: e.Header}
	fields := h.Fields()
	for n := 0; fields.Next() && n < maxHeaderCount; n++ {
		v, derr := fields.Text()
		if derr != nil {
			v = fields.Value()
		}
		k := fields.Key()
		m.Headers[k] = append(m.Headers[k], strings.ToValidUTF8(v, "\uFFFD"))
	}
	m.Subject, _ = h.Subject()
	m.MessageID = strings.TrimSpace(h.Get("Message-Id"))
	m.InReplyTo = strings.TrimSpace(h.Get("In-Reply-To"))
	m.References = strings.TrimSpace(h.Get("References"))
	if fl, err := h.AddressList("From"); err == nil && len(fl) > 0 {
		m.HeaderFrom, m.FromName = strings.ToLower(fl[0].Address), fl[0].Name
	}
	m.To, m.Cc = addresses(h, "To"), addresses(h, "Cc")
	w := walker{m: &m}
	w.walk(e, "", true, 0)
	return m
}

func addresses(h mail.Header, key string) []string {
	out := []string{}
	l, err := h.AddressList(key)
	if err != nil {
		return out
	}
	for _, a := range l {
		out = append(out, strings.ToLower(a.Address))
	}
	return out
}

type walker struct {
	m     *ports.InboundMessage
	parts int
}

// childSection is the section number of the n-th part below section, as IMAP numbers the parts of a
// message (RFC 3501 §6.4.5 "BODY[<section>]"): "1", "2" at the top, "2.1" inside part 2.
func childSection(section string, n int) string {
	if section == "" {
		return strconv.Itoa(n)
	}
	return section + "." + strconv.Itoa(n)
}

// walk visits e, whose section number is section. A message (the top one, or one a message/rfc822 part
// holds: msg is true) numbers its parts below its own section; when it is no multipart, its single body is
// part 1 of it (RFC 3501 §6.4.5). Each attachment records its section as InboundPart.PartPath; Parts.Extract
// runs this same walk to find it again, so the numbering and the decoding are the same by construction.
func (w *walker) walk(e *message.Entity, section string, msg bool, depth int) {
	if w.parts >= maxParts || depth > maxDepth {
		return
	}
	w.parts++
	ct, ctParams, _ := e.Header.ContentType()
	disp, dispParams, _ := e.Header.ContentDisposition()
	if mr := e.MultipartReader(); mr != nil {
		related := ct == "multipart/related"
		for n := 1; ; n++ {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) || (err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err)) {
				return
			}
			if p == nil {
				return
			}
			if related && p.Header.Get("Content-Id") != "" {
				if d, _, _ := p.Header.ContentDisposition(); d == "" {
					p.Header.Set("Content-Disposition", "inline")
				}
			}
			w.walk(p, childSection(section, n), false, depth+1)
		}
	}
	if msg {
		section = childSection(section, 1)
	}
	body, _ := io.ReadAll(io.LimitReader(e.Body, 64<<20))
	name := filename(dispParams, ctParams)
	if ct == "message/rfc822" && disp != "attachment" {
		if inner, err := message.Read(bytes.NewReader(body)); inner != nil && (err == nil || message.IsUnknownCharset(err)) {
			w.walk(inner, section, true, depth+1)
			return
		}
	}
	isText := (ct == "text/plain" || ct == "text/html" || ct == "") && disp != "attachment" && name == ""
	if isText {
		s := validUTF8(body)
		switch {
		case ct == "text/html" && w.m.HTML == "":
			w.m.HTML = s
			return
		case ct != "text/html" && w.m.Text == "":
			w.m.Text = s
			return
		}
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.m.Attachments = append(w.m.Attachments, ports.InboundPart{
		Filename: name, ContentType: ct, Inline: disp == "inline",
		ContentID: strings.Trim(strings.TrimSpace(e.Header.Get("Content-Id")), "<>"), Data: body, PartPath: section,
	})
}

// filename is the Content-Disposition filename (go-message decodes RFC 2231 continuations and charsets),
// else the Content-Type name, with RFC 2047 encoded-words decoded.
func filename(disp, ct map[string]string) string {
	n := disp["filename"]
	if n == "" {
		n = ct["name"]
	}
	if dec, err := new(mime.WordDecoder).DecodeHeader(n); err == nil {
		n = dec
	}
	return strings.ToValidUTF8(n, "\uFFFD")
}

func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
