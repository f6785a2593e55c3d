package sending

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// validRequest is a send that passes every rule; each case breaks one thing.
func validRequest() ports.SendRequest {
	return ports.SendRequest{
		From:    "news@acme.example",
		To:      []string{"alice@example.com"},
		Subject: "Hello",
		Text:    "Hi",
	}
}

func TestValidateSend(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	tenMiB := make([]byte, 10*mib)
	nineMiB := tenMiB[:9*mib]
	domain253 := strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) + "." + strings.Repeat("e", 61)
	longAddr := strings.Repeat("a", 66) + "@" + domain253 // 320 characters
	att := func(mut func(*ports.Attachment)) []ports.Attachment {
		a := ports.Attachment{Filename: "a.pdf", ContentType: "application/pdf", Content: []byte("%PDF")}
		mut(&a)
		return []ports.Attachment{a}
	}
	tests := []struct {
		name      string
		mut       func(*ports.SendRequest)
		wantPaths []string
	}{
		{"valid", func(r *ports.SendRequest) {}, nil},
		{"everything valid", func(r *ports.SendRequest) {
			r.From = "Acme News <news@acme.example>"
			r.To = []string{"a@example.com", "b@example.org"}
			r.Cc = []string{"c@example.com"}
			r.Bcc = []string{"d@example.com"}
			r.ReplyTo = "support@acme.example"
			r.HTML = "<p>Hi</p>"
			r.Headers = map[string]string{"X-Campaign": "spring", "List-Unsubscribe": "<https://acme.example/u>"}
			r.Tags = map[string]string{"kind": "welcome"}
			r.Metadata = json.RawMessage(`{"order": 42}`)
			r.Attachments = []ports.Attachment{
				{Filename: "logo.png", ContentType: "image/png", Content: []byte{1}, Inline: true, ContentID: "logo"},
				{Filename: "big.bin", ContentType: "application/octet-stream", Content: tenMiB},
			}
			r.IdempotencyKey = "order-42"
		}, nil},

		{"from missing", func(r *ports.SendRequest) { r.From = "" }, []string{"from"}},
		{"from not an address", func(r *ports.SendRequest) { r.From = "acme" }, []string{"from"}},
		{"from with CRLF", func(r *ports.SendRequest) { r.From = "news@acme.example\r\nBcc: x@y.com" }, []string{"from"}},
		{"from address literal", func(r *ports.SendRequest) { r.From = "news@[192.0.2.1]" }, []string{"from"}},
		{"from dotless domain", func(r *ports.SendRequest) { r.From = "news@localhost" }, []string{"from"}},
		{"from two addresses", func(r *ports.SendRequest) { r.From = "a@acme.example, b@acme.example" }, []string{"from"}},
		{"from over 998 characters", func(r *ports.SendRequest) { r.From = strings.Repeat("n", 990) + " <news@acme.example>" }, []string{"from"}},

		{"to missing", func(r *ports.SendRequest) { r.To = nil }, []string{"to"}},
		{"to empty array", func(r *ports.SendRequest) { r.To = []string{} }, []string{"to"}},
		{"to third invalid", func(r *ports.SendRequest) { r.To = []string{"a@example.com", "b@example.com", "nope"} }, []string{"to.2"}},
		{"to empty string", func(r *ports.SendRequest) { r.To = []string{""} }, []string{"to.0"}},
		{"to with display name", func(r *ports.SendRequest) { r.To = []string{"Alice <alice@example.com>"} }, nil},
		{"to with quoted display name", func(r *ports.SendRequest) { r.To = []string{`"Lovelace, Ada" <ada@example.com>`} }, nil},
		{"to with encoded-word display name", func(r *ports.SendRequest) { r.To = []string{"=?utf-8?q?Ad=C3=A1?= <ada@example.com>"} }, nil},
		{"to with UTF-8 display name", func(r *ports.SendRequest) { r.To = []string{"Adá Lovelace <ada@example.com>"} }, nil},
		{"to in angle brackets", func(r *ports.SendRequest) { r.To = []string{"<alice@example.com>"} }, nil},
		{"to with two addresses in one", func(r *ports.SendRequest) { r.To = []string{"a@example.com, b@example.com"} }, []string{"to.0"}},
		{"to as a group", func(r *ports.SendRequest) { r.To = []string{"Friends: a@example.com;"} }, []string{"to.0"}},
		{"to display name without address", func(r *ports.SendRequest) { r.To = []string{"Alice"} }, []string{"to.0"}},
		{"to display name with bad address", func(r *ports.SendRequest) { r.To = []string{"Alice <alice@localhost>"} }, []string{"to.0"}},
		{"to display name with CRLF", func(r *ports.SendRequest) { r.To = []string{"Alice\r\nBcc: x@y.com <alice@example.com>"} }, []string{"to.0"}},
		{"to encoded display name decoding to CRLF", func(r *ports.SendRequest) {
			r.To = []string{"=?utf-8?q?Alice=0D=0ABcc:_x@y.com?= <alice@example.com>"}
		}, []string{"to.0"}},
		{"cc and bcc with display names", func(r *ports.SendRequest) {
			r.Cc = []string{"Carol <c@example.com>"}
			r.Bcc = []string{"Dave <d@example.com>", "Eve <eve@localhost>"}
		}, []string{"bcc.1"}},
		{"to display name over a header line", func(r *ports.SendRequest) {
			r.To = []string{strings.Repeat("n", 990) + " <alice@example.com>"}
		}, []string{"to.0"}},
		{"replyTo encoded display name decoding to a control character", func(r *ports.SendRequest) {
			r.ReplyTo = "=?utf-8?q?Support=07?= <support@acme.example>"
		}, []string{"replyTo"}},
		{"to with LF", func(r *ports.SendRequest) { r.To = []string{"alice@exam\nple.com"} }, []string{"to.0"}},
		{"to with CR", func(r *ports.SendRequest) { r.To = []string{"ali\rce@example.com"} }, []string{"to.0"}},
		{"to 320 characters", func(r *ports.SendRequest) { r.To = []string{longAddr} }, nil},
		{"to 321 characters", func(r *ports.SendRequest) { r.To = []string{"a" + longAddr} }, []string{"to.0"}},
		{"to domain of 255 characters", func(r *ports.SendRequest) { r.To = []string{"a@x." + domain253} }, []string{"to.0"}},
		{"to label over 63", func(r *ports.SendRequest) { r.To = []string{"a@" + strings.Repeat("b", 64) + ".com"} }, []string{"to.0"}},
		{"to label with hyphen edge", func(r *ports.SendRequest) { r.To = []string{"a@-example.com"} }, []string{"to.0"}},
		{"to underscore in domain", func(r *ports.SendRequest) { r.To = []string{"a@ex_ample.com"} }, []string{"to.0"}},
		{"to empty label", func(r *ports.SendRequest) { r.To = []string{"a@example..com"} }, []string{"to.0"}},
		{"to trimmed", func(r *ports.SendRequest) { r.To = []string{"  alice@example.com "} }, nil},
		{"cc second invalid", func(r *ports.SendRequest) { r.Cc = []string{"c@example.com", "c@"} }, []string{"cc.1"}},
		{"bcc first invalid", func(r *ports.SendRequest) { r.Bcc = []string{"@example.com"} }, []string{"bcc.0"}},

		{"replyTo invalid", func(r *ports.SendRequest) { r.ReplyTo = "support" }, []string{"replyTo"}},
		{"replyTo with name", func(r *ports.SendRequest) { r.ReplyTo = "Support <support@acme.example>" }, nil},

		{"subject missing", func(r *ports.SendRequest) { r.Subject = "" }, []string{"subject"}},
		{"subject with LF", func(r *ports.SendRequest) { r.Subject = "Hello\nBcc: x@y.com" }, []string{"subject"}},
		{"subject with CR", func(r *ports.SendRequest) { r.Subject = "Hello\r" }, []string{"subject"}},
		{"subject with NUL", func(r *ports.SendRequest) { r.Subject = "Hel\x00lo" }, []string{"subject"}},
		{"subject optional with template", func(r *ports.SendRequest) {
			r.Subject = ""
			r.Template = &ports.TemplateRef{ID: "0192f0c1-7a3b-7c00-8000-000000000001"}
		}, nil},
		{"subject with template still checked", func(r *ports.SendRequest) {
			r.Subject = "a\nb"
			r.Template = &ports.TemplateRef{ID: "0192f0c1-7a3b-7c00-8000-000000000001"}
		}, []string{"subject"}},

		{"no body", func(r *ports.SendRequest) { r.Text = "" }, []string{""}},
		{"html only", func(r *ports.SendRequest) { r.Text, r.HTML = "", "<p>Hi</p>" }, nil},
		{"body optional with template", func(r *ports.SendRequest) {
			r.Text = ""
			r.Template = &ports.TemplateRef{ID: "0192f0c1-7a3b-7c00-8000-000000000001"}
		}, nil},
		{"html with NUL", func(r *ports.SendRequest) { r.HTML = "a\x00" }, []string{"html"}},
		{"text invalid UTF-8", func(r *ports.SendRequest) { r.Text = "a\xff" }, []string{"text"}},
		{"template id not a UUID", func(r *ports.SendRequest) { r.Template = &ports.TemplateRef{ID: "welcome"} }, []string{"template.id"}},

		{"header name with space", func(r *ports.SendRequest) { r.Headers = map[string]string{"X Bad": "v"} }, []string{"headers.X Bad"}},
		{"header name with underscore", func(r *ports.SendRequest) { r.Headers = map[string]string{"X_Bad": "v"} }, []string{"headers.X_Bad"}},
		{"header name with colon", func(r *ports.SendRequest) { r.Headers = map[string]string{"X-Bad:": "v"} }, []string{"headers.X-Bad:"}},
		{"header name empty", func(r *ports.SendRequest) { r.Headers = map[string]string{"": "v"} }, []string{"headers."}},
		{"header value with CRLF", func(r *ports.SendRequest) { r.Headers = map[string]string{"X-Bad": "v\r\nBcc: x@y.com"} }, []string{"headers.X-Bad"}},
		{"header value with LF", func(r *ports.SendRequest) { r.Headers = map[string]string{"X-Bad": "v\n"} }, []string{"headers.X-Bad"}},
		{"owned header, any case", func(r *ports.SendRequest) { r.Headers = map[string]string{"message-id": "<x@y>"} }, []string{"headers.message-id"}},
		{"headers reported in name order", func(r *ports.SendRequest) {
			r.Headers = map[string]string{"Subject": "x", "B_ad": "v", "A-Ok": "fine", "Date": "now"}
		}, []string{"headers.B_ad", "headers.Date", "headers.Subject"}},

		{"tag value with NUL", func(r *ports.SendRequest) { r.Tags = map[string]string{"k": "\x00"} }, []string{"tags.k"}},
		{"metadata array", func(r *ports.SendRequest) { r.Metadata = json.RawMessage(`[1,2]`) }, []string{"metadata"}},
		{"metadata string", func(r *ports.SendRequest) { r.Metadata = json.RawMessage(`"x"`) }, []string{"metadata"}},
		{"metadata number", func(r *ports.SendRequest) { r.Metadata = json.RawMessage(`42`) }, []string{"metadata"}},
		{"metadata invalid JSON", func(r *ports.SendRequest) { r.Metadata = json.RawMessage(`{"a":`) }, []string{"metadata"}},
		{"metadata with NUL escape", func(r *ports.SendRequest) { r.Metadata = json.RawMessage(`{"a":"\u0000"}`) }, []string{"metadata"}},
		{"metadata null", func(r *ports.SendRequest) { r.Metadata = json.RawMessage(`null`) }, nil},
		{"metadata nested object", func(r *ports.SendRequest) { r.Metadata = json.RawMessage(` {"a":{"b":[1,null]}} `) }, nil},

		{"21 attachments", func(r *ports.SendRequest) {
			r.Attachments = make([]ports.Attachment, 21)
			for i := range r.Attachments {
				r.Attachments[i] = ports.Attachment{Filename: "f", ContentType: "text/plain"}
			}
		}, []string{"attachments"}},
		{"20 attachments", func(r *ports.SendRequest) {
			r.Attachments = make([]ports.Attachment, 20)
			for i := range r.Attachments {
				r.Attachments[i] = ports.Attachment{Filename: "f", ContentType: "text/plain"}
			}
		}, nil},
		{"attachment over 10 MiB", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) { a.Content = make([]byte, 10*mib+1) })
		}, []string{"attachments.0.content"}},
		{"attachments over 25 MiB in total", func(r *ports.SendRequest) {
			r.Attachments = []ports.Attachment{
				{Filename: "a", ContentType: "x/y", Content: nineMiB},
				{Filename: "b", ContentType: "x/y", Content: nineMiB},
				{Filename: "c", ContentType: "x/y", Content: nineMiB},
			}
		}, []string{"attachments"}},
		{"attachments exactly 25 MiB in total", func(r *ports.SendRequest) {
			r.Attachments = []ports.Attachment{
				{Filename: "a", ContentType: "x/y", Content: tenMiB},
				{Filename: "b", ContentType: "x/y", Content: tenMiB},
				{Filename: "c", ContentType: "x/y", Content: tenMiB[:5*mib]},
			}
		}, nil},
		{"attachment filename missing", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) { a.Filename = "" })
		}, []string{"attachments.0.filename"}},
		{"attachment filename with CRLF", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) { a.Filename = "a\r\n.pdf" })
		}, []string{"attachments.0.filename"}},
		{"attachment contentType missing", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) { a.ContentType = "" })
		}, []string{"attachments.0.contentType"}},
		{"attachment contentType with LF", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) { a.ContentType = "text/plain\nX: y" })
		}, []string{"attachments.0.contentType"}},
		{"inline attachment without contentId", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) { a.Inline = true })
		}, []string{"attachments.0"}},
		{"inline attachment with bracketed contentId", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) { a.Inline, a.ContentID = true, "<logo>" })
		}, nil},
		{"attachment contentId with CRLF", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) { a.ContentID = "lo\r\ngo" })
		}, []string{"attachments.0.contentId"}},
		{"second attachment's path", func(r *ports.SendRequest) {
			r.Attachments = []ports.Attachment{
				{Filename: "a", ContentType: "x/y"},
				{Filename: "", ContentType: ""},
			}
		}, []string{"attachments.1.filename", "attachments.1.contentType"}},
		{"empty attachment content", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) { a.Content = nil })
		}, nil},

		{"idempotency key too long", func(r *ports.SendRequest) { r.IdempotencyKey = strings.Repeat("k", 257) }, []string{"Idempotency-Key"}},
		{"idempotency key 256", func(r *ports.SendRequest) { r.IdempotencyKey = strings.Repeat("k", 256) }, nil},
		{"idempotency key with control character", func(r *ports.SendRequest) { r.IdempotencyKey = "k\x01" }, []string{"Idempotency-Key"}},

		{"every violation reported, in field order", func(r *ports.SendRequest) {
			r.From = "x"
			r.To = []string{"ok@example.com", "bad"}
			r.Subject = ""
			r.Text = ""
			r.Metadata = json.RawMessage(`[]`)
		}, []string{"from", "to.1", "subject", "", "metadata"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := validRequest()
			tt.mut(&req)
			_, violations := validateSend(req)
			var paths []string
			for _, v := range violations {
				paths = append(paths, v.Path)
				if v.Message == "" {
					t.Errorf("violation %q has no message", v.Path)
				}
			}
			if !slices.Equal(paths, tt.wantPaths) {
				t.Fatalf("paths = %q, want %q (%+v)", paths, tt.wantPaths, violations)
			}
		})
	}
}

