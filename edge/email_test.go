package edge_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// minimal is the smallest valid send body.
func minimal() map[string]any {
	return map[string]any{"from": "ada@example.org", "to": "bob@example.net", "subject": "Hi", "text": "hello"}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func TestSendEmailMapsEveryField(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	png := []byte("\x89PNG\r\n\x1a\n binary \x00\xff")
	r := mustStatus(t, b.do(t, "POST", "/v1/emails", sendKey, map[string]any{
		"from": "Ada <ada@example.org>", "to": []string{"bob@example.net", "Carol <carol@example.net>"},
		"cc": []string{"cc@example.net"}, "bcc": []string{"bcc@example.net"},
		"subject": "Hello", "html": "<p>hi <img src=cid:logo></p>", "text": "hi", "replyTo": "replies@example.org",
		"template":       map[string]any{"id": "{" + strings.ToUpper(keyID) + "}"},
		"attachments":    []map[string]any{{"filename": "a.txt", "contentType": "text/plain", "content": base64.StdEncoding.EncodeToString([]byte("hello"))}, {"filename": "logo.png", "contentType": "image/png", "content": base64.RawURLEncoding.EncodeToString(png), "inline": true, "contentId": "logo"}},
		"headers":        map[string]string{"X-Campaign": "c-42", "List-Id": "news"},
		"tags":           map[string]string{"kind": "welcome"},
		"metadata":       json.RawMessage(`{"z":1,"a":{"deep":[true,null]}}`),
		"sandbox":        true,
		"scheduledAt":    "2026-12-01T10:00:00+01:00",
		"organizationId": otherOrg,
	}, "Idempotency-Key", "order-7"), 202)
	if r.body["status"] != "scheduled" || r.body["id"] == "" {
		t.Errorf("answer: %s", r.raw)
	}
	if _, ok := r.body["deduped"]; ok || len(r.body) != 2 {
		t.Errorf("a first send answers {id, status} only: %s", r.raw)
	}
	sends := b.fake.sendsSnapshot()
	if len(sends) != 1 || b.fake.lastOrgID() != userOrg {
		t.Fatalf("core got %d sends for %s", len(sends), b.fake.lastOrgID())
	}
	got := sends[0]
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if got.From != "Ada <ada@example.org>" || !slices.Equal(got.To, []string{"bob@example.net", "Carol <carol@example.net>"}) ||
		!slices.Equal(got.Cc, []string{"cc@example.net"}) || !slices.Equal(got.Bcc, []string{"bcc@example.net"}) ||
		got.Subject != "Hello" || got.HTML != "<p>hi <img src=cid:logo></p>" || got.Text != "hi" || got.ReplyTo != "replies@example.org" ||
		!got.Sandbox || got.ScheduledAt == nil || !got.ScheduledAt.Equal(at) || got.ScheduledAt.Location() != time.UTC ||
		got.IdempotencyKey != "order-7" || got.Headers["X-Campaign"] != "c-42" || got.Headers["List-Id"] != "news" || got.Tags["kind"] != "welcome" {
		t.Errorf("send request: %+v", got)
	}
	if string(got.Metadata) != `{"z":1,"a":{"deep":[true,null]}}` {
		t.Errorf("metadata must reach the core byte for byte: %s", got.Metadata)
	}
	if got.Template == nil || got.Template.ID != keyID || got.Template.Variables == nil || len(got.Template.Variables) != 0 {
		t.Errorf("template (canonical id, variables default {}): %+v", got.Template)
	}
	if len(got.Attachments) != 2 {
		t.Fatalf("attachments: %+v", got.Attachments)
	}
	if a := got.Attachments[0]; a.Filename != "a.txt" || a.ContentType != "text/plain" || string(a.Content) != "hello" || a.Inline {
		t.Errorf("attachment 0: %+v", a)
	}
	if a := got.Attachments[1]; !bytes.Equal(a.Content, png) || !a.Inline || a.ContentID != "logo" {
		t.Errorf("URL-safe unpadded base64 must decode: %+v", a)
	}
}

func TestSendEmailToAsStringOrArrayAndIdempotency(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	mustStatus(t, b.do(t, "POST", "/v1/emails", sendKey, minimal()), 202)
	mustStatus(t, b.do(t, "POST", "/v1/emails", sendKey, with(minimal(), "to", []string{"a@example.net", "b@example.net"})), 202)
	sends := b.fake.sendsSnapshot()
	if !slices.Equal(sends[0].To, []string{"bob@example.net"}) || !slices.Equal(sends[1].To, []string{"a@example.net", "b@example.net"}) {
		t.Errorf("to reached the core as %q and %q", sends[0].To, sends[1].To)
	}
	if sends[0].IdempotencyKey != "" || sends[0].Metadata != nil || sends[0].Template != nil || sends[0].ScheduledAt != nil {
		t.Errorf("absent fields must stay absent: %+v", sends[0])
	}

	first := mustStatus(t, b.do(t, "POST", "/v1/emails", sendKey, minimal(), "Idempotency-Key", "k-1"), 202)
	if _, ok := first.body["deduped"]; ok {
		t.Errorf("first use carries deduped: %s", first.raw)
	}
	replay := mustStatus(t, b.do(t, "POST", "/v1/emails", sendKey, with(minimal(), "subject", "other"), "Idempotency-Key", "k-1"), 202)
	if replay.body["deduped"] != true || replay.body["id"] != first.body["id"] || replay.body["status"] != "queued" {
		t.Errorf("replay %s after %s", replay.raw, first.raw)
	}
}

func TestSendEmailValidationDetails(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	att := func(kv ...any) []map[string]any {
		return []map[string]any{with(map[string]any{"filename": "a.txt", "contentType": "text/plain", "content": "aGk="}, kv...)}
	}
	cases := []struct {
		name  string
		body  map[string]any
		paths []string
	}{
		{"to missing", with(minimal(), "to", nil), []string{"to"}},
		{"to empty array", with(minimal(), "to", []string{}), []string{"to"}},
		{"to bad element", with(minimal(), "to", []string{"ok@example.net", "not an address"}), []string{"to.1"}},
		{"to bad string", with(minimal(), "to", "nope"), []string{"to"}},
		{"to wrong type", with(minimal(), "to", 7), []string{"to"}},
		{"from missing", with(minimal(), "from", nil), []string{"from"}},
		{"from bad", with(minimal(), "from", "ada"), []string{"from"}},
		{"cc bad", with(minimal(), "cc", []string{"x"}), []string{"cc.0"}},
		{"replyTo bad", with(minimal(), "replyTo", "x"), []string{"replyTo"}},
		{"subject CRLF", with(minimal(), "subject", "a\r\nBcc: victim@example.net"), []string{"subject"}},
		{"subject LF", with(minimal(), "subject", "a\nb"), []string{"subject"}},
		{"subject empty", with(minimal(), "subject", ""), []string{"subject"}},
		{"template id", with(minimal(), "template", map[string]any{"id": "x"}), []string{"template.id"}},
		{"too many attachments", with(minimal(), "attachments", slices.Repeat(att(), 21)), []string{"attachments"}},
		{"attachment filename CRLF", with(minimal(), "attachments", att("filename", "a\r\n.txt")), []string{"attachments.0.filename"}},
		{"attachment filename empty", with(minimal(), "attachments", att("filename", "")), []string{"attachments.0.filename"}},
		{"attachment content type missing", with(minimal(), "attachments", att("contentType", nil)), []string{"attachments.0.contentType"}},
		{"attachment not base64", with(minimal(), "attachments", att("content", "***")), []string{"attachments.0.content"}},
		{"header name", with(minimal(), "headers", map[string]string{"X Bad": "v", "X-Ok": "v", "X:Worse": "v"}), []string{"headers.X Bad", "headers.X:Worse"}},
		{"header value CRLF", with(minimal(), "headers", map[string]string{"X-Ok": "v\r\nBcc: x"}), []string{"headers.X-Ok"}},
		{"tags not strings", with(minimal(), "tags", map[string]any{"n": 1}), []string{"tags.n"}},
		{"metadata not an object", with(minimal(), "metadata", []int{1}), []string{"metadata"}},
		{"scheduledAt not a date-time", with(minimal(), "scheduledAt", "tomorrow"), []string{"scheduledAt"}},
	}
	for _, c := range cases {
		r := b.do(t, "POST", "/v1/emails", sendKey, c.body)
		if r.status != 400 {
			t.Errorf("%s: status %d: %s", c.name, r.status, r.raw)
			continue
		}
		body := mustError(t, r, 400, "Bad Request", "Validation failed")
		if got := detailPaths(t, body); !slices.Equal(got, c.paths) {
			t.Errorf("%s: details %v, want %v: %s", c.name, got, c.paths, r.raw)
		}
		if strings.Contains(string(r.raw), "victim") {
			t.Errorf("%s: the value is echoed: %s", c.name, r.raw)
		}
	}
	if n := b.fake.called("Send"); n != 0 {
		t.Errorf("the core was called %d times with invalid bodies", n)
	}
	mustStatus(t, b.do(t, "POST", "/v1/emails", sendKey, minimal(), "Idempotency-Key", strings.Repeat("k", 256)), 202)
	// The precise detail replaces huma's "matched none" verdict on the oneOf.
	r := b.do(t, "POST", "/v1/emails", sendKey, with(minimal(), "to", []string{"ok@example.net", "bad"}))
	if strings.Contains(string(r.raw), "exactly one schema") || !strings.Contains(string(r.raw), "RFC 5322") {
		t.Errorf("to detail: %s", r.raw)
	}
	// Cross-field rules (subject unless template) are the core's; the edge passes an absent subject on.
	mustStatus(t, b.do(t, "POST", "/v1/emails", sendKey, with(minimal(), "subject", nil)), 202)
	if sends := b.fake.sendsSnapshot(); len(sends) != 2 || sends[1].Subject != "" || sends[0].IdempotencyKey != strings.Repeat("k", 256) {
		t.Errorf("sends: %+v", sends)
	}
	// The Idempotency-Key is bounded like the core bounds it.
	mustError(t, b.do(t, "POST", "/v1/emails", sendKey, minimal(), "Idempotency-Key", strings.Repeat("k", 257)), 400, "", "Validation failed")
}

// hugeBase64 is n bytes' worth of base64 that is not valid base64: if the edge decoded it, the answer would
// be a base64 error, not a size error.
func hugeBase64(decoded int) string { return strings.Repeat("!", decoded/3*4) }

func TestAttachmentSizeIsCheckedFromBase64Length(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	r := b.do(t, "POST", "/v1/emails", sendKey, with(minimal(), "attachments", []map[string]any{
		{"filename": "big.bin", "contentType": "application/octet-stream", "content": hugeBase64(15 << 20)}}))
	body := mustError(t, r, 400, "Bad Request", "Validation failed")
	if got := detailPaths(t, body); !slices.Equal(got, []string{"attachments.0.content"}) || !strings.Contains(string(r.raw), "10 MiB") {
		t.Errorf("15 MiB attachment: %s", r.raw)
	}
	if strings.Contains(string(r.raw), "base64 (") {
		t.Errorf("the oversized content was decoded: %s", r.raw)
	}

	// Each under 10 MiB, together over 25 MiB (and still within the body limit): the attachment that
	// crosses the total is named.
	nine := hugeBase64(17 << 19)
	three := make([]map[string]any, 3)
	for i := range three {
		three[i] = map[string]any{"filename": fmt.Sprint(i), "contentType": "application/octet-stream", "content": nine}
	}
	r = b.do(t, "POST", "/v1/emails", sendKey, with(minimal(), "attachments", three))
	body = mustError(t, r, 400, "Bad Request", "Validation failed")
	if got := detailPaths(t, body); !slices.Equal(got, []string{"attachments.2.content"}) || !strings.Contains(string(r.raw), "25 MiB") {
		t.Errorf("25.5 MiB in total: %s", r.raw)
	}
	if n := b.fake.called("Send"); n != 0 {
		t.Errorf("core called %d times", n)
	}

	// Exactly 10 MiB decoded passes (padding and line breaks do not count), decoded once, at the end.
	exact := make([]byte, 10<<20)
	for i := range exact {
		exact[i] = byte(i * 7)
	}
	wrapped := base64.StdEncoding.EncodeToString(exact)
	wrapped = wrapped[:76] + "\r\n" + wrapped[76:]
	mustStatus(t, b.do(t, "POST", "/v1/emails", sendKey, with(minimal(), "attachments", []map[string]any{
		{"filename": "exact.bin", "contentType": "application/octet-stream", "content": wrapped}})), 202)
	sends := b.fake.sendsSnapshot()
	if len(sends) != 1 || !bytes.Equal(sends[0].Attachments[0].Content, exact) {
		t.Error("a 10 MiB attachment did not reach the core intact")
	}
}

func TestSendBodyLimits(t *testing.T) {
	t.Parallel()
	// A small general limit does not shrink the send routes' limit.
	b := MustStartEdge(t, newFakeCore(), func(c *edge.Config) { c.MaxBodyBytes = 1 << 10 })
	pad := strings.Repeat("x", 2<<20)
	mustStatus(t, b.do(t, "POST", "/v1/emails", sendKey, with(minimal(), "html", pad)), 202)
	mustStatus(t, b.do(t, "POST", "/v1/emails/batch", sendKey, map[string]any{"emails": []any{with(minimal(), "html", pad)}}), 202)
	mustError(t, b.do(t, "POST", "/v1/api-keys", userToken, map[string]any{"name": pad}), 413, "", "")

	// Over the bound, a body that breaks no size bound is a 413 (padding is an unknown field, ignored).
	over := strings.Repeat("x", int(edge.SendMaxBodyBytes))
	mustError(t, b.do(t, "POST", "/v1/emails", sendKey, with(minimal(), "padding", over)), 413, "Request Entity Too Large", "")
	// The batch route takes more than the single route.
	mustStatus(t, b.do(t, "POST", "/v1/emails/batch", sendKey, map[string]any{"emails": []any{with(minimal(), "padding", over)}}), 202)
	huge := strings.Repeat("x", int(edge.BatchMaxBodyBytes))
	mustError(t, b.do(t, "POST", "/v1/emails/batch", sendKey, map[string]any{"emails": []any{with(minimal(), "padding", huge)}}), 413, "", "")
}

func TestSendRejectionsKeepTheirCodedShape(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err     error
		status  int
		errWord string
		message string
		extra   map[string]any
		absent  []string
	}{
		{&ports.Error{Code: ports.CodePaymentRequired, Reason: "plan_limit_exceeded", Message: "Plan limit reached for emails_sent",
			Fields: map[string]any{"metric": ports.MetricEmailsSent, "limit": int64(3000)}},
			402, "plan_limit_exceeded", "Plan limit reached for emails_sent", map[string]any{"metric": "emails_sent", "limit": float64(3000)}, nil},
		{&ports.Error{Code: ports.CodePermissionDenied, Reason: "org_suspended", Message: "organization sending is paused"},
			403, "org_suspended", "organization sending is paused", nil, []string{"requiredScopes"}},
		{&ports.Error{Code: ports.CodeResourceExhausted, Reason: "warmup_cap_reached", Message: "warm-up daily send cap reached"},
			429, "warmup_cap_reached", "warm-up daily send cap reached", nil, []string{"retryAfterSeconds"}},
		{ports.Errorf(ports.CodeInvalidArgument, "domain example.org is not verified"), 400, "Bad Request", "domain example.org is not verified", nil, []string{"details"}},
		{ports.Errorf(ports.CodeInvalidArgument, "recipient suppressed: bob@example.net"), 400, "Bad Request", "recipient suppressed: bob@example.net", nil, nil},
		{ports.MissingReference("templates_pkey"), 400, "Bad Request", "Referenced resource does not exist", map[string]any{"constraint": "templates_pkey"}, nil},
	}
	for _, c := range cases {
		t.Run(c.errWord+" "+c.message, func(t *testing.T) {
			t.Parallel()
			fake := newFakeCore()
			fake.sendErr = c.err
			b := MustStartEdge(t, fake, nil)
			r := b.do(t, "POST", "/v1/emails", sendKey, minimal())
			body := mustError(t, r, c.status, c.errWord, c.message)
			for k, v := range c.extra {
				if body[k] != v {
					t.Errorf("%s = %v, want %v: %s", k, body[k], v, r.raw)
				}
			}
			for _, k := range c.absent {
				if _, ok := body[k]; ok {
					t.Errorf("body carries %s: %s", k, r.raw)
				}
			}
		})
	}
}

