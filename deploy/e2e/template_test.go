package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTemplateRendersIntoDeliveredMail is the templates issue as a new user tries it: create a template, add
// versions, publish one, send with variables, and read the delivered mail.
func TestTemplateRendersIntoDeliveredMail(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	_, key := w.MustKey(w.owner, []string{"emails:send", "emails:read", "templates:write"})
	send := func(body map[string]any) resp {
		return w.do(req{method: "POST", path: "/v1/emails", token: key, body: body})
	}

	tpl := expect(t, w.post("/v1/templates", key, map[string]any{"name": "Welcome"}), 201)
	id := tpl.str("id")
	if tpl.body["currentVersion"] != nil {
		t.Fatalf("new template: %s", tpl.raw)
	}
	// Unpublished: refused before anything is written.
	before := w.count(t)
	b := errorBody(t, send(map[string]any{"from": "ada@" + senderDomain, "to": "tpl@rcpt.example", "template": map[string]any{"id": id}}),
		400, "", "Referenced resource does not exist")
	if b["constraint"] == nil {
		t.Errorf("missing-template refusal has no constraint: %v", b)
	}
	errorBody(t, send(map[string]any{"from": "ada@" + senderDomain, "to": "tpl@rcpt.example", "template": map[string]any{"id": "0192f0c1-7a3b-7c00-8000-000000000001"}}),
		400, "", "Referenced resource does not exist")
	if w.count(t) != before {
		t.Fatal("a refused template send created a message")
	}

	// Version rules.
	errorBody(t, w.post("/v1/templates/"+id+"/versions", key, map[string]any{"subject": "No body"}), 400, "", "Validation failed")
	expect(t, w.post("/v1/templates/0192f0c1-7a3b-7c00-8000-000000000009/versions", key, map[string]any{"subject": "s", "text": "t"}), 404)
	v1 := expect(t, w.post("/v1/templates/"+id+"/versions", key, map[string]any{"subject": "Old {{ user.name }}", "text": "old"}), 201)
	v2 := expect(t, w.post("/v1/templates/"+id+"/versions", key, map[string]any{
		"subject": "Hello {{ user.name }}",
		"html":    `<p>Hi {{ user.name }}, {{ missing }}{{ user.name() }}!</p><a href="{{ link }}">go</a><a href="{{ safe }}">safe</a>`,
		"text":    "Hi {{ user.name }}",
	}), 201)
	if v1.body["version"] != float64(1) || v2.body["version"] != float64(2) {
		t.Fatalf("version numbers: %s / %s", v1.raw, v2.raw)
	}
	expect(t, w.post("/v1/templates/"+id+"/publish", key, map[string]any{"version": 3}), 404)
	pub := expect(t, w.post("/v1/templates/"+id+"/publish", key, map[string]any{"version": 2}), 201)
	if pub.body["currentVersion"] != float64(2) {
		t.Fatalf("publish: %s", pub.raw)
	}
	got := expect(t, w.get("/v1/templates/"+id, w.owner.access), 200)
	if vs, _ := got.body["versions"].([]any); len(vs) != 2 {
		t.Fatalf("GET template: %s", got.raw)
	}

	// A send renders the published version; its subject wins over the one given.
	r := expect(t, send(map[string]any{
		"from": "ada@" + senderDomain, "to": "tpl@rcpt.example", "subject": "ignored subject",
		"template": map[string]any{"id": id, "variables": map[string]any{
			"user": map[string]any{"name": `<b>Ada & "co"</b>`},
			"link": "javascript:alert(1)",
			"safe": "https://example.com/welcome?a=1&b=2",
		}},
	}), 202)
	m := w.mx.waitFor(t, "tpl@rcpt.example", 30*time.Second)
	subject, html, text := mailParts(t, m.data)
	if !strings.HasPrefix(subject, "Hello ") || strings.Contains(subject, "ignored") {
		t.Errorf("subject = %q", subject)
	}
	if !strings.Contains(html, "Hi &lt;b&gt;Ada &amp; &#34;co&#34;&lt;/b&gt;, !") {
		t.Errorf("html does not carry the escaped value (and empty missing/call): %q", html)
	}
	if strings.Contains(html, "<b>") || strings.Contains(strings.ToLower(html), "javascript:") {
		t.Errorf("html carries unescaped markup or a javascript: URL: %q", html)
	}
	if !strings.Contains(html, `href="https://example.com/welcome?a=1&amp;b=2"`) {
		t.Errorf("safe link not kept: %q", html)
	}
	if !strings.Contains(text, "Hi &lt;b&gt;Ada") {
		t.Errorf("text = %q", text)
	}
	w.waitStatus(t, r.str("id"), "delivered", 30*time.Second)

	// A variable PostgreSQL text cannot hold is the caller's mistake: 400, nothing written.
	before = w.count(t)
	errorBody(t, send(map[string]any{"from": "ada@" + senderDomain, "to": "tpl@rcpt.example",
		"template": map[string]any{"id": id, "variables": map[string]any{"user": map[string]any{"name": "a\u0000b"}}}}),
		400, "", "Validation failed")
	if w.count(t) != before {
		t.Fatal("a refused template send created a message")
	}

	// Another organization cannot use or see the template.
	other := w.MustSignup("other@"+randomHex(t, 4)+".example", "")
	_, otherKey := w.MustKey(other, []string{"templates:write"})
	expect(t, w.post("/v1/templates/"+id+"/versions", otherKey, map[string]any{"subject": "s", "text": "t"}), 404)
	expect(t, w.get("/v1/templates/"+id, other.access), 404)
	if list := expect(t, w.get("/v1/templates", other.access), 200); strings.TrimSpace(string(list.raw)) != "[]" {
		t.Errorf("other org lists %s", list.raw)
	}
}

