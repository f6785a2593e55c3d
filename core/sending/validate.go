package sending

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/postmill/postmill/ports"
)

// Field bounds of the send body (SPEC §4.2, §8).
const (
	// maxHeaderLineLen is RFC 5322 §2.1.1's line limit, which bounds a From or Reply-To with a display name.
	maxHeaderLineLen = 998
	// maxIdempotencyKeyLen keeps the key comfortably inside one index entry.
	maxIdempotencyKeyLen = 256
)

// Violation messages. They say what is expected, never echo the value.
const (
	msgEmail            = "must be a valid email address"
	msgToRequired       = "must contain at least one address"
	msgNoCRLF           = "must not contain CR or LF"
	msgStorable         = "must be valid UTF-8 without NUL characters"
	msgSubjectRequired  = "is required unless template is given"
	msgBodyRequired     = "html or text is required unless template is given"
	msgHeaderName       = "header names must match ^[A-Za-z0-9-]+$"
	msgMetadataObject   = "must be a JSON object"
	msgTemplateID       = "must be a UUID"
	msgTooManyAttach    = "must contain at most 20 attachments"
	msgAttachTooLarge   = "must be at most 10 MiB decoded"
	msgAttachTotal      = "must total at most 25 MiB decoded"
	msgFilename         = "must be 1 or more characters without CR or LF"
	msgContentType      = "must be 1 or more characters without CR or LF"
	msgContentID        = "must not contain CR, LF or angle brackets inside"
	msgInlineContentID  = "inline attachments require contentId"
	msgIdempotencyKey   = "must be 1 to 256 printable characters"
	msgFromLen          = "must be at most 998 characters"
	headerOwnedTemplate = "Postmill sets the %s header itself%s"
)

// Violation messages of the bounds in ports/limits.go.
var (
	msgTooManyRecipients = fmt.Sprintf("to, cc and bcc must hold at most %d addresses together", ports.MaxRecipients)
	msgSubjectLen        = fmt.Sprintf("must be at most %d characters", ports.MaxSubjectChars)
	msgBodyPartLen       = fmt.Sprintf("must be at most %d MiB", ports.MaxBodyPartBytes>>20)
	msgTooManyTags       = fmt.Sprintf("must hold at most %d entries", ports.MaxTags)
	msgTagKeyLen         = fmt.Sprintf("keys must be at most %d characters", ports.MaxTagChars)
	msgTagValueLen       = fmt.Sprintf("must be at most %d characters", ports.MaxTagChars)
	msgMetadataLen       = fmt.Sprintf("must be at most %d KiB as JSON", ports.MaxMetadataBytes>>10)
	msgTooManyHeaders    = fmt.Sprintf("must hold at most %d entries", ports.MaxHeaders)
	msgHeaderNameLen     = fmt.Sprintf("names must be at most %d characters", ports.MaxHeaderLineChars-2)
	msgHeaderLineLen     = fmt.Sprintf("must fit one %d-character header line with its name (RFC 5322 §2.1.1)", ports.MaxHeaderLineChars)
	msgAttachFieldLen    = fmt.Sprintf("must be at most %d characters", ports.MaxAttachmentFieldChars)
)

// ownedHeaders are the headers Postmill writes itself (RFC 5322 §3.6, RFC 2045 §3-6, RFC 6376 §3.5, RFC 5321
// §4.4): letting a caller set them would duplicate or contradict the real ones, break the DKIM signature or
// the bounce routing. The value is the hint shown with the refusal; keys are lower-case.
var ownedHeaders = map[string]struct{ name, hint string }{
	"from":                      {"From", "; use the from field"},
	"to":                        {"To", "; use the to field"},
	"cc":                        {"Cc", "; use the cc field"},
	"bcc":                       {"Bcc", "; use the bcc field"},
	"subject":                   {"Subject", "; use the subject field"},
	"reply-to":                  {"Reply-To", "; use the replyTo field"},
	"date":                      {"Date", ""},
	"message-id":                {"Message-ID", ""},
	"mime-version":              {"MIME-Version", ""},
	"content-type":              {"Content-Type", ""},
	"content-transfer-encoding": {"Content-Transfer-Encoding", ""},
	"dkim-signature":            {"DKIM-Signature", ""},
	"return-path":               {"Return-Path", ""},
}

