package edge

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/mail"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/validation"

	"github.com/postmill/postmill/ports"
)

// The send body of SPEC §4.2. The schema carries every rule a schema can express; the rules it cannot
// (the shape of `to` inside its oneOf, header names, attachment sizes) are checked by Resolve before the
// handler runs, so they come out as ordinary 400 details with dot-joined paths — for a single send and for
// every item of a batch alike.

// noCRLF is the pattern of every string that ends up in a header line (RFC 5322 §2.2: a header field is one
// logical line; a CR or LF in a value would inject headers).
const noCRLF = `^[^\r\n]*$`

// headerName is SPEC §8's grammar for custom header names; it is a subset of RFC 5322 §3.6.8's ftext.
var headerName = regexp.MustCompile(`^[A-Za-z0-9-]+$`)

type sendEmailRequest struct {
	_       struct{}      `json:"-" additionalProperties:"true"`
	From    string        `json:"from" format:"email" doc:"Sender address, optionally with a display name; its domain must be a verified domain of the organization"`
	To      recipientList `json:"to" doc:"One address, or a non-empty array of addresses"`
	Cc      []string      `json:"cc,omitempty" format:"email" doc:"Cc addresses"`
	Bcc     []string      `json:"bcc,omitempty" format:"email" doc:"Bcc addresses; delivered to but never shown in the headers"`
	Subject string        `json:"subject,omitempty" minLength:"1" pattern:"^[^\\r\\n]*$" patternDescription:"a single line (no CR or LF)" doc:"Required unless template is supplied; with a template, validated but the published subject is used"`
	HTML    string        `json:"html,omitempty" doc:"HTML body"`
	Text    string        `json:"text,omitempty" doc:"Plain-text body"`
	ReplyTo string        `json:"replyTo,omitempty" format:"email" doc:"Sets Reply-To"`
	// Template is validated for shape; rendering belongs to the templates issue.
	Template    *templateRequest    `json:"template,omitempty" doc:"Send the published version of a template, with its variables interpolated; an unknown or unpublished template fails the send before anything is written"`
	Attachments []attachmentRequest `json:"attachments,omitempty" maxItems:"20" doc:"At most 20; each at most 10 MiB and all together at most 25 MiB decoded, checked from the base64 length before decoding"`
	Headers     headerMap           `json:"headers,omitempty"`
	Tags        map[string]string   `json:"tags,omitempty" doc:"String values only; stored and echoed on the message"`
	Metadata    jsonObject          `json:"metadata,omitempty" doc:"Any JSON object; stored and echoed, never sent to recipients"`
	Sandbox     bool                `json:"sandbox,omitempty" doc:"Run every check (including metering) without handing the message to the delivery queue"`
	ScheduledAt *time.Time          `json:"scheduledAt,omitempty" doc:"UTC instant (RFC 3339, e.g. 2026-11-21T09:00:00Z); in the future the message waits as scheduled, otherwise it is sent at once"`
}

type templateRequest struct {
	_         struct{}       `json:"-" additionalProperties:"true"`
	ID        string         `json:"id" format:"uuid" doc:"Template id; the template must have a published version"`
	Variables map[string]any `json:"variables,omitempty" doc:"Default {}"`
}

type attachmentRequest struct {
	_           struct{} `json:"-" additionalProperties:"true"`
	Filename    string   `json:"filename" minLength:"1" pattern:"^[^\\r\\n]*$" patternDescription:"a single line (no CR or LF)" doc:"Metadata only; storage keys are generated"`
	ContentType string   `json:"contentType" minLength:"1" pattern:"^[^\\r\\n]*$" patternDescription:"a single line (no CR or LF)" doc:"MIME type, such as application/pdf"`
	Content     string   `json:"content" doc:"Base64 (standard or URL-safe alphabet, padding optional), at most 10 MiB decoded"`
	Inline      bool     `json:"inline,omitempty" doc:"Show in the body (Content-Disposition: inline) rather than as a download"`
	ContentID   string   `json:"contentId,omitempty" pattern:"^[^\\r\\n<>]*$" patternDescription:"a single line without angle brackets" doc:"Content-ID for cid: references from the HTML, without angle brackets"`
}