func TestEmailRoutesAuthentication(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	r := b.do(t, "POST", "/v1/emails", billingKey, minimal())
	if got, _ := mustError(t, r, 403, "insufficient_scope", "")["requiredScopes"].([]any); len(got) != 1 || got[0] != "emails:send" {
		t.Errorf("requiredScopes: %s", r.raw)
	}
	mustError(t, b.do(t, "POST", "/v1/emails", userToken, minimal()), 401, "", "")
	mustError(t, b.do(t, "POST", "/v1/emails/batch", readKey, map[string]any{"emails": []any{minimal()}}), 403, "insufficient_scope", "")
	mustError(t, b.do(t, "GET", "/v1/emails/"+emailID, sendKey, nil), 403, "insufficient_scope", "")
	mustError(t, b.do(t, "POST", "/v1/emails/"+emailID+"/cancel", readKey, nil), 403, "insufficient_scope", "")
	mustError(t, b.do(t, "GET", "/v1/emails", starKey, nil), 401, "", "")
	if n := b.fake.called("Send") + b.fake.called("SendBatch") + b.fake.called("ListEmails"); n != 0 {
		t.Errorf("core reached %d times", n)
	}
}

func TestBatchAlignsResultsByIndex(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.batchErrs = map[int]error{
		1: ports.Errorf(ports.CodeInvalidArgument, "domain unknown.example not found for this org"),
		2: ports.ValidationError(ports.FieldViolation{Path: "to.0", Message: "bad"}, ports.FieldViolation{Message: "whole"}),
		3: errors.New("pq: secret internals"),
	}
	b := MustStartEdge(t, fake, nil)
	items := []any{minimal(), with(minimal(), "from", "ada@unknown.example"), minimal(), minimal(), with(minimal(), "to", []string{"x@example.net"})}
	r := mustStatus(t, b.do(t, "POST", "/v1/emails/batch", sendKey, map[string]any{"emails": items}, "Idempotency-Key", "ignored"), 202)
	results, _ := r.body["results"].([]any)
	if len(results) != 5 || len(r.body) != 1 {
		t.Fatalf("batch: %s", r.raw)
	}
	for i, res := range results {
		m := res.(map[string]any)
		if m["index"] != float64(i) {
			t.Errorf("result %d has index %v", i, m["index"])
		}
		_, hasErr := m["error"]
		_, hasID := m["id"]
		if hasErr == hasID {
			t.Errorf("result %d must have either id or error: %v", i, m)
		}
		if hasID && (m["status"] != "queued" || len(m) != 3) {
			t.Errorf("accepted result %d: %v", i, m)
		}
		if hasErr && len(m) != 2 {
			t.Errorf("failed result %d has more than index and error: %v", i, m)
		}
	}
	want := map[int]string{
		1: "domain unknown.example not found for this org",
		2: "Validation failed (to.0: bad; whole)",
		3: "Internal Server Error",
	}
	for i, msg := range want {
		if got := results[i].(map[string]any)["error"]; got != msg {
			t.Errorf("result %d error %q, want %q", i, got, msg)
		}
	}
	if strings.Contains(string(r.raw), "secret internals") || !strings.Contains(b.logs.String(), "secret internals") {
		t.Errorf("an internal item error must be logged, not answered: %s", r.raw)
	}
	fake.mu.Lock()
	batch := fake.batches[0]
	fake.mu.Unlock()
	if len(batch) != 5 || !slices.Equal(batch[4].To, []string{"x@example.net"}) {
		t.Fatalf("batch reached the core as %+v", batch)
	}
	for i, req := range batch {
		if req.IdempotencyKey != "" {
			t.Errorf("item %d carries the Idempotency-Key", i)
		}
	}

	// The batch's own schema failing is a 400 for the whole batch, and nothing reaches the core.
	for name, body := range map[string]any{
		"empty":       map[string]any{"emails": []any{}},
		"missing":     map[string]any{},
		"null":        map[string]any{"emails": nil},
		"501 items":   map[string]any{"emails": slices.Repeat([]any{minimal()}, 501)},
		"not objects": map[string]any{"emails": []any{minimal(), 5}},
		"not a list":  map[string]any{"emails": "x"},
	} {
		if got := detailPaths(t, mustError(t, b.do(t, "POST", "/v1/emails/batch", sendKey, body), 400, "", "Validation failed")); len(got) == 0 || !strings.HasPrefix(got[0], "emails") {
			t.Errorf("%s: details %v", name, got)
		}
	}
	fake.mu.Lock()
	n := len(fake.batches)
	fake.mu.Unlock()
	if n != 1 {
		t.Errorf("invalid batches reached the core (%d calls)", n)
	}

	// An email that breaks the schema of POST /v1/emails fails alone, with the single send's answer; the
	// others are sent.
	fake.mu.Lock()
	fake.batchErrs = nil
	fake.mu.Unlock()
	noFrom := minimal()
	delete(noFrom, "from")
	items = []any{
		minimal(),
		with(minimal(), "to", []string{"ok@example.net", "bad"}),
		with(minimal(), "attachments", []map[string]any{{"filename": "big", "contentType": "application/octet-stream", "content": hugeBase64(11 << 20)}}),
		with(minimal(), "attachments", []map[string]any{{"filename": "a", "contentType": "text/plain", "content": "@@@@"}}),
		with(minimal(), "subject", ""),
		noFrom,
		with(minimal(), "to", "last@example.net"),
	}
	r = mustStatus(t, b.do(t, "POST", "/v1/emails/batch", sendKey, map[string]any{"emails": items}), 202)
	results, _ = r.body["results"].([]any)
	if len(results) != len(items) {
		t.Fatalf("batch with invalid items: %s", r.raw)
	}
	wantErr := map[int]string{1: "to.1: ", 2: "attachments.0.content: ", 3: "attachments.0.content: ", 4: "subject: ", 5: "from: "}
	for i, res := range results {
		m := res.(map[string]any)
		if m["index"] != float64(i) {
			t.Errorf("result %d has index %v", i, m["index"])
		}
		msg, _ := m["error"].(string)
		if want, bad := wantErr[i]; bad != (msg != "") || bad && (!strings.HasPrefix(msg, "Validation failed (") || !strings.Contains(msg, want)) {
			t.Errorf("result %d: %v, want an error naming %q: %v", i, m, want, bad)
		}
	}
	single := mustError(t, b.do(t, "POST", "/v1/emails", sendKey, with(minimal(), "subject", "")), 400, "", "Validation failed")
	if got := detailPaths(t, single); !slices.Equal(got, []string{"subject"}) {
		t.Errorf("the single send's answer to the same email: %v", got)
	}
	fake.mu.Lock()
	sent := fake.batches[len(fake.batches)-1]
	n = len(fake.batches)
	fake.mu.Unlock()
	if n != 2 || len(sent) != 2 || !slices.Equal(sent[1].To, []string{"last@example.net"}) {
		t.Errorf("the core got %d batches, the last %+v; want the two valid emails", n, sent)
	}
}

