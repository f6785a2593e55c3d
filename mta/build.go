package mta

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"

	"github.com/postmill/postmill/ports"
)

// permanentError is a build failure that no retry can fix (a missing attachment blob, an unparsable
// address, an unusable DKIM key). Its text becomes the recipients' providerResponse.
type permanentError struct{ response string }

func (e *permanentError) Error() string { return e.response }

func permanentf(format string, args ...any) error {
	return &permanentError{response: fmt.Sprintf(format, args...)}
}

// dkimHeaderKeys are the header fields DKIM signs when present (RFC 6376 §5.4 and §5.4.1): the ones a
// reader sees and the MIME structure, so none can be altered or replaced in transit.
var dkimHeaderKeys = []string{
	"From", "To", "Cc", "Subject", "Date", "Message-ID", "Reply-To", "MIME-Version", "Content-Type",
	"Content-Transfer-Encoding", "List-Unsubscribe", "List-Unsubscribe-Post",
}

// reservedHeaders are fields the MTA writes itself; a custom header of the same name is dropped rather
// than duplicating or replacing one (a second From or Content-Type would break the message and DKIM).
var reservedHeaders = map[string]bool{
	"from": true, "to": true, "cc": true, "bcc": true, "reply-to": true, "subject": true, "date": true,
	"message-id": true, "mime-version": true, "content-type": true, "content-transfer-encoding": true,
	"content-disposition": true, "content-id": true, "dkim-signature": true, "return-path": true,
	"received": true, "sender": true,
}

// part is one MIME entity: a leaf with a body, or a multipart with children.
type part struct {
	header   message.Header
	body     []byte
	children []*part
}

