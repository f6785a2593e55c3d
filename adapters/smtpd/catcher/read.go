package catcher

import (
	"bufio"
	"bytes"
	"io"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"

	"github.com/postmill/postmill/ports"
)

// Bounds on what is read out of a caught message: its sender chose every byte of it.
const (
	// maxFieldBytes bounds one stored header value or address (RFC 5322 §2.1.1's line limit).
	maxFieldBytes = 998
	// maxAddresses bounds the To addresses kept in a summary.
	maxAddresses = 100
	// maxHeaders bounds the header fields listed for a message.
	maxHeaders = 500
	// maxParts bounds the MIME parts walked in one message.
	maxParts = 500
)

// summarize reads what the list shows from the message's header: From, To and Subject, decoded. A header
// that does not parse leaves them empty; the message is still kept.
func summarize(raw []byte) ports.CaughtMessage {
	var m ports.CaughtMessage
	h, err := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return m
	}
	mh := mail.Header{Header: message.Header{Header: h}}
	m.Subject = bounded(decoded(mh, "Subject"), maxFieldBytes)
	if from, err := mh.AddressList("From"); err == nil && len(from) > 0 {
		m.From = bounded(from[0].String(), maxFieldBytes)
	} else {
		m.From = bounded(decoded(mh, "From"), maxFieldBytes)
	}
	if to, err := mh.AddressList("To"); err == nil {
		for _, a := range to[:min(len(to), maxAddresses)] {
			m.To = append(m.To, bounded(a.Address, maxFieldBytes))
		}
	}
	return m
}

// decoded is a header value with RFC 2047 encoded-words decoded, or as it is when they do not decode.
func decoded(h mail.Header, key string) string {
	if v, err := h.Text(key); err == nil {
		return v
	}
	return h.Get(key)
}

// readContent reads a message in full for the detail view: its header fields, the first text/plain and
// text/html parts that are not attachments, and the list of attachments (inline parts that are neither
// included). A malformed message gives what could be read before the fault.
func readContent(m ports.CaughtMessage, raw []byte) ports.CaughtContent {
	out := ports.CaughtContent{CaughtMessage: m}
	walk(raw, func(h *textproto.Header) {
		fields := (&message.Header{Header: *h}).Fields()
		for fields.Next() && len(out.Headers) < maxHeaders {
			v, err := fields.Text()
			if err != nil {
				v = fields.Value()
			}
			out.Headers = append(out.Headers, ports.MessageHeader{Name: fields.Key(), Value: bounded(v, 16*maxFieldBytes)})
		}
	}, func(p part) bool {
		switch {
		case !p.attachment && p.mediaType == "text/plain" && out.Text == "":
			out.Text = text(p.body)
		case !p.attachment && p.mediaType == "text/html" && out.HTML == "":
			out.HTML = text(p.body)
		default:
			out.Attachments = append(out.Attachments, p.describe(len(out.Attachments)))
		}
		return true
	})
	return out
}

// readAttachment returns the index-th attachment as readContent numbered it, with its decoded content.
func readAttachment(raw []byte, index int) (ports.CaughtAttachment, []byte, bool) {
	var (
		n, seenText, seenHTML int
		found                 ports.CaughtAttachment
		body                  []byte
		ok                    bool
	)
	walk(raw, nil, func(p part) bool {
		switch {
		case !p.attachment && p.mediaType == "text/plain" && seenText == 0:
			seenText++
			return true
		case !p.attachment && p.mediaType == "text/html" && seenHTML == 0:
			seenHTML++
			return true
		}
		if n == index {
			found, body, ok = p.describe(n), p.body, true
			return false
		}
		n++
		return true
	})
	return found, body, ok
}

// part is one leaf of a message, its body decoded from its transfer encoding (and its charset, when
// known).
type part struct {
	mediaType  string
	attachment bool // Content-Disposition: attachment
	inline     bool // Content-Disposition: inline, or a Content-ID
	filename   string
	contentID  string
	body       []byte
}

func (p part) describe(index int) ports.CaughtAttachment {
	return ports.CaughtAttachment{
		Index: index, Filename: p.filename, ContentType: p.mediaType, ContentID: p.contentID,
		Inline: !p.attachment && p.inline, Size: int64(len(p.body)),
	}
}

// walk reads raw's top header (given to header, when not nil) and then each leaf part in order until
// leaf returns false, maxParts is reached, or the structure breaks.
func walk(raw []byte, header func(*textproto.Header), leaf func(part) bool) {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return
	}
	if header != nil {
		header(&e.Header.Header)
	}
	r := mail.NewReader(e)
	for range maxParts {
		p, err := r.NextPart()
		if err != nil && (p == nil || (!message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err))) {
			return
		}
		var lp part
		switch h := p.Header.(type) {
		case *mail.InlineHeader:
			lp.mediaType, _, _ = h.ContentType()
			lp.inline = h.Get("Content-ID") != "" || strings.HasPrefix(strings.ToLower(h.Get("Content-Disposition")), "inline")
			lp.contentID = strings.Trim(h.Get("Content-ID"), "<> ")
			if disp, params, err := h.ContentDisposition(); err == nil && disp == "inline" {
				lp.filename = params["filename"]
			}
			if lp.filename == "" {
				_, params, _ := h.ContentType()
				lp.filename = params["name"]
			}
		case *mail.AttachmentHeader:
			lp.mediaType, _, _ = h.ContentType()
			lp.attachment = true
			lp.filename, _ = h.Filename()
			lp.contentID = strings.Trim(h.Get("Content-ID"), "<> ")
		default:
			continue
		}
		lp.mediaType = strings.ToLower(lp.mediaType)
		if lp.mediaType == "" {
			lp.mediaType = "text/plain" // RFC 2045 §5.2
		}
		lp.filename = bounded(decodeWords(lp.filename), maxFieldBytes)
		lp.contentID = bounded(lp.contentID, maxFieldBytes)
		// The message is at most MaxMessageBytes, and no transfer encoding makes its content larger.
		lp.body, _ = io.ReadAll(p.Body)
		if !leaf(lp) {
			return
		}
	}
}

// decodeWords decodes RFC 2047 words some mailers put in file names despite RFC 2231.
func decodeWords(s string) string {
	if v, err := new(mime.WordDecoder).DecodeHeader(s); err == nil {
		return v
	}
	return s
}

// text is a body as a valid UTF-8 string: a part whose charset was unknown keeps its bytes, with what is
// not UTF-8 replaced.
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// bounded cuts s to at most n bytes on a character boundary and makes it valid UTF-8.
func bounded(s string, n int) string {
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