func TestValidateSendRefusesOwnedHeaders(t *testing.T) {
	t.Parallel()
	owned := []string{"From", "To", "Cc", "Bcc", "Subject", "Date", "Message-ID", "Reply-To", "MIME-Version",
		"Content-Type", "Content-Transfer-Encoding", "DKIM-Signature", "Return-Path"}
	for _, name := range owned {
		for _, spelled := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			t.Run(spelled, func(t *testing.T) {
				t.Parallel()
				req := validRequest()
				req.Headers = map[string]string{spelled: "x"}
				_, violations := validateSend(req)
				if len(violations) != 1 || violations[0].Path != "headers."+spelled {
					t.Fatalf("violations = %+v, want one on headers.%s", violations, spelled)
				}
				if !strings.Contains(violations[0].Message, "Postmill sets the "+name+" header") {
					t.Fatalf("message %q does not name the owned header %s", violations[0].Message, name)
				}
			})
		}
	}
	t.Run("hint names the field", func(t *testing.T) {
		t.Parallel()
		req := validRequest()
		req.Headers = map[string]string{"Reply-To": "x@y.com"}
		_, violations := validateSend(req)
		if len(violations) != 1 || violations[0].Message != "Postmill sets the Reply-To header itself; use the replyTo field" {
			t.Fatalf("violations = %+v", violations)
		}
	})
}