// compose builds the RFC 5322 message of out with go-message: a single text/plain or text/html body
// when there is one part and nothing attached; otherwise multipart/alternative (text + html), wrapped in
// multipart/related with the inline parts (RFC 2387, referenced by Content-ID), wrapped in
// multipart/mixed with the attachments. Bcc recipients never appear (RFC 5322 §3.6.3: they are envelope
// recipients only), nor does metadata. It returns the message and the header fields DKIM must sign.
func compose(ctx context.Context, out ports.OutboundMessage, blobs ports.BlobStore) ([]byte, []string, error) {
	root, err := bodyTree(ctx, out, blobs)
	if err != nil {
		return nil, nil, err
	}

	from, err := parseAddresses("From", []string{out.From})
	if err != nil {
		return nil, nil, err
	}
	to, err := parseAddresses("To", out.To)
	if err != nil {
		return nil, nil, err
	}
	cc, err := parseAddresses("Cc", out.Cc)
	if err != nil {
		return nil, nil, err
	}
	var replyTo []*mail.Address
	if out.ReplyTo != "" {
		if replyTo, err = parseAddresses("Reply-To", []string{out.ReplyTo}); err != nil {
			return nil, nil, err
		}
	}
	if strings.ContainsAny(out.Subject, "\r\n") {
		return nil, nil, permanentf("5.6.0 subject contains a line break")
	}
	date := out.CreatedAt
	if date.IsZero() {
		date = time.Now()
	}

	// go-message writes header fields in the reverse order of insertion: insert bottom-up so the message
	// reads From, To, Cc, Reply-To, Subject, Date, Message-ID, custom fields, MIME fields.
	var h mail.Header
	for _, k := range []string{"Content-Transfer-Encoding", "Content-Disposition", "Content-ID", "Content-Type"} {
		if v := root.header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	h.Set("MIME-Version", "1.0")
	names := make([]string, 0, len(out.Headers))
	for k := range out.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for i := len(names) - 1; i >= 0; i-- {
		k, v := names[i], out.Headers[names[i]]
		if reservedHeaders[strings.ToLower(k)] || !validHeaderName(k) || strings.ContainsAny(v, "\r\n") {
			continue
		}
		h.SetText(k, v)
	}
	if out.MessageIDHeader != "" {
		h.SetMessageID(out.MessageIDHeader)
	}
	h.SetDate(date)
	h.SetSubject(out.Subject)
	h.SetAddressList("Reply-To", replyTo)
	h.SetAddressList("Cc", cc)
	h.SetAddressList("To", to)
	h.SetAddressList("From", from)

	var buf bytes.Buffer
	buf.Grow(estimateSize(root) + 2048)
	w, err := message.CreateWriter(&buf, h.Header)
	if err != nil {
		return nil, nil, fmt.Errorf("mta: write header: %w", err)
	}
	if err := writeBody(w, root); err != nil {
		return nil, nil, err
	}
	// SMTP ends the content with CRLF before the final dot (RFC 5321 §4.1.1.4); end it here so the bytes
	// signed are exactly the bytes sent.
	if !bytes.HasSuffix(buf.Bytes(), []byte("\r\n")) {
		buf.WriteString("\r\n")
	}

	keys := make([]string, 0, len(dkimHeaderKeys))
	for _, k := range dkimHeaderKeys {
		if h.Has(k) {
			keys = append(keys, k)
		}
	}
	return buf.Bytes(), keys, nil
}

// bodyTree arranges the message's parts, fetching attachment bytes from the blob store.
func bodyTree(ctx context.Context, out ports.OutboundMessage, blobs ports.BlobStore) (*part, error) {
	var texts []*part
	if out.Text != "" {
		texts = append(texts, textPart("text/plain", out.Text))
	}
	if out.HTML != "" {
		texts = append(texts, textPart("text/html", out.HTML))
	}
	var body *part
	switch len(texts) {
	case 0:
		body = textPart("text/plain", "")
	case 1:
		body = texts[0]
	default:
		body = multipart("multipart/alternative", texts...)
	}

	var inline, attached []*part
	for _, a := range out.Attachments {
		if blobs == nil {
			return nil, fmt.Errorf("mta: attachment %s: no blob store", a.ID)
		}
		data, err := blobs.Get(ctx, a.Key)
		if ports.ErrorCode(err) == ports.CodeNotFound {
			return nil, permanentf("5.3.0 attachment %s is missing from storage", a.Filename)
		}
		if err != nil {
			return nil, fmt.Errorf("mta: attachment %s: %w", a.ID, err)
		}
		p := filePart(a, data)
		if a.Inline {
			inline = append(inline, p)
		} else {
			attached = append(attached, p)
		}
	}
	if len(inline) > 0 {
		body = multipart("multipart/related", append([]*part{body}, inline...)...)
	}
	if len(attached) > 0 {
		body = multipart("multipart/mixed", append([]*part{body}, attached...)...)
	}
	return body, nil
}

// textPart is a UTF-8 text body, quoted-printable so that every line stays within RFC 5322 §2.1.1's 998
// characters and the message is 7-bit clean for any relay.
func textPart(mediaType, s string) *part {
	p := &part{body: []byte(s)}
	p.header.Set("Content-Transfer-Encoding", "quoted-printable")
	// What SetContentType writes for these parameters, without formatting it per part.
	p.header.Set("Content-Type", mediaType+"; charset=utf-8")
	return p
}

// filePart is an attachment or an inline part, base64-encoded (RFC 2045 §6.8). Inline parts carry the
// Content-ID their HTML references as cid: (RFC 2392).
func filePart(a ports.StoredAttachment, data []byte) *part {
	p := &part{body: data}
	ct := a.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	mediaType, params, err := mimeType(ct)
	if err != nil {
		mediaType, params = "application/octet-stream", map[string]string{}
	}
	// go-message writes only UTF-8 and US-ASCII parts; any other charset label is dropped (the bytes are
	// sent unchanged in base64, so only the label is lost).
	if cs := strings.ToLower(params["charset"]); cs != "" && cs != "utf-8" && cs != "us-ascii" {
		delete(params, "charset")
	}
	disposition := "attachment"
	if a.Inline {
		disposition = "inline"
	}
	p.header.Set("Content-Transfer-Encoding", "base64")
	if a.Filename != "" {
		params["name"] = a.Filename
		p.header.SetContentDisposition(disposition, map[string]string{"filename": a.Filename})
	} else {
		p.header.SetContentDisposition(disposition, nil)
	}
	if a.Inline && a.ContentID != "" {
		p.header.Set("Content-ID", "<"+strings.Trim(a.ContentID, "<>")+">")
	}
	p.header.SetContentType(mediaType, params)
	return p
}

// mimeType parses a media type with go-message's header rules.
func mimeType(ct string) (string, map[string]string, error) {
	var h message.Header
	h.Set("Content-Type", ct)
	t, params, err := h.ContentType()
	if params == nil {
		params = map[string]string{}
	}
	return t, params, err
}

// multipart is a multipart entity with its own random boundary, set here so go-message never rewrites
// the Content-Type field (and the field order with it).
func multipart(mediaType string, children ...*part) *part {
	p := &part{children: children}
	p.header.SetContentType(mediaType, map[string]string{"boundary": boundary()})
	return p
}

// boundary returns 128 random bits in hex: a string that cannot occur in quoted-printable or base64
// content by chance (RFC 2046 §5.1.1).
func boundary() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "=_pm" + hex.EncodeToString(b[:])
}

func writeBody(w *message.Writer, p *part) error {
	if p.children == nil {
		if _, err := w.Write(p.body); err != nil {
			return fmt.Errorf("mta: write body: %w", err)
		}
		return w.Close()
	}
	for _, c := range p.children {
		cw, err := w.CreatePart(c.header)
		if err != nil {
			return fmt.Errorf("mta: create part: %w", err)
		}
		if err := writeBody(cw, c); err != nil {
			return err
		}
	}
	return w.Close()
}

func estimateSize(p *part) int {
	n := len(p.body) * 4 / 3
	for _, c := range p.children {
		n += estimateSize(c) + 256
	}
	return n
}

// parseAddresses parses header addresses ("Name <a@b>" or a bare address) for go-message to format,
// which encodes non-ASCII display names per RFC 2047.
func parseAddresses(field string, in []string) ([]*mail.Address, error) {
	out := make([]*mail.Address, 0, len(in))
	for _, s := range in {
		if strings.TrimSpace(s) == "" {
			continue
		}
		list, err := mail.ParseAddressList(s)
		if err != nil {
			return nil, permanentf("5.1.7 invalid %s address", field)
		}
		out = append(out, list...)
	}
	return out, nil
}

// validHeaderName is SPEC §8's custom header name pattern ^[A-Za-z0-9-]+$.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