// TransformSchema documents content as base64 without huma's contentEncoding check, which would decode every
// attachment during validation — before the size check and in the standard alphabet only.
func (attachmentRequest) TransformSchema(_ huma.Registry, s *huma.Schema) *huma.Schema {
	if c := s.Properties["content"]; c != nil {
		c.Extensions = map[string]any{"contentEncoding": "base64"}
	}
	return s
}

// recipientList is `to`: a single address or a non-empty array of addresses. The OpenAPI document shows it as
// a oneOf; the request keeps the form the client used so Resolve can point at the offending element.
type recipientList struct {
	addrs  []string
	set    bool // decoded from a string or an array (absent or another JSON type leaves it false)
	single bool // sent as a string
}

// Schema documents the two accepted forms.
func (recipientList) Schema(huma.Registry) *huma.Schema {
	one := 1
	return &huma.Schema{OneOf: []*huma.Schema{
		{Type: huma.TypeString, Format: "email"},
		{Type: huma.TypeArray, MinItems: &one, Items: &huma.Schema{Type: huma.TypeString, Format: "email"}},
	}}
}

// UnmarshalJSON accepts a JSON string or an array of strings.
func (r *recipientList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*r = recipientList{addrs: []string{one}, set: true, single: true}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil || many == nil {
		return errors.New("to must be a string or an array of strings")
	}
	*r = recipientList{addrs: many, set: true}
	return nil
}

// headerMap is `headers`: names per SPEC §8, values a single line each.
type headerMap map[string]string

// Schema documents the value rule (enforced by huma) and the name rule (enforced by Resolve; huma has no
// propertyNames support, so it travels as a JSON Schema extension).
func (headerMap) Schema(huma.Registry) *huma.Schema {
	value := &huma.Schema{Type: huma.TypeString, Pattern: noCRLF, PatternDescription: "a single line (no CR or LF)"}
	value.PrecomputeMessages()
	return &huma.Schema{
		Type:                 huma.TypeObject,
		Description:          "Custom headers emitted as real RFC 5322 header fields; names match ^[A-Za-z0-9-]+$",
		AdditionalProperties: value,
		Extensions:           map[string]any{"propertyNames": map[string]any{"pattern": headerName.String()}},
	}
}

// jsonObject is `metadata`: any JSON object, kept byte for byte from the request to the store and back.
type jsonObject json.RawMessage

// Schema documents an arbitrary object.
func (jsonObject) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeObject, AdditionalProperties: true}
}

// UnmarshalJSON keeps the raw bytes (huma has already checked that they are an object).
func (o *jsonObject) UnmarshalJSON(b []byte) error {
	*o = append((*o)[:0], b...)
	return nil
}

// MarshalJSON writes the stored object, or {} when there is none.
func (o jsonObject) MarshalJSON() ([]byte, error) {
	if len(o) == 0 || string(o) == "null" {
		return []byte("{}"), nil
	}
	return []byte(o), nil
}