// TestReactEmailTemplate renders the React Email example of docs/templates.md, as published, at version
// creation and delivers it.
func TestReactEmailTemplate(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "templates.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("<!-- verify:tsx -->")) {
		t.Fatal("docs/templates.md marks no TSX example with <!-- verify:tsx -->")
	}
	src := snippet(t, doc, "tsx")
	w := MustMailWorld(t, nil)
	_, key := w.MustKey(w.owner, []string{"emails:send", "emails:read", "templates:write"})
	id := expect(t, w.post("/v1/templates", key, map[string]any{"name": "React welcome"}), 201).str("id")

	v := expect(t, w.post("/v1/templates/"+id+"/versions", key, map[string]any{"subject": "Welcome {{ name }}", "reactSource": src}), 201)
	html := fmt.Sprint(v.body["html"])
	if !strings.Contains(html, "<h1") || !strings.Contains(html, "{{ plan }}") || !strings.Contains(html, "https://example.com/start") {
		t.Fatalf("rendered React HTML: %s", html)
	}
	// A compile error is a 400 carrying the compiler's words.
	bad := w.post("/v1/templates/"+id+"/versions", key, map[string]any{"subject": "s", "reactSource": "export default function X() { return <div> }"})
	if bad.status != 400 || !strings.Contains(string(bad.raw), "reactSource") {
		t.Fatalf("broken React source: %d %s", bad.status, bad.raw)
	}
	expect(t, w.post("/v1/templates/"+id+"/publish", key, map[string]any{"version": 1}), 201)
	expect(t, w.do(req{method: "POST", path: "/v1/emails", token: key, body: map[string]any{
		"from": "ada@" + senderDomain, "to": "react@rcpt.example",
		"template": map[string]any{"id": id, "variables": map[string]any{"name": "Ada", "plan": "<Pro>"}},
	}}), 202)
	m := w.mx.waitFor(t, "react@rcpt.example", 30*time.Second)
	subject, body, _ := mailParts(t, m.data)
	if subject != "Welcome Ada" {
		t.Errorf("subject = %q", subject)
	}
	if !strings.Contains(body, "Welcome, Ada") || !strings.Contains(body, "Your plan: &lt;Pro&gt;") {
		t.Errorf("delivered React body: %q", body)
	}
}