// validateSend checks a send request against SPEC §4.2 and returns it normalised: addresses trimmed, From
// and Reply-To reduced to the bare address when they carry no display name, recipients in the canonical
// form of normaliseMailbox (see mailbox.go), a JSON null metadata dropped, content ids stripped of angle
// brackets, scheduledAt in UTC. Every violation is reported (not only the first), with the dot-joined paths
// of SPEC §7; cross-field rules report against their object ("" for the body, attachments.N for an
// attachment).
func validateSend(req ports.SendRequest) (ports.SendRequest, []ports.FieldViolation) {
	var v violations

	if from, msg := normaliseSender(req.From); msg == "" {
		req.From = from
	} else {
		v.add("from", msg)
	}

	// At least one recipient. The REST schema requires `to` itself (SPEC §4.2); a message submitted over
	// SMTP may address only Cc or Bcc recipients ("To: undisclosed-recipients:;", RFC 5322 §3.6.3).
	if len(req.To)+len(req.Cc)+len(req.Bcc) == 0 {
		v.add("to", msgToRequired)
	}
	if len(req.To)+len(req.Cc)+len(req.Bcc) > ports.MaxRecipients {
		v.add("", msgTooManyRecipients)
	}
	req.To = normaliseRecipients(&v, "to", req.To)
	req.Cc = normaliseRecipients(&v, "cc", req.Cc)
	req.Bcc = normaliseRecipients(&v, "bcc", req.Bcc)

	if req.ReplyTo != "" {
		if replyTo, msg := normaliseSender(req.ReplyTo); msg == "" {
			req.ReplyTo = replyTo
		} else {
			v.add("replyTo", msg)
		}
	}

	switch {
	case req.Subject == "" && req.Template == nil:
		v.add("subject", msgSubjectRequired)
	case strings.ContainsAny(req.Subject, "\r\n"):
		v.add("subject", msgNoCRLF)
	case !storable(req.Subject):
		v.add("subject", msgStorable)
	case utf8.RuneCountInString(req.Subject) > ports.MaxSubjectChars:
		v.add("subject", msgSubjectLen)
	}
	if req.HTML == "" && req.Text == "" && req.Template == nil {
		v.add("", msgBodyRequired)
	}
	for _, part := range []struct{ path, body string }{{"html", req.HTML}, {"text", req.Text}} {
		switch {
		case len(part.body) > ports.MaxBodyPartBytes:
			v.add(part.path, msgBodyPartLen)
		case !storable(part.body):
			v.add(part.path, msgStorable)
		}
	}

	if req.Template != nil {
		if _, err := uuid.Parse(req.Template.ID); err != nil {
			v.add("template.id", msgTemplateID)
		}
	}

	validateHeaders(&v, req.Headers)
	validateTags(&v, req.Tags)

	metadata, msg := normaliseMetadata(req.Metadata)
	if msg != "" {
		v.add("metadata", msg)
	}
	req.Metadata = metadata

	req.Attachments = validateAttachments(&v, req.Attachments)

	if req.IdempotencyKey != "" && !validIdempotencyKey(req.IdempotencyKey) {
		v.add("Idempotency-Key", msgIdempotencyKey)
	}
	if req.ScheduledAt != nil {
		at := req.ScheduledAt.UTC()
		req.ScheduledAt = &at
	}
	return req, v.list
}

// violations collects field violations in the order they are found.
type violations struct{ list []ports.FieldViolation }

func (v *violations) add(path, message string) {
	v.list = append(v.list, ports.FieldViolation{Path: path, Message: message})
}

// normaliseRecipients accepts each address as a mailbox (a bare address, or one with a display name),
// returns each in normaliseMailbox's canonical form and reports the invalid ones as path.N.
func normaliseRecipients(v *violations, path string, addrs []string) []string {
	if len(addrs) == 0 {
		return nil
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		name, addr, ok, nameOK := parseMailbox(a)
		switch {
		case !ok:
			v.add(path+"."+strconv.Itoa(i), msgEmail)
			out[i] = strings.TrimSpace(a)
		case !nameOK:
			v.add(path+"."+strconv.Itoa(i), msgDisplayName)
			out[i] = addr
		default:
			out[i] = normaliseMailbox(name, addr)
		}
	}
	return out
}

// validAddrSpec and validDomain are the address rules every tier applies alike (ports/address.go).
var (
	validAddrSpec = ports.ValidAddrSpec
	validDomain   = ports.ValidDomain
)

// normaliseSender accepts a from or replyTo value: a bare address, or a mailbox with a display name
// ("Acme <news@acme.com>", RFC 5322 §3.4 name-addr, RFC 2047 encoded words included), since senders
// usually carry one. The address inside follows validAddrSpec. A value without a display name is returned
// as the bare address (angle brackets dropped); one with a display name is returned trimmed, as given, for
// the MTA to parse and encode. msg is the violation, "" when the value is valid.
func normaliseSender(raw string) (string, string) {
	name, addr, ok, nameOK := parseMailbox(raw)
	switch {
	case !ok && utf8.RuneCountInString(strings.TrimSpace(raw)) > maxHeaderLineLen:
		return "", msgFromLen
	case !ok:
		return "", msgEmail
	case !nameOK:
		return "", msgDisplayName
	case name == "":
		return addr, ""
	}
	return strings.TrimSpace(raw), ""
}

// senderAddress returns the bare address of a normalised from or replyTo value.
func senderAddress(from string) string {
	addr, err := mail.ParseAddress(from)
	if err != nil {
		return from
	}
	return addr.Address
}

// addressDomain returns the lower-cased domain of a bare address.
func addressDomain(addr string) string {
	return strings.ToLower(addr[strings.LastIndexByte(addr, '@')+1:])
}

