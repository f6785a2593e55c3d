package sending

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// FuzzValidateSend builds send requests from arbitrary field values (what the REST body and SMTP submission
// hand the core) and checks validateSend's promises: it never panics nor changes the caller's request, it
// is deterministic, every violation names a field of the body and says something; and a request it accepts
// is normalised for good: validating the output again finds nothing and changes nothing, the address of
// every mailbox is a bare addr-spec, recipients are in normaliseMailbox's canonical form, and nothing that
// becomes a header line carries CR or LF.
func FuzzValidateSend(f *testing.F) {
	type seed struct {
		from, to, cc, replyTo, subject, html, text, headerName, headerValue string
		metadata                                                            []byte
		filename, contentType, contentID                                    string
		content                                                             []byte
		inline                                                              bool
		attachments                                                         uint8
		templateID, idempotencyKey                                          string
	}
	for _, s := range []seed{
		{from: "news@acme.example", to: "alice@example.com", subject: "Hello", text: "Hi"},
		{from: "Acme News <news@acme.example>", to: "a@example.com,b@example.org", cc: "c@example.com",
			replyTo: "support@acme.example", subject: "Spring", html: "<p>Hi</p>", headerName: "X-Campaign",
			headerValue: "spring", metadata: []byte(`{"order": 42}`), filename: "logo.png", contentType: "image/png",
			contentID: "<logo>", content: []byte{0x89, 'P', 'N', 'G'}, inline: true, attachments: 1,
			idempotencyKey: "order-42"},
		{from: "  <News@Acme.example> ", to: " alice@example.com\t", replyTo: " Support <support@acme.example>  ",
			subject: "s", text: "t", metadata: []byte(" null "), filename: "l.png", contentType: "image/png",
			contentID: " <logo@acme> ", inline: true, attachments: 1},
		{from: "=?utf-8?q?Ad=C3=A1?= <ada@acme.example>", to: "b@example.com", templateID: "0190a3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"},
		{from: "news@acme.example", to: `Bob <b@example.com>,"L; A" <a@example.com>,=?utf-8?q?Zo=C3=AB?= <z@example.com>`,
			cc: "<c@example.com>,Friends: d@example.com;", subject: "s", text: "t"},
		{from: "news@acme.example\r\nBcc: x@y.com", to: "bad", subject: "a\r\nb", text: "\x00",
			headerName: "Content-Type", headerValue: "text/html", metadata: []byte(`[]`)},
		{from: `"a\"b" <a@acme.example>`, to: `"quoted"@example.com`, cc: "x@[192.0.2.1]", subject: "s", html: "h",
			headerName: "X-A", headerValue: "v\x00", metadata: []byte(`{"a":"\u0000"}`)},
		{from: "news@acme.example", to: "a@example.com", subject: "s", text: "t", filename: "f", contentType: "c",
			content: []byte("x"), attachments: 21, idempotencyKey: "key\x7f"},
		{from: "news@acme.example", to: "a@-bad-.example", subject: "s", text: "t", filename: "f\r\n",
			contentType: "", contentID: "<<x>>", attachments: 1, templateID: "not-a-uuid"},
		{from: "news@acme.example", to: "a@example.com", subject: "s", text: "t",
			headerName: "X-" + strings.Repeat("n", 2995), headerValue: strings.Repeat("k", 300)},
	} {
		f.Add(s.from, s.to, s.cc, s.replyTo, s.subject, s.html, s.text, s.headerName, s.headerValue, s.metadata,
			s.filename, s.contentType, s.contentID, s.content, s.inline, s.attachments, s.templateID, s.idempotencyKey)
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	fields := []string{"from", "to", "cc", "bcc", "replyTo", "subject", "html", "text", "template.id", "headers",
		"headers.", "tags", "tags.", "metadata", "attachments", "Idempotency-Key"}
	f.Fuzz(func(t *testing.T, from, to, cc, replyTo, subject, html, text, headerName, headerValue string,
		metadata []byte, filename, contentType, contentID string, content []byte, inline bool, attachments uint8,
		templateID, idempotencyKey string) {
		at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
		req := ports.SendRequest{
			From: from, To: split(to), Cc: split(cc), ReplyTo: replyTo, Subject: subject, HTML: html, Text: text,
			Metadata: json.RawMessage(metadata), IdempotencyKey: idempotencyKey, ScheduledAt: &at,
		}
		if len(req.Cc) > 1 {
			req.Bcc = req.Cc[1:]
		}
		if headerName != "" {
			req.Headers = map[string]string{headerName: headerValue}
			req.Tags = map[string]string{headerValue: headerName}
		}
		if templateID != "" {
			req.Template = &ports.TemplateRef{ID: templateID}
		}
		for range int(attachments) % (ports.MaxAttachments + 2) {
			req.Attachments = append(req.Attachments, ports.Attachment{
				Filename: filename, ContentType: contentType, Content: content, Inline: inline, ContentID: contentID})
		}
		before := cloneSendRequest(req)

		out, violations := validateSend(req)
		if !reflect.DeepEqual(req, before) {
			t.Fatalf("validateSend changed its argument:\n got %#v\nwant %#v", req, before)
		}
		out2, violations2 := validateSend(req)
		if !reflect.DeepEqual(out, out2) || !reflect.DeepEqual(violations, violations2) {
			t.Fatal("validateSend is not deterministic")
		}
		for _, v := range violations {
			known := v.Path == ""
			for _, p := range fields {
				known = known || v.Path == p || strings.HasPrefix(v.Path, p) && (strings.HasSuffix(p, ".") ||
					v.Path[len(p)] == '.')
			}
			if !known || v.Message == "" {
				t.Fatalf("violation %+v: want a body field and a message", v)
			}
		}
		if len(violations) > 0 {
			return
		}

		again, violations := validateSend(out)
		if len(violations) != 0 {
			t.Fatalf("accepted request %#v fails again: %+v", out, violations)
		}
		if !reflect.DeepEqual(again, out) {
			t.Fatalf("normalisation is not stable:\nonce  %#v\ntwice %#v", out, again)
		}
		if a := senderAddress(out.From); !validAddrSpec(a) {
			t.Fatalf("from %q has the address %q", out.From, a)
		}
		if out.ReplyTo != "" && !validAddrSpec(senderAddress(out.ReplyTo)) {
			t.Fatalf("replyTo %q has the address %q", out.ReplyTo, senderAddress(out.ReplyTo))
		}
		for _, list := range [][]string{out.To, out.Cc, out.Bcc} {
			for _, a := range list {
				r := recipientOf(ports.RecipientTo, a)
				if !validAddrSpec(r.Address) || a != normaliseMailbox(r.Name, r.Address) || strings.ContainsAny(a, "\r\n\x00") {
					t.Fatalf("recipient %q is not a canonical mailbox (%q %q)", a, r.Name, r.Address)
				}
			}
		}
		lines := []string{out.From, out.ReplyTo, out.Subject}
		for k, v := range out.Headers {
			lines = append(lines, k, v)
		}
		for _, a := range out.Attachments {
			lines = append(lines, a.Filename, a.ContentType, a.ContentID)
			if strings.ContainsAny(a.ContentID, "<>") {
				t.Fatalf("content id %q keeps angle brackets", a.ContentID)
			}
		}
		for _, l := range lines {
			if strings.ContainsAny(l, "\r\n\x00") || !utf8.ValidString(l) {
				t.Fatalf("header value %q is not one storable line", l)
			}
		}
		if out.Metadata != nil && (!json.Valid(out.Metadata) || out.Metadata[0] != '{') {
			t.Fatalf("metadata %q is not a JSON object", out.Metadata)
		}
		if out.ScheduledAt.Location() != time.UTC || !out.ScheduledAt.Equal(at) {
			t.Fatalf("scheduledAt %v, want %v in UTC", out.ScheduledAt, at)
		}
	})
}

// cloneSendRequest copies everything validateSend could write through: slices, maps and attachments.
func cloneSendRequest(r ports.SendRequest) ports.SendRequest {
	c := r
	c.To, c.Cc, c.Bcc = slices.Clone(r.To), slices.Clone(r.Cc), slices.Clone(r.Bcc)
	c.Headers, c.Tags = maps.Clone(r.Headers), maps.Clone(r.Tags)
	c.Metadata = bytes.Clone(r.Metadata)
	c.Attachments = slices.Clone(r.Attachments)
	if r.Template != nil {
		tmpl := *r.Template
		c.Template = &tmpl
	}
	if r.ScheduledAt != nil {
		at := *r.ScheduledAt
		c.ScheduledAt = &at
	}
	return c
}
