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
//
// Every string it returns is valid UTF-8 without NUL, whatever the sender wrote (see headerText and
// bodyText): the core and PostgreSQL refuse anything else, and refusing the message would only make the
// sender retry it for days. The raw message is kept as received.
func parseMail(raw []byte, from string, rcpts []string) ports.InboundMessage {
	m, _ := parseMailWhole(raw, from, rcpts)
	return m
}

// parseMailWhole is parseMail that also reports whether the walk reached every part: false when the
// message has more than maxParts parts or nests deeper than maxDepth, so that some of its parts were
// neither read nor scanned.
func parseMailWhole(raw []byte, from string, rcpts []string) (ports.InboundMessage, bool) {
	m := ports.InboundMessage{From: oneLine(from), Rcpts: make([]string, len(rcpts)), Raw: raw, Headers: map[string][]string{}}
	for i, r := range rcpts {
		m.Rcpts[i] = oneLine(r)
	}
	e, err := message.Read(bytes.NewReader(raw))
	if e == nil {
		return m, true
	}
	_ = err // an unknown charset or encoding still yields the entity
	latin1Header(&e.Header)
	h := mail.Header{Header: e.Header}
	fields := h.Fields()
	for n := 0; fields.Next() && n < maxHeaderCount; n++ {
		k := fields.Key()
		m.Headers[k] = append(m.Headers[k], headerText(fields.Value()))
	}
	m.Subject = headerText(h.Get("Subject"))
	m.MessageID = oneLine(strings.TrimSpace(h.Get("Message-Id")))
	m.InReplyTo = oneLine(strings.TrimSpace(h.Get("In-Reply-To")))
	m.References = oneLine(strings.TrimSpace(h.Get("References")))
	if fl, err := h.AddressList("From"); err == nil && len(fl) > 0 {
		m.HeaderFrom, m.FromName = oneLine(strings.ToLower(fl[0].Address)), oneLine(fl[0].Name)
	}
	m.To, m.Cc = addresses(h, "To"), addresses(h, "Cc")
	w := walker{m: &m}
	w.walk(e, "", true, 0)
	return m, !w.cut
}

func addresses(h mail.Header, key string) []string {
	out := []string{}
	l, err := h.AddressList(key)
	if err != nil {
		return out
	}
	for _, a := range l {
		out = append(out, oneLine(strings.ToLower(a.Address)))
	}
	return out
}

type walker struct {
	m     *ports.InboundMessage
	parts int
	cut   bool // a part was left out: past maxParts or maxDepth
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
		w.cut = true
		return
	}
	w.parts++
	latin1Header(&e.Header)
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
	name := filename(dispParams, ctParams) // before cleaning: a name of control characters still makes an attachment
	if ct == "message/rfc822" && disp != "attachment" {
		if inner, err := message.Read(bytes.NewReader(body)); inner != nil && (err == nil || message.IsUnknownCharset(err)) {
			w.walk(inner, section, true, depth+1)
			return
		}
	}
	isText := (ct == "text/plain" || ct == "text/html" || ct == "") && disp != "attachment" && name == ""
	if isText {
		s := bodyText(body)
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
		Filename: oneLine(name), ContentType: oneLine(ct), Inline: disp == "inline",
		ContentID: oneLine(strings.Trim(strings.TrimSpace(e.Header.Get("Content-Id")), "<>")), Data: body, PartPath: section,
	})
}

// filename is the Content-Disposition filename (go-message decodes RFC 2231 continuations and charsets),
// else the Content-Type name, with RFC 2047 encoded-words decoded. It is not cleaned yet (see oneLine).
func filename(disp, ct map[string]string) string {
	n := disp["filename"]
	if n == "" {
		n = ct["name"]
	}
	if dec, err := wordDecoder.DecodeHeader(n); err == nil {
		n = dec
	}
	return n
}

// wordDecoder decodes RFC 2047 encoded-words in every charset go-message's charset package knows.
var wordDecoder = mime.WordDecoder{CharsetReader: func(charset string, r io.Reader) (io.Reader, error) {
	if message.CharsetReader == nil {
		return nil, errors.New("inbound: no charset decoders")
	}
	return message.CharsetReader(charset, r)
}}

// latin1Header rewrites the fields of h whose value is not UTF-8 as ISO-8859-1, which is how mail clients
// show a raw 8-bit header: RFC 5322 §2.2 allows only US-ASCII there and RFC 6532 §3.2 UTF-8, but legacy
// software writes its own charset raw, most often Latin-1 ("Subject: caf\xe9"). Every byte is a Latin-1
// character, so nothing is lost; a header that is valid UTF-8 is left as it is. go-message only lets a
// header gain a field at the top or lose one, so a header needing it is rebuilt, in the same order.
func latin1Header(h *message.Header) {
	valid := true
	for fields := h.Fields(); fields.Next(); {
		if !utf8.ValidString(fields.Value()) {
			valid = false
			break
		}
	}
	if valid {
		return
	}
	var kvs [][2]string
	for fields := h.Fields(); fields.Next(); {
		v := fields.Value()
		if !utf8.ValidString(v) {
			v = latin1(v)
		}
		kvs = append(kvs, [2]string{fields.Key(), v})
	}
	var out message.Header
	for i := len(kvs) - 1; i >= 0; i-- { // Add puts a field at the top
		out.Add(kvs[i][0], kvs[i][1])
	}
	*h = out
}

// latin1 reads s as ISO-8859-1: each byte is the code point of the same value.
func latin1(s string) string {
	r := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		r[i] = rune(s[i])
	}
	return string(r)
}

// headerText decodes a header value's RFC 2047 encoded-words (the raw value when a charset is unknown) and
// makes the result one clean line (oneLine).
func headerText(v string) string {
	if dec, err := wordDecoder.DecodeHeader(v); err == nil {
		v = dec
	}
	return oneLine(v)
}

// oneLine makes a value taken from a header storable and safe to write into another header: invalid
// UTF-8 (an encoded-word whose bytes are not its declared charset) becomes U+FFFD, and CR, LF and the
// other C0 controls but TAB become spaces. NUL is refused by PostgreSQL text, and a decoded CR LF
// ("=?utf-8?q?fwd=0D=0ABcc:_x@evil.example?=") would otherwise start a new header line when the value is
// shown or forwarded (RFC 5322 §2.2).
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// bodyText is a decoded body as stored: invalid UTF-8 and NUL (which PostgreSQL text refuses) become
// U+FFFD; line breaks stay.
func bodyText(b []byte) string {
	s := string(b)
	if !utf8.Valid(b) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}