func TestValidateSendNormalises(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	req := validRequest()
	req.From = "  <News@Acme.example> "
	req.To = []string{" alice@example.com\t", "Ada Lovelace <ada@example.org>", "<bob@example.net>", "=?utf-8?q?Ad=C3=A1?= <x@example.org>",
		"ada@example.org (Ada)"}
	req.Cc = []string{"c@example.com "}
	req.ReplyTo = " Support <support@acme.example>  "
	req.Metadata = json.RawMessage(" null ")
	req.ScheduledAt = &at
	req.Attachments = []ports.Attachment{{Filename: "l.png", ContentType: "image/png", Inline: true, ContentID: " <logo@acme> "}}

	got, violations := validateSend(req)
	if len(violations) != 0 {
		t.Fatalf("violations = %+v", violations)
	}
	if got.From != "News@Acme.example" {
		t.Errorf("From = %q, want the bare address", got.From)
	}
	wantTo := []string{"alice@example.com", `"Ada Lovelace" <ada@example.org>`, "bob@example.net", "=?utf-8?q?Ad=C3=A1?= <x@example.org>",
		`"Ada" <ada@example.org>`}
	if !slices.Equal(got.To, wantTo) || got.Cc[0] != "c@example.com" {
		t.Errorf("To, Cc = %q, %q, want %q and trimmed", got.To, got.Cc, wantTo)
	}
	if got.ReplyTo != "Support <support@acme.example>" {
		t.Errorf("ReplyTo = %q, want the trimmed mailbox", got.ReplyTo)
	}
	if got.Metadata != nil {
		t.Errorf("Metadata = %s, want nil for JSON null", got.Metadata)
	}
	if got.ScheduledAt.Location() != time.UTC || !got.ScheduledAt.Equal(at) {
		t.Errorf("ScheduledAt = %v, want %v in UTC", got.ScheduledAt, at)
	}
	if got.Attachments[0].ContentID != "logo@acme" {
		t.Errorf("ContentID = %q, want brackets stripped", got.Attachments[0].ContentID)
	}
	if req.Attachments[0].ContentID != " <logo@acme> " {
		t.Error("validateSend changed the caller's attachments")
	}
	if d := addressDomain(senderAddress(got.From)); d != "acme.example" {
		t.Errorf("from domain = %q, want lower-cased acme.example", d)
	}
	if d := addressDomain(senderAddress("Acme <news@Mail.Acme.example>")); d != "mail.acme.example" {
		t.Errorf("from domain of a mailbox = %q", d)
	}
}