func sampleMessage() ports.Message {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	resp := "250 2.0.0 Ok: queued as 1234"
	return ports.Message{
		ID: emailID, DomainID: domainID, Status: ports.StatusDelivered, From: "Ada <ada@example.org>", Subject: "Hello",
		HTML: "<p>secret body</p>", Headers: map[string]string{"X-Campaign": "c"}, Metadata: json.RawMessage(`{"order":42}`),
		IdempotencyKey: "order-7", CreatedAt: at, ReplyTo: "r@example.org",
		Recipients: []ports.Recipient{
			{ID: "r1", Type: ports.RecipientTo, Address: "bob@example.net", Status: ports.StatusDelivered},
			{ID: "r2", Type: ports.RecipientCc, Address: "cc@example.net", Status: ports.StatusDelivered},
			{ID: "r3", Type: ports.RecipientBcc, Address: "bcc@example.net", Status: ports.StatusBounced},
		},
		Attachments: []ports.StoredAttachment{{ID: "a1", Filename: "a.txt", Key: "att/secret-storage-key"}},
		Events: []ports.Event{
			{ID: "e1", Type: ports.EventEmailQueued, MessageID: emailID, OccurredAt: at},
			{ID: "e2", Type: ports.EventEmailDelivered, MessageID: emailID, RecipientID: "r1", ProviderResponse: &resp, OccurredAt: at.Add(time.Second)},
		},
	}
}