// validateTags bounds tags (ports.MaxTags entries, keys and values of ports.MaxTagChars characters) and
// checks that PostgreSQL can store them. An over-long key is reported against tags, never in a path that
// would echo it.
func validateTags(v *violations, tags map[string]string) {
	if len(tags) > ports.MaxTags {
		v.add("tags", msgTooManyTags)
	}
	longKey := false
	for _, k := range sortedKeys(tags) {
		switch {
		case utf8.RuneCountInString(k) > ports.MaxTagChars:
			longKey = true
		case !storable(k) || !storable(tags[k]):
			v.add("tags."+k, msgStorable)
		case utf8.RuneCountInString(tags[k]) > ports.MaxTagChars:
			v.add("tags."+k, msgTagValueLen)
		}
	}
	if longKey {
		v.add("tags", msgTagKeyLen)
	}
}

// validateHeaders checks custom headers in name order so the details are stable: at most ports.MaxHeaders,
// names match ^[A-Za-z0-9-]+$ (SPEC §8), values carry no CR or LF (no header injection, RFC 5322 §2.2),
// each "Name: value" fits one RFC 5322 §2.1.1 line, and the headers Postmill owns are refused. An
// over-long name is reported against headers, never in a path that would echo it.
func validateHeaders(v *violations, headers map[string]string) {
	if len(headers) > ports.MaxHeaders {
		v.add("headers", msgTooManyHeaders)
	}
	longName := false
	for _, name := range sortedKeys(headers) {
		path := "headers." + name
		value := headers[name]
		switch {
		case len(name) > ports.MaxHeaderLineChars-2:
			longName = true
		case !validHeaderName(name):
			v.add(path, msgHeaderName)
		case ownedHeaders[strings.ToLower(name)].name != "":
			owned := ownedHeaders[strings.ToLower(name)]
			v.add(path, fmt.Sprintf(headerOwnedTemplate, owned.name, owned.hint))
		case strings.ContainsAny(value, "\r\n"):
			v.add(path, msgNoCRLF)
		case !storable(value):
			v.add(path, msgStorable)
		case len(name)+2+utf8.RuneCountInString(value) > ports.MaxHeaderLineChars:
			v.add(path, msgHeaderLineLen)
		}
	}
	if longName {
		v.add("headers", msgHeaderNameLen)
	}
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// normaliseMetadata accepts absent metadata, JSON null (the same thing) or a JSON object of at most
// ports.MaxMetadataBytes. A \u0000 escape is refused because PostgreSQL's jsonb cannot store it.
func normaliseMetadata(raw json.RawMessage) (json.RawMessage, string) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil, ""
	}
	if len(trimmed) > ports.MaxMetadataBytes {
		return nil, msgMetadataLen
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, msgMetadataObject
	}
	if bytes.Contains(trimmed, []byte(`\u0000`)) {
		return nil, msgStorable
	}
	return trimmed, ""
}

// validateAttachments applies SPEC §8's bounds to decoded sizes (the edge already checked them from the
// base64 length before decoding) and the attachment object's rules, and strips angle brackets from content
// ids (callers write "logo" or "<logo>"; the MTA adds the brackets of RFC 2392).
func validateAttachments(v *violations, atts []ports.Attachment) []ports.Attachment {
	if len(atts) == 0 {
		return nil
	}
	if len(atts) > ports.MaxAttachments {
		v.add("attachments", msgTooManyAttach)
	}
	out := make([]ports.Attachment, len(atts))
	var total int64
	for i, a := range atts {
		path := "attachments." + strconv.Itoa(i)
		switch {
		case a.Filename == "" || strings.ContainsAny(a.Filename, "\r\n") || !storable(a.Filename):
			v.add(path+".filename", msgFilename)
		case utf8.RuneCountInString(a.Filename) > ports.MaxAttachmentFieldChars:
			v.add(path+".filename", msgAttachFieldLen)
		}
		switch {
		case a.ContentType == "" || strings.ContainsAny(a.ContentType, "\r\n") || !storable(a.ContentType):
			v.add(path+".contentType", msgContentType)
		case utf8.RuneCountInString(a.ContentType) > ports.MaxAttachmentFieldChars:
			v.add(path+".contentType", msgAttachFieldLen)
		}
		if len(a.Content) > ports.MaxAttachmentBytes {
			v.add(path+".content", msgAttachTooLarge)
		}
		total += int64(len(a.Content))
		a.ContentID = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(a.ContentID), "<"), ">"))
		switch {
		case strings.ContainsAny(a.ContentID, "\r\n<>") || !storable(a.ContentID):
			v.add(path+".contentId", msgContentID)
		case utf8.RuneCountInString(a.ContentID) > ports.MaxAttachmentFieldChars:
			v.add(path+".contentId", msgAttachFieldLen)
		case a.Inline && a.ContentID == "":
			v.add(path, msgInlineContentID)
		}
		out[i] = a
	}
	if total > ports.MaxTotalAttachmentBytes {
		v.add("attachments", msgAttachTotal)
	}
	return out
}

func validIdempotencyKey(k string) bool {
	if len(k) > maxIdempotencyKeyLen || !utf8.ValidString(k) {
		return false
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// storable reports whether PostgreSQL text can hold s: valid UTF-8 without NUL.
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.Contains(s, "\x00")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
