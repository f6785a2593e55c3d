package submission

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"mime"
	netmail "net/mail"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"

	"github.com/postmill/postmill/ports"
)

// reservedHeaderPrefix marks header names Postmill writes itself; a client cannot set them.
const reservedHeaderPrefix = "x-postmill-"

// maxBodyBytes bounds one decoded text body. The message size bound already limits it; this one keeps a
// body read into memory from exceeding what any sensible message has, before the core sees it.
const maxBodyBytes = 32 << 20

// Refusals of oversized parts, in the send API's words (SPEC §8).
const (
	msgAttachmentTooLarge  = "must be at most 10 MiB decoded"
	msgAttachmentsTooLarge = "must total at most 25 MiB decoded"
)

// invalid is a schema-style refusal of the submitted message, reported like a send-API validation failure.
func invalid(path, msg string) error {
	return ports.ValidationError(ports.FieldViolation{Path: path, Message: msg})
}

// parseMessage turns a submitted message (RFC 5322, MIME per RFC 2045-2049) and its envelope recipients
// into a send request, reading r as a stream. Addresses in To and Cc that are envelope recipients keep
// their place (and display names); the other envelope recipients become Bcc (RFC 5322 §3.6.3).
func parseMessage(r io.Reader, envelope []string) (ports.SendRequest, error) {
	mr, err := mail.CreateReader(r)
	if err != nil && !message.IsUnknownCharset(err) {
		return ports.SendRequest{}, invalid("message", "not a readable RFC 5322 message: "+err.Error())
	}
	h := mr.Header
	var req ports.SendRequest

	from, err := addressList(h, "From")
	if err != nil || len(from) != 1 {
		return ports.SendRequest{}, invalid("from", "expected exactly one From address")
	}
	req.From = formatAddress(from[0])
	to, err := addressList(h, "To")
	if err != nil {
		return ports.SendRequest{}, invalid("to", "expected a list of addresses in To")
	}
	cc, err := addressList(h, "Cc")
	if err != nil {
		return ports.SendRequest{}, invalid("cc", "expected a list of addresses in Cc")
	}
	req.To, req.Cc, req.Bcc = splitRecipients(to, cc, envelope)

	if replyTo, err := addressList(h, "Reply-To"); err == nil && len(replyTo) > 0 {
		req.ReplyTo = formatAddress(replyTo[0])
	}
	if req.Subject, err = h.Subject(); err != nil {
		req.Subject = h.Get("Subject")
	}
	req.Headers = customHeaders(h)

	if err := readParts(mr, &req); err != nil {
		return ports.SendRequest{}, err
	}
	return req, nil
}

// addressParser reads display names in RFC 2047 encoded words of any charset: UTF-8, US-ASCII and Latin-1
// natively, Windows-1252 by table, anything else as UTF-8 when it is valid and as Windows-1252 when not.
// A display name is only shown to the reader, so a rarely used charset makes it look wrong at worst; it
// never makes normal mail be refused.
var addressParser = netmail.AddressParser{WordDecoder: &mime.WordDecoder{CharsetReader: func(charset string, input io.Reader) (io.Reader, error) {
	b, err := io.ReadAll(io.LimitReader(input, 4096))
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(charset) {
	case "iso-8859-1", "iso8859-1", "latin1":
		return strings.NewReader(decodeSingleByte(b, nil)), nil
	}
	if utf8.Valid(b) {
		return bytes.NewReader(b), nil
	}
	return strings.NewReader(decodeSingleByte(b, &windows1252)), nil
}}}