func TestGetEmailShape(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.email = sampleMessage()
	b := MustStartEdge(t, fake, nil)
	r := mustStatus(t, b.do(t, "GET", "/v1/emails/"+strings.ToUpper(emailID), readKey, nil), 200)
	if fake.called("GetEmail:"+emailID) != 1 {
		t.Errorf("id not canonicalised: %v", fake.calls)
	}
	for k, want := range map[string]any{"id": emailID, "status": "delivered", "from": "Ada <ada@example.org>", "subject": "Hello",
		"sandbox": false, "createdAt": "2026-11-21T09:00:00Z", "replyTo": "r@example.org"} {
		if r.body[k] != want {
			t.Errorf("%s = %v, want %v", k, r.body[k], want)
		}
	}
	if _, ok := r.body["scheduledAt"]; ok {
		t.Errorf("scheduledAt on an unscheduled message: %s", r.raw)
	}
	recips, _ := r.body["recipients"].([]any)
	if len(recips) != 3 || recips[2].(map[string]any)["type"] != "bcc" || recips[2].(map[string]any)["status"] != "bounced" || len(recips[0].(map[string]any)) != 3 {
		t.Errorf("recipients: %s", r.raw)
	}
	if fmt.Sprint(r.body["to"]) != "[bob@example.net]" || fmt.Sprint(r.body["cc"]) != "[cc@example.net]" || fmt.Sprint(r.body["bcc"]) != "[bcc@example.net]" {
		t.Errorf("to/cc/bcc: %s", r.raw)
	}
	events, _ := r.body["events"].([]any)
	if len(events) != 2 {
		t.Fatalf("events: %s", r.raw)
	}
	e0, e1 := events[0].(map[string]any), events[1].(map[string]any)
	if e0["type"] != "queued" || e0["providerResponse"] != nil || e0["occurredAt"] != "2026-11-21T09:00:00Z" || len(e0) != 3 {
		t.Errorf("event 0: %v", e0)
	}
	if _, ok := e0["providerResponse"]; !ok {
		t.Error("providerResponse must be present (null)")
	}
	if e1["type"] != "delivered" || e1["providerResponse"] != "250 2.0.0 Ok: queued as 1234" {
		t.Errorf("event 1: %v", e1)
	}
	if md, _ := r.body["metadata"].(map[string]any); md["order"] != float64(42) {
		t.Errorf("metadata: %s", r.raw)
	}
	if tags, ok := r.body["tags"].(map[string]any); !ok || len(tags) != 0 {
		t.Errorf("no tags render {}: %s", r.raw)
	}
	for _, never := range []string{userOrg, "organization", "secret-storage-key", "order-7", domainID} {
		if strings.Contains(string(r.raw), never) {
			t.Errorf("message leaks %q: %s", never, r.raw)
		}
	}

	fake.emailErr = ports.NotFound("message not found")
	mustError(t, b.do(t, "GET", "/v1/emails/"+emailID, readKey, nil), 404, "Not Found", "message not found")
	mustError(t, b.do(t, "GET", "/v1/emails/nope", readKey, nil), 400, "", "Validation failed")
}