// Resolve checks what the schema cannot: the element of `to` that is wrong, header names, and attachment
// sizes computed from the base64 length, before anything is decoded or the core is called (SPEC §4.2, §8).
// A body over the route's bound never gets here: sizeGuard (email_size.go) reports its size violations.
// The bounds SPEC §8 leaves open (recipients, subject, bodies, tags, metadata, headers) are the core's, so
// that a batch item breaking one fails alone and SMTP submission meets them too.
// prefix is "body" for a single send and "body.emails[i]" in a batch. huma runs it even when the body
// failed the schema and was decoded only in part, so it only reports what is present and wrong.
func (r *sendEmailRequest) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	var errs []error
	at := func(field, msg string) {
		loc := prefix.String()
		if field != "" {
			loc += "." + field
		}
		errs = append(errs, &huma.ErrorDetail{Location: loc, Message: msg})
	}

	if r.To.set {
		if !r.To.single && len(r.To.addrs) == 0 {
			at("to", huma.ErrorFormatter(validation.MsgExpectedMinItems, 1))
		}
		for i, a := range r.To.addrs {
			if _, err := mail.ParseAddress(a); err != nil {
				field := "to"
				if !r.To.single {
					field = "to[" + strconv.Itoa(i) + "]"
				}
				at(field, huma.ErrorFormatter(validation.MsgExpectedRFC5322Email, err))
			}
		}
	}

	for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
		if !headerName.MatchString(name) {
			at("headers."+name, "expected header name to match ^[A-Za-z0-9-]+$")
		}
	}

	var total int64
	overTotal := false
	for i, a := range r.Attachments {
		field := "attachments[" + strconv.Itoa(i) + "].content"
		n := decodedLen(a.Content)
		total += n
		switch {
		case n > ports.MaxAttachmentBytes:
			at(field, msgAttachmentOver)
		case total > ports.MaxTotalAttachmentBytes && !overTotal:
			// Named once, at the attachment that crosses the total.
			overTotal = true
			at(field, msgAttachmentsSum)
		}
	}
	return errs
}

// decodedLen is the decoded size of base64 text without decoding it: padding does not count, nor do the
// line breaks encoding/base64 skips (RFC 4648 §3.1, §4: four characters carry three octets).
func decodedLen(s string) int64 {
	n := len(s)
	if strings.ContainsAny(s, "\r\n") {
		n -= strings.Count(s, "\r") + strings.Count(s, "\n")
	}
	for i, pad := len(s)-1, 0; i >= 0 && pad < 2; i-- {
		switch s[i] {
		case '=':
			n--
			pad++
		case '\r', '\n':
		default:
			pad = 2
		}
	}
	return int64(n) * 3 / 4
}

// decodeBase64 accepts the standard and the URL-safe alphabet (RFC 4648 §4, §5), padded or not.
func decodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", "", "\n", "").Replace(s)
	}
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc.DecodeString(s)
}

// toSendRequest converts a validated body; field names the item in error paths ("" for a single send,
// "emails.3" in a batch). The only failure left at this point is base64 that does not decode. Cross-field
// rules (subject or html/text unless a template is given) are the core's: it applies them to every entry
// point, SMTP submission included.
func (r *sendEmailRequest) toSendRequest(field string) (ports.SendRequest, []ports.FieldViolation) {
	var bad []ports.FieldViolation
	req := ports.SendRequest{
		From:        r.From,
		To:          r.To.addrs,
		Cc:          r.Cc,
		Bcc:         r.Bcc,
		Subject:     r.Subject,
		HTML:        r.HTML,
		Text:        r.Text,
		ReplyTo:     r.ReplyTo,
		Headers:     r.Headers,
		Tags:        r.Tags,
		Sandbox:     r.Sandbox,
		ScheduledAt: utcPtr(r.ScheduledAt),
	}
	if len(r.Metadata) > 0 {
		req.Metadata = json.RawMessage(r.Metadata)
	}
	if r.Template != nil {
		vars := r.Template.Variables
		if vars == nil {
			vars = map[string]any{}
		}
		req.Template = &ports.TemplateRef{ID: canonicalUUID(r.Template.ID), Variables: vars}
	}
	for i, a := range r.Attachments {
		content, err := decodeBase64(a.Content)
		if err != nil {
			bad = append(bad, ports.FieldViolation{
				Path:    joinPath(field, fmt.Sprintf("attachments.%d.content", i)),
				Message: "expected base64 (standard or URL-safe alphabet)",
			})
			continue
		}
		req.Attachments = append(req.Attachments, ports.Attachment{
			Filename:    a.Filename,
			ContentType: a.ContentType,
			Content:     content,
			Inline:      a.Inline,
			ContentID:   a.ContentID,
		})
	}
	return req, bad
}