// addressList parses every occurrence of a header field (RFC 5322 §3.6.3 allows groups, which contribute
// their members; an empty group such as "undisclosed-recipients:;" contributes none). Raw UTF-8 in display
// names (RFC 6532) is read as it is.
func addressList(h mail.Header, key string) ([]*mail.Address, error) {
	var out []*mail.Address
	for _, v := range h.Values(key) {
		if strings.TrimSpace(v) == "" {
			continue
		}
		list, err := addressParser.ParseList(v)
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}

// formatAddress keeps the display name when there is one (RFC 2047-encoded when not ASCII).
func formatAddress(a *mail.Address) string {
	if a.Name == "" {
		return a.Address
	}
	return a.String()
}

// splitRecipients applies the envelope: only envelope recipients receive the message, each once.
func splitRecipients(to, cc []*mail.Address, envelope []string) (toOut, ccOut, bcc []string) {
	inEnvelope := make(map[string]bool, len(envelope))
	for _, e := range envelope {
		inEnvelope[strings.ToLower(e)] = true
	}
	placed := map[string]bool{}
	pick := func(list []*mail.Address) []string {
		var out []string
		for _, a := range list {
			key := strings.ToLower(a.Address)
			if inEnvelope[key] && !placed[key] {
				placed[key] = true
				out = append(out, formatAddress(a))
			}
		}
		return out
	}
	toOut, ccOut = pick(to), pick(cc)
	for _, e := range envelope {
		if key := strings.ToLower(e); !placed[key] {
			placed[key] = true
			bcc = append(bcc, e)
		}
	}
	return toOut, ccOut, bcc
}

// customHeaders keeps the client's header fields that the send API would accept as custom headers
// (SPEC §8's names, one line of at most 998 characters, at most ports.MaxHeaders of them) and that the
// message Postmill builds does not write itself: In-Reply-To and References (so replies sent over SMTP stay
// in their thread), Keywords, Importance, List-* and every X- field. Dropped are the fields the send
// request carries in fields of its own (From, To, Cc, Bcc, Reply-To, Subject), those Postmill writes
// (Date, Message-ID, Sender, MIME-Version, Content-*, x-postmill-*), and trace and authentication fields a
// client has no business setting (Received, Return-Path, DKIM-Signature, Authentication-Results, ARC-*,
// Resent-* …). The first occurrence of a name wins. A References field too long for one line keeps its
// first message id and as many of the last ones as fit (RFC 5322 §3.6.4 asks for the parent's ids; the
// first and the latest matter most to threading); any other field too long for one line is dropped.
func customHeaders(h mail.Header) map[string]string {
	out := map[string]string{}
	seen := map[string]bool{}
	fields := h.Fields()
	for fields.Next() && len(out) < ports.MaxHeaders {
		name := fields.Key()
		lower := strings.ToLower(name)
		if seen[lower] || !validHeaderName(name) || droppedHeader(lower) {
			continue
		}
		seen[lower] = true
		value := cleanLine(fields.Value())
		room := ports.MaxHeaderLineChars - len(name) - 2
		if lower == "references" {
			value = trimReferences(value, room)
		}
		if value == "" || !utf8.ValidString(value) || utf8.RuneCountInString(value) > room {
			continue
		}
		out[name] = value
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// droppedHeader says which header fields (lower case) customHeaders leaves out.
func droppedHeader(lower string) bool {
	switch lower {
	case "from", "to", "cc", "bcc", "reply-to", "subject", "date", "message-id", "sender", "mime-version",
		"received", "return-path", "dkim-signature", "domainkey-signature", "authentication-results",
		"received-spf", "delivered-to", "x-original-to":
		return true
	}
	for _, prefix := range []string{reservedHeaderPrefix, "content-", "arc-", "resent-"} {
		if strings.HasPrefix(lower, prefix) {
			return true
		}
	}
	return false
}

// trimReferences fits a References value into room characters: the first message id, then the latest
// ones that fit.
func trimReferences(value string, room int) string {
	if len(value) <= room {
		return value
	}
	ids := strings.Fields(value)
	if len(ids) == 0 || len(ids[0]) > room {
		return ""
	}
	kept, n := []string{}, len(ids[0])
	for i := len(ids) - 1; i > 0; i-- {
		if n+1+len(ids[i]) > room {
			break
		}
		n += 1 + len(ids[i])
		kept = append(kept, ids[i])
	}
	slices.Reverse(kept)
	return strings.Join(append([]string{ids[0]}, kept...), " ")
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// readParts walks the MIME tree: the first text/plain and text/html parts that are not attachments are
// the bodies; every other leaf is an attachment, inline when it has a Content-ID the HTML can reference
// (RFC 2392) and is not marked as an attachment. An inline part without a Content-ID cannot be referenced,
// so it travels as an ordinary attachment (the send API requires contentId for inline parts).
func readParts(mr *mail.Reader, req *ports.SendRequest) error {
	var haveText, haveHTML bool
	var attached int64 // decoded attachment bytes so far
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil && !message.IsUnknownCharset(err) {
			return invalid("message", "unreadable MIME part: "+err.Error())
		}
		var h message.Header
		switch ph := p.Header.(type) {
		case *mail.InlineHeader:
			h = ph.Header
		case *mail.AttachmentHeader:
			h = ph.Header
		}
		ctype, params, err := h.ContentType()
		if err != nil || ctype == "" {
			// RFC 2045 §5.2: a missing or unparseable Content-Type is text/plain. go-message hands back the
			// raw value with its error, which must never become the part's type.
			ctype, params = "text/plain", nil
		}
		disp, dparams, _ := h.ContentDisposition()
		filename := dparams["filename"]
		if filename == "" {
			filename = params["name"]
		}
		filename = cleanLine(decodeWords(filename))
		isBody := disp != "attachment" && filename == ""
		wantBody := isBody && (ctype == "text/plain" && !haveText || ctype == "text/html" && !haveHTML)
		// A part that will be an attachment is read up to one byte past SPEC §8's bound, so an oversized
		// one is refused without being held whole.
		limit := int64(maxBodyBytes)
		if !wantBody {
			limit = ports.MaxAttachmentBytes + 1
		}
		body, err := io.ReadAll(io.LimitReader(p.Body, limit))
		if err != nil {
			return invalid("message", "unreadable MIME part: "+err.Error())
		}
		if int64(len(body)) == limit {
			if wantBody {
				return invalid("message", "a text body is too large")
			}
			return invalid(fmt.Sprintf("attachments.%d.content", len(req.Attachments)), msgAttachmentTooLarge)
		}

		switch {
		case isBody && ctype == "text/plain" && !haveText:
			if req.Text, err = toUTF8(body, params["charset"]); err != nil {
				return err
			}
			haveText = true
			continue
		case isBody && ctype == "text/html" && !haveHTML:
			if req.HTML, err = toUTF8(body, params["charset"]); err != nil {
				return err
			}
			haveHTML = true
			continue
		}

		if len(req.Attachments) == ports.MaxAttachments {
			return invalid("attachments", fmt.Sprintf("expected at most %d attachments", ports.MaxAttachments))
		}
		if attached += int64(len(body)); attached > ports.MaxTotalAttachmentBytes {
			return invalid("attachments", msgAttachmentsTooLarge)
		}
		if filename == "" {
			filename = fmt.Sprintf("attachment-%d", len(req.Attachments)+1)
			if ctype == "message/rfc822" {
				filename += ".eml"
			}
		}
		contentID := cleanLine(strings.Trim(strings.TrimSpace(h.Get("Content-Id")), "<>"))
		req.Attachments = append(req.Attachments, ports.Attachment{
			Filename:    filename,
			ContentType: contentType(ctype, params),
			Content:     body,
			Inline:      contentID != "" && disp != "attachment",
			ContentID:   contentID,
		})
	}
}

// contentType re-serialises a part's media type without its name parameter (the filename travels
// separately).
func contentType(ctype string, params map[string]string) string {
	p := maps.Clone(params)
	delete(p, "name")
	if s := mime.FormatMediaType(ctype, p); s != "" {
		return s
	}
	return ctype
}

// decodeWords decodes RFC 2047 encoded words, which many clients use in filename parameters although RFC
// 2231 is the standard form (mime.ParseMediaType already decodes that).
func decodeWords(s string) string {
	if !strings.Contains(s, "=?") {
		return s
	}
	if d, err := new(mime.WordDecoder).DecodeHeader(s); err == nil {
		return d
	}
	return s
}

// cleanLine drops control characters so a value can only ever be one header line.
func cleanLine(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s))
}

// toUTF8 converts a text body from its declared charset. go-message converts only UTF-8 and US-ASCII without
// a charset table; Latin-1 and Windows-1252 (the common legacy ones) are converted here, anything else is
// accepted when it is valid UTF-8 anyway and refused otherwise.
func toUTF8(b []byte, charset string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(charset)) {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		if utf8.Valid(b) {
			return string(b), nil
		}
		return decodeSingleByte(b, &windows1252), nil
	case "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "l1":
		return decodeSingleByte(b, nil), nil
	case "windows-1252", "cp1252":
		return decodeSingleByte(b, &windows1252), nil
	}
	if utf8.Valid(b) {
		return string(b), nil
	}
	return "", invalid("message", "unsupported charset "+cleanLine(charset)+"; use UTF-8")
}

// decodeSingleByte maps each byte to a rune: Latin-1 is the identity on 0x00-0xFF; Windows-1252 differs in
// 0x80-0x9F (high, when given).
func decodeSingleByte(b []byte, high *[32]rune) string {
	var sb strings.Builder
	sb.Grow(len(b))
	for _, c := range b {
		r := rune(c)
		if high != nil && c >= 0x80 && c < 0xa0 && high[c-0x80] != 0 {
			r = high[c-0x80]
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// windows1252 is the 0x80-0x9F row of Windows-1252 (0 where the code page leaves a hole).
var windows1252 = [32]rune{
	'€', 0, '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 0, 'Ž', 0,
	0, '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', 0, 'ž', 'Ÿ',
}
