package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// fakeCatcher is an in-memory ports.MailCatcher holding whole messages.
type fakeCatcher struct {
	mu       sync.Mutex
	messages []ports.CaughtContent // newest first
	raw      map[string][]byte
	files    map[string][]byte // id + "/" + index → attachment content
}

func (f *fakeCatcher) ListCaught(context.Context) ([]ports.CaughtMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []ports.CaughtMessage{}
	for _, m := range f.messages {
		out = append(out, m.CaughtMessage)
	}
	return out, nil
}

func (f *fakeCatcher) Caught(_ context.Context, id string) (ports.CaughtContent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.messages {
		if m.ID == id {
			return m, nil
		}
	}
	return ports.CaughtContent{}, ports.NotFound("message not found")
}

func (f *fakeCatcher) CaughtRaw(ctx context.Context, id string) ([]byte, error) {
	if _, err := f.Caught(ctx, id); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw[id], nil
}

func (f *fakeCatcher) CaughtAttachment(ctx context.Context, id string, index int) (ports.CaughtAttachment, []byte, error) {
	m, err := f.Caught(ctx, id)
	if err != nil {
		return ports.CaughtAttachment{}, nil, err
	}
	if index >= len(m.Attachments) {
		return ports.CaughtAttachment{}, nil, ports.NotFound("attachment not found")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return m.Attachments[index], f.files[id+"/0"], nil
}

func (f *fakeCatcher) ClearCaught(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.messages = nil
	return nil
}

const caughtID = "0000018f0a1b2c3d4e5f6789"

// hostileHTML is an HTML part that would run a script, submit a form and load a remote image if it were
// not sandboxed.
const hostileHTML = `<html><body><h1 id="greeting">Hello from the HTML part</h1>` +
	`<script>document.getElementById("greeting").textContent = "SCRIPT RAN";</script>` +
	`<img src="http://tracker.example/pixel.gif"></body></html>`

func newFakeCatcher() *fakeCatcher {
	m := ports.CaughtContent{
		CaughtMessage: ports.CaughtMessage{
			ID: caughtID, ReceivedAt: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
			EnvelopeFrom: "b-1@bounce.acme.test", EnvelopeTo: []string{"bob@rcpt.test"}, Size: 2048,
			From: `"Ada" <ada@acme.test>`, To: []string{"bob@rcpt.test"}, Subject: "Welcome <b>aboard</b>",
			DKIM: ports.DKIMResult{Result: ports.DKIMPass, Domain: "acme.test", Selector: "pmabc"},
		},
		Headers:     []ports.MessageHeader{{Name: "Subject", Value: "Welcome <b>aboard</b>"}, {Name: "X-Campaign", Value: "c-42"}},
		Text:        "plain body",
		HTML:        hostileHTML,
		Attachments: []ports.CaughtAttachment{{Index: 0, Filename: "notes.html", ContentType: "text/html", Size: 30}},
	}
	return &fakeCatcher{
		messages: []ports.CaughtContent{m},
		raw:      map[string][]byte{caughtID: []byte("Subject: Welcome\r\n\r\nplain body\r\n")},
		files:    map[string][]byte{caughtID + "/0": []byte("<script>alert(1)</script>")},
	}
}

// mustStartLocalEdge runs an edge with local mode's routes over c.
func mustStartLocalEdge(t *testing.T, c ports.MailCatcher) *httptest.Server {
	t.Helper()
	s, err := edge.New(edge.Config{Logger: slog.New(slog.DiscardHandler)}, newFakeCore().core())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ServeLocal(c); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func fetch(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestLocalRoutesOnlyInLocalMode(t *testing.T) {
	t.Parallel()
	s, err := edge.New(edge.Config{Logger: slog.New(slog.DiscardHandler)}, newFakeCore().core())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	for _, path := range []string{"/local/mail", "/local/api/messages", "/local/assets/local.js", "/local/mail/" + caughtID} {
		if res, _ := fetch(t, "GET", srv.URL+path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s without local mode: %d, want 404", path, res.StatusCode)
		}
	}
	if res, _ := fetch(t, "DELETE", srv.URL+"/local/api/messages"); res.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE without local mode: %d", res.StatusCode)
	}
	if err := s.ServeLocal(nil); err == nil {
		t.Error("ServeLocal(nil) was accepted")
	}
}

func TestLocalAPI(t *testing.T) {
	t.Parallel()
	c := newFakeCatcher()
	srv := mustStartLocalEdge(t, c)

	res, body := fetch(t, "GET", srv.URL+"/local/api/messages")
	var list []map[string]any
	if res.StatusCode != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 {
		t.Fatalf("list: %d %s", res.StatusCode, body)
	}
	if list[0]["id"] != caughtID || list[0]["subject"] != "Welcome <b>aboard</b>" || list[0]["receivedAt"] != "2026-11-21T10:00:00Z" ||
		list[0]["dkim"].(map[string]any)["result"] != "pass" || list[0]["text"] != nil {
		t.Errorf("list item: %s", body)
	}

	res, body = fetch(t, "GET", srv.URL+"/local/api/messages/"+caughtID)
	var m map[string]any
	if res.StatusCode != 200 || json.Unmarshal([]byte(body), &m) != nil {
		t.Fatalf("message: %d %s", res.StatusCode, body)
	}
	atts, _ := m["attachments"].([]any)
	if m["text"] != "plain body" || m["html"] != hostileHTML || len(atts) != 1 ||
		atts[0].(map[string]any)["url"] != "/local/api/messages/"+caughtID+"/attachments/0" ||
		len(m["headers"].([]any)) != 2 || m["from"] != `"Ada" <ada@acme.test>` {
		t.Errorf("message: %s", body)
	}

	res, body = fetch(t, "GET", srv.URL+"/local/api/messages/"+caughtID+"/raw")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "message/rfc822" || body != "Subject: Welcome\r\n\r\nplain body\r\n" {
		t.Errorf("raw: %d %q %q", res.StatusCode, res.Header.Get("Content-Type"), body)
	}

	// An attachment is a download whatever type it claims, so an HTML attachment never runs as a page.
	res, body = fetch(t, "GET", srv.URL+"/local/api/messages/"+caughtID+"/attachments/0")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment") ||
		!strings.Contains(res.Header.Get("Content-Disposition"), "notes.html") ||
		!strings.HasPrefix(res.Header.Get("Content-Security-Policy"), "sandbox") || body != "<script>alert(1)</script>" {
		t.Errorf("attachment: %d %v %q", res.StatusCode, res.Header, body)
	}

	for _, path := range []string{"/local/api/messages/nope", "/local/api/messages/" + caughtID + "/attachments/1",
		"/local/api/messages/" + caughtID + "/attachments/-1", "/local/api/messages/" + caughtID + "/attachments/x",
		"/local/mail/nope", "/local/mail/nope/html", "/local/api/messages/nope/raw"} {
		if res, body := fetch(t, "GET", srv.URL+path); res.StatusCode != 404 || !strings.Contains(body, `"statusCode":404`) {
			t.Errorf("GET %s: %d %s, want the 404 body", path, res.StatusCode, body)
		}
	}

	if res, body := fetch(t, "DELETE", srv.URL+"/local/api/messages"); res.StatusCode != 200 || !strings.Contains(body, `"deleted":true`) {
		t.Fatalf("clear: %d %s", res.StatusCode, body)
	}
	if _, body := fetch(t, "GET", srv.URL+"/local/api/messages"); strings.TrimSpace(body) != "[]" {
		t.Fatalf("after clearing: %s", body)
	}
}

func TestLocalPages(t *testing.T) {
	t.Parallel()
	srv := mustStartLocalEdge(t, newFakeCatcher())

	res, body := fetch(t, "GET", srv.URL+"/local/mail")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("list page: %d %v", res.StatusCode, res.Header)
	}
	for _, want := range []string{"Welcome &lt;b&gt;aboard&lt;/b&gt;", "DKIM: pass", `href="/local/mail/` + caughtID + `"`,
		`src="/local/assets/local.js"`, `href="/local/assets/local.css"`} {
		if !strings.Contains(body, want) {
			t.Errorf("list page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>aboard</b>") || strings.Contains(body, "<style") || strings.Contains(body, "style=") ||
		strings.Contains(body, "<script>") {
		t.Errorf("list page has unescaped markup or inline code the policy forbids:\n%s", body)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("list page policy %q", csp)
	}

	res, body = fetch(t, "GET", srv.URL+"/local/mail/"+caughtID)
	for _, want := range []string{`<iframe class="html-part" sandbox src="/local/mail/` + caughtID + `/html"`, "DKIM: pass",
		"d=acme.test, s=pmabc", "plain body", "X-Campaign", "notes.html", "Subject: Welcome"} {
		if !strings.Contains(body, want) {
			t.Errorf("message page lacks %q", want)
		}
	}
	if strings.Contains(body, "SCRIPT RAN") {
		t.Error("the HTML part is inlined into the page instead of framed")
	}

	res, body = fetch(t, "GET", srv.URL+"/local/mail/"+caughtID+"/html")
	csp := res.Header.Get("Content-Security-Policy")
	if res.StatusCode != 200 || body != hostileHTML || !strings.HasPrefix(csp, "sandbox;") || strings.Contains(csp, "script-src") ||
		!strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'self'") ||
		res.Header.Get("X-Frame-Options") != "SAMEORIGIN" {
		t.Errorf("HTML part: %d policy %q frame %q", res.StatusCode, csp, res.Header.Get("X-Frame-Options"))
	}

	for _, asset := range []string{"local.css", "local.js"} {
		if res, _ := fetch(t, "GET", srv.URL+"/local/assets/"+asset); res.StatusCode != 200 || res.Header.Get("ETag") == "" {
			t.Errorf("asset %s: %d", asset, res.StatusCode)
		}
	}
}

// TestLocalMailInBrowser loads the pages in headless Chromium with the network cut: the list shows the
// message and its DKIM result and the page's script ran (it reveals the Delete button) without a policy
// complaint; the message page frames the HTML part, whose script the sandbox refuses to run.
func TestLocalMailInBrowser(t *testing.T) {
	t.Parallel()
	browser, proxy := newOfflineBrowser(t)
	srv := mustStartLocalEdge(t, newFakeCatcher())

	got := browser.load(t, proxy, srv.URL+"/local/mail")
	for _, want := range []string{"Welcome &lt;b&gt;aboard&lt;/b&gt;", "DKIM: pass", `<button id="clear" type="button">Delete all</button>`} {
		if !strings.Contains(got.dom, want) {
			t.Errorf("list page DOM lacks %q:\n%s", want, tail(got.dom, 3000))
		}
	}
	for _, line := range got.console {
		t.Errorf("list page console: %s", line)
	}
	if len(got.escapes) > 0 {
		t.Errorf("list page tried to leave the machine: %v", got.escapes)
	}

	got = browser.load(t, proxy, srv.URL+"/local/mail/"+caughtID)
	if !strings.Contains(got.dom, `sandbox=""`) || !strings.Contains(got.dom, "DKIM: pass") {
		t.Errorf("message page DOM:\n%s", tail(got.dom, 3000))
	}
	if !containsAny(got.console, "sandboxed and the 'allow-scripts' permission is not set") {
		t.Errorf("no sign that the sandbox refused the HTML part's script; console: %v", got.console)
	}
	if !containsAny(got.console, "tracker.example/pixel.gif' violates") {
		t.Errorf("no sign that the policy refused the HTML part's remote image; console: %v", got.console)
	}
	for _, line := range got.console {
		if !strings.Contains(line, "/local/mail/"+caughtID+"/html") {
			t.Errorf("message page console (not about the framed HTML part): %s", line)
		}
	}
	if len(got.escapes) > 0 {
		t.Errorf("the HTML part's remote image was fetched: %v", got.escapes)
	}
}