func TestCancelEmail(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.email = sampleMessage()
	b := MustStartEdge(t, fake, nil)
	r := mustStatus(t, b.do(t, "POST", "/v1/emails/"+emailID+"/cancel", sendKey, nil), 201)
	if r.body["id"] != emailID || r.body["status"] != "cancelled" || len(r.body) != 2 {
		t.Errorf("cancel: %s", r.raw)
	}
	for _, c := range []struct {
		err    error
		status int
	}{
		{ports.NotFound("message not found"), 404},
		{ports.Errorf(ports.CodeFailedPrecondition, "only a scheduled message can be cancelled"), 409},
	} {
		f := newFakeCore()
		f.emailErr = c.err
		mustError(t, MustStartEdge(t, f, nil).do(t, "POST", "/v1/emails/"+emailID+"/cancel", starKey, nil), c.status, "", ports.ErrorMessage(c.err))
	}
}

func TestListEmails(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	m := sampleMessage()
	sched := time.Date(2026, 12, 24, 18, 0, 0, 0, time.UTC)
	m2 := m
	m2.ID, m2.Status, m2.ScheduledAt, m2.Sandbox = keyID, ports.StatusScheduled, &sched, true
	fake.page = ports.EmailPage{Data: []ports.Message{m2, m}, NextCursor: "opaque-cursor"}
	b := MustStartEdge(t, fake, nil)

	r := mustStatus(t, b.do(t, "GET", "/v1/emails", userToken, nil), 200)
	data, _ := r.body["data"].([]any)
	if len(data) != 2 || r.body["nextCursor"] != "opaque-cursor" || len(r.body) != 2 {
		t.Fatalf("page: %s", r.raw)
	}
	first := data[0].(map[string]any)
	for k, want := range map[string]any{"id": keyID, "status": "scheduled", "from": "Ada <ada@example.org>", "subject": "Hello",
		"createdAt": "2026-11-21T09:00:00Z", "scheduledAt": "2026-12-24T18:00:00Z", "sandbox": true} {
		if first[k] != want {
			t.Errorf("item %s = %v, want %v", k, first[k], want)
		}
	}
	if fmt.Sprint(first["to"]) != "[bob@example.net]" || len(first) != 8 {
		t.Errorf("item shape: %v", first)
	}
	if v, ok := data[1].(map[string]any)["scheduledAt"]; !ok || v != nil {
		t.Errorf("unscheduled item must have scheduledAt null: %v", data[1])
	}

	mustStatus(t, b.do(t, "GET", "/v1/emails?limit=100&cursor=opaque-cursor&status=cancelled", userToken, nil), 200)
	fake.mu.Lock()
	queries := slices.Clone(fake.queries)
	fake.mu.Unlock()
	if !slices.Equal(queries, []ports.ListEmailsQuery{{Limit: 25}, {Limit: 100, Cursor: "opaque-cursor", Status: ports.StatusCancelled}}) {
		t.Errorf("queries reaching the core: %+v", queries)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "status=unknown"} {
		mustError(t, b.do(t, "GET", "/v1/emails?"+q, userToken, nil), 400, "", "Validation failed")
	}

	fake.page = ports.EmailPage{}
	r = mustStatus(t, b.do(t, "GET", "/v1/emails", userToken, nil), 200)
	if v, ok := r.body["nextCursor"]; !ok || v != nil || string(r.raw) != `{"data":[],"nextCursor":null}`+"\n" {
		t.Errorf("last page: %s", r.raw)
	}
	fake.emailErr = ports.Errorf(ports.CodeInvalidArgument, "invalid cursor")
	mustError(t, b.do(t, "GET", "/v1/emails?cursor=zzz", userToken, nil), 400, "", "invalid cursor")
}
