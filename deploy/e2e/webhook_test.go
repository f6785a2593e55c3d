package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/deploy/app"
)

// hookRequest is one webhook request as the receiver saw it.
type hookRequest struct {
	path   string
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is a real HTTP server on 127.0.0.1 (the one allow-listed loopback address) that records every
// request and answers with the status of its path: /ok → 204, /fail → 500.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []hookRequest
}

func MustReceiver(tb testing.TB) *receiver {
	tb.Helper()
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, hookRequest{path: req.URL.Path, header: req.Header.Clone(), body: body, at: time.Now()})
		r.mu.Unlock()
		if strings.HasPrefix(req.URL.Path, "/fail") {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) port() string {
	_, p, _ := net.SplitHostPort(r.srv.Listener.Addr().String())
	return p
}

// waitFor returns the requests on path whose event type is typ once at least n arrived.
func (r *receiver) waitFor(tb testing.TB, path, typ string, n int, timeout time.Duration) []hookRequest {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var got []hookRequest
		r.mu.Lock()
		for _, q := range r.reqs {
			if q.path == path && (typ == "" || q.header.Get("X-Service-Event") == typ) {
				got = append(got, q)
			}
		}
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d requests of %q on %s, want %d", len(got), typ, path, n)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// MustWebhookWorld is a mail world whose webhooks may reach 127.0.0.1 only, with retries every 300 ms.
func MustWebhookWorld(t *testing.T) (*mailWorld, *receiver) {
	t.Helper()
	rcv := MustReceiver(t)
	w := MustMailWorld(t, func(c *app.Config) {
		c.WebhookAllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.WebhookSchedule = []time.Duration{300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}
	})
	w.dns.SetA("hooks.example", netip.MustParseAddr("127.0.0.1"))
	w.dns.SetA("internal.example", netip.MustParseAddr("127.0.0.2"))
	_, w.key = w.MustKey(w.owner, []string{"*"})
	return w, rcv
}

func (w *mailWorld) mustEndpoint(t *testing.T, url string, types ...string) (id, secret string) {
	t.Helper()
	r := expect(t, w.post("/v1/webhooks", w.key, map[string]any{"url": url, "eventTypes": types}), 201)
	if !regexp.MustCompile(`^whsec_[0-9a-f]{64}$`).MatchString(r.str("secret")) || r.body["enabled"] != true {
		t.Fatalf("endpoint answer: %s", r.raw)
	}
	return r.str("id"), r.str("secret")
}

func TestWebhooksSignedRetriedReplayed(t *testing.T) {
	t.Parallel()
	w, rcv := MustWebhookWorld(t)
	okURL := "http://hooks.example:" + rcv.port() + "/ok"
	okID, secret := w.mustEndpoint(t, okURL, "email.queued", "email.sent", "email.delivered")
	failID, _ := w.mustEndpoint(t, "http://hooks.example:"+rcv.port()+"/fail", "email.delivered")

	// Listings mask secrets.
	l := expect(t, w.get("/v1/webhooks", w.key), 200)
	if len(l.list) != 2 || strings.Contains(string(l.raw), secret) || !strings.Contains(string(l.raw), `"whsec_***"`) {
		t.Fatalf("listing: %s", l.raw)
	}

	sent := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "hook@rcpt.example", "subject": "Hooked", "text": "x"}, nil), 202)
	msgID := sent.str("id")
	for _, typ := range []string{"email.queued", "email.sent", "email.delivered"} {
		reqs := rcv.waitFor(t, "/ok", typ, 1, 30*time.Second)
		q := reqs[0]
		var body map[string]any
		if err := json.Unmarshal(q.body, &body); err != nil {
			t.Fatalf("%s body: %v", typ, err)
		}
		data, _ := body["data"].(map[string]any)
		if body["type"] != typ || body["id"] != q.header.Get("X-Service-Event-Id") || data["message_id"] != msgID {
			t.Errorf("%s request: %s %v", typ, q.body, q.header)
		}
		if q.header.Get("User-Agent") != "Service-Webhooks/1" || q.header.Get("Content-Type") != "application/json" ||
			q.header.Get("X-Service-Event") != typ || q.header.Get("X-Service-Delivery") == "" {
			t.Errorf("%s headers: %v", typ, q.header)
		}
		if typ == "email.delivered" && !strings.HasPrefix(fmt.Sprint(data["provider_response"]), "250") {
			t.Errorf("delivered provider_response: %v", data["provider_response"])
		}
		if err := verifyWithPublishedSnippets(t, secret, q); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
	// A tampered body fails the published verifiers.
	q := rcv.waitFor(t, "/ok", "email.queued", 1, time.Second)[0]
	q.body = append(bytes.Clone(q.body), ' ')
	if err := verifyWithPublishedSnippets(t, secret, q); err == nil {
		t.Fatal("a tampered body verified")
	}

	// The failing endpoint: five attempts on the (shortened) schedule, then dead.
	rcv.waitFor(t, "/fail", "email.delivered", 5, 30*time.Second)
	var dead map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for dead == nil && time.Now().Before(deadline) {
		for _, d := range expect(t, w.get("/v1/webhook-events", w.key), 200).list {
			m := d.(map[string]any)
			if m["endpointId"] == failID && m["status"] == "dead" {
				dead = m
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if dead == nil || dead["attempts"] != float64(5) || dead["responseCode"] != float64(500) || dead["nextRetryAt"] != nil {
		t.Fatalf("failing delivery: %v", dead)
	}
	time.Sleep(700 * time.Millisecond)
	if n := len(rcv.waitFor(t, "/fail", "", 5, time.Second)); n != 5 {
		t.Errorf("a dead delivery was attempted again: %d attempts", n)
	}

	// Test event: evt_test_, {test: true, message_id: null}, delivered on the first attempt.
	tr := expect(t, w.post("/v1/webhooks/"+okID+"/test", w.key, nil), 201)
	if tr.str("status") != "delivered" || tr.body["attempts"] != float64(1) || !strings.HasPrefix(tr.str("eventId"), "evt_test_") || tr.str("eventType") != "email.delivered" {
		t.Fatalf("test delivery: %s", tr.raw)
	}
	var testReq hookRequest
	for _, r := range rcv.waitFor(t, "/ok", "email.delivered", 2, 5*time.Second) {
		if strings.HasPrefix(r.header.Get("X-Service-Event-Id"), "evt_test_") {
			testReq = r
		}
	}
	if !bytes.Contains(testReq.body, []byte(`"test":true`)) || !bytes.Contains(testReq.body, []byte(`"message_id":null`)) {
		t.Errorf("test payload: %s", testReq.body)
	}

	// Replay: a new row and id, the original payload and created_at, original_event_id in body and header.
	var original map[string]any
	for _, d := range expect(t, w.get("/v1/webhook-events", w.key), 200).list {
		m := d.(map[string]any)
		if m["endpointId"] == okID && m["eventType"] == "email.sent" {
			original = m
		}
	}
	if original == nil {
		t.Fatal("no email.sent delivery listed")
	}
	rp := expect(t, w.post("/v1/webhooks/"+okID+"/replay/"+original["id"].(string), w.key, nil), 201)
	if rp.str("id") == original["id"] || !strings.HasPrefix(rp.str("eventId"), "evt_replay_") {
		t.Fatalf("replay row: %s", rp.raw)
	}
	replays := rcv.waitFor(t, "/ok", "email.sent", 2, 10*time.Second)
	rq := replays[len(replays)-1]
	if rq.header.Get("X-Service-Original-Event-Id") != original["eventId"] || rq.header.Get("X-Service-Event-Id") != rp.str("eventId") {
		t.Errorf("replay headers: %v", rq.header)
	}
	var ob, rb map[string]any
	_ = json.Unmarshal(replays[0].body, &ob)
	_ = json.Unmarshal(rq.body, &rb)
	if rb["created_at"] != ob["created_at"] || rb["data"].(map[string]any)["original_event_id"] != original["eventId"] {
		t.Errorf("replay body %s vs original %s", rq.body, replays[0].body)
	}
	if err := verifyWithPublishedSnippets(t, secret, rq); err != nil {
		t.Fatalf("replay signature: %v", err)
	}
	errorBody(t, w.post("/v1/webhooks/"+okID+"/replay/0190a0b0-0000-7000-8000-000000000000", w.key, nil), 404, "", "")

	// Rotation: the next request is signed with the new secret only.
	rot := expect(t, w.post("/v1/webhooks/"+okID+"/rotate-secret", w.key, nil), 201)
	newSecret := rot.str("secret")
	if newSecret == secret || !strings.HasPrefix(newSecret, "whsec_") {
		t.Fatalf("rotate answer: %s", rot.raw)
	}
	expect(t, w.post("/v1/webhooks/"+okID+"/test", w.key, nil), 201)
	all := rcv.waitFor(t, "/ok", "email.delivered", 3, 5*time.Second)
	last := all[len(all)-1]
	if err := verifyWithPublishedSnippets(t, newSecret, last); err != nil {
		t.Errorf("new secret: %v", err)
	}
	if err := verifyWithPublishedSnippets(t, secret, last); err == nil {
		t.Error("the old secret still verifies after rotation")
	}

	// Deleting an endpoint deletes its deliveries.
	expect(t, w.del("/v1/webhooks/"+failID, w.key), 200)
	for _, d := range expect(t, w.get("/v1/webhook-events", w.key), 200).list {
		if d.(map[string]any)["endpointId"] == failID {
			t.Fatal("a deleted endpoint's deliveries are still listed")
		}
	}
	errorBody(t, w.del("/v1/webhooks/"+failID, w.key), 404, "", "")
}

func TestWebhooksBlockedDomainEventsAndTenancy(t *testing.T) {
	t.Parallel()
	w, rcv := MustWebhookWorld(t)
	// A name resolving to a forbidden address (127.0.0.2: loopback outside the allow-list) is blocked,
	// never retried; so is an IP literal of one, and a name without any address.
	for _, url := range []string{"http://internal.example:" + rcv.port() + "/ok", "http://127.0.0.2:" + rcv.port() + "/ok", "http://nowhere.example/ok"} {
		id, _ := w.mustEndpoint(t, url, "email.delivered")
		r := expect(t, w.post("/v1/webhooks/"+id+"/test", w.key, nil), 201)
		if r.str("status") != "blocked" || r.body["nextRetryAt"] != nil {
			t.Errorf("%s: %s", url, r.raw)
		}
	}
	if n := len(rcv.reqs); n != 0 {
		t.Errorf("the receiver got %d requests from blocked endpoints", n)
	}
	errorBody(t, w.post("/v1/webhooks", w.key, map[string]any{"url": "ftp://hooks.example/x", "eventTypes": []string{"email.sent"}}), 400, "", "Validation failed")
	bad := errorBody(t, w.post("/v1/webhooks", w.key, map[string]any{"url": "http://hooks.example/x", "eventTypes": []string{"email.sent", "email.nope"}}), 400, "", "Validation failed")
	if d, _ := bad["details"].([]any); len(d) == 0 || !strings.HasPrefix(d[0].(map[string]any)["path"].(string), "eventTypes") {
		t.Errorf("unknown event type details: %v", bad["details"])
	}
	errorBody(t, w.post("/v1/webhooks", w.key, map[string]any{"url": "http://hooks.example/x", "eventTypes": []string{}}), 400, "", "Validation failed")

	// Domain events reach subscribed endpoints.
	w.mustEndpoint(t, "http://hooks.example:"+rcv.port()+"/ok", "domain.created", "domain.verified")
	w.mustVerifiedDomain(t, "second.example")
	created := rcv.waitFor(t, "/ok", "domain.created", 1, 10*time.Second)[0]
	rcv.waitFor(t, "/ok", "domain.verified", 1, 10*time.Second)
	if !bytes.Contains(created.body, []byte(`"message_id":null`)) {
		t.Errorf("domain event body: %s", created.body)
	}

	// Scopes and tenancy.
	_, readOnly := w.MustKey(w.owner, []string{"webhooks:read"})
	expect(t, w.get("/v1/webhooks", readOnly), 200)
	f := errorBody(t, w.post("/v1/webhooks", readOnly, map[string]any{"url": "http://hooks.example/x", "eventTypes": []string{"email.sent"}}), 403, "insufficient_scope", "")
	if rs, _ := f["requiredScopes"].([]any); len(rs) != 1 || rs[0] != "webhooks:write" {
		t.Errorf("requiredScopes %v", f["requiredScopes"])
	}
	other := w.MustSignup("intruder@example.com", "")
	_, otherKey := w.MustKey(other, []string{"*"})
	mine := expect(t, w.get("/v1/webhooks", w.key), 200).list[0].(map[string]any)["id"].(string)
	if l := expect(t, w.get("/v1/webhooks", otherKey), 200); len(l.list) != 0 {
		t.Errorf("B lists A's endpoints: %s", l.raw)
	}
	if l := expect(t, w.get("/v1/webhook-events", otherKey), 200); len(l.list) != 0 {
		t.Errorf("B lists A's deliveries: %s", l.raw)
	}
	errorBody(t, w.del("/v1/webhooks/"+mine, otherKey), 404, "", "")
	errorBody(t, w.post("/v1/webhooks/"+mine+"/test", otherKey, nil), 404, "", "")
	errorBody(t, w.post("/v1/webhooks/"+mine+"/rotate-secret", otherKey, nil), 404, "", "")
	d := expect(t, w.get("/v1/webhook-events", w.key), 200).list[0].(map[string]any)
	errorBody(t, w.post("/v1/webhooks/"+d["endpointId"].(string)+"/replay/"+d["id"].(string), otherKey, nil), 404, "", "")
	// B's endpoint never receives A's events.
	w.mustEndpointFor(t, otherKey, "http://hooks.example:"+rcv.port()+"/other", "email.queued")
	expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "x@rcpt.example", "subject": "A only", "text": "x", "sandbox": true}, nil), 202)
	time.Sleep(500 * time.Millisecond)
	rcv.mu.Lock()
	for _, r := range rcv.reqs {
		if r.path == "/other" {
			t.Errorf("B's endpoint received A's event: %s", r.body)
		}
	}
	rcv.mu.Unlock()
}

func (w *mailWorld) mustEndpointFor(t *testing.T, key, url string, types ...string) {
	t.Helper()
	expect(t, w.do(req{method: "POST", path: "/v1/webhooks", token: key, body: map[string]any{"url": url, "eventTypes": types}}), 201)
}

// verifyWithPublishedSnippets runs the Go, Node and Python verification code of docs/webhooks.md, exactly
// as published, against a request the receiver got. It returns an error if any of them rejects it (and
// fails the test if the snippets disagree with each other).
func verifyWithPublishedSnippets(t *testing.T, secret string, q hookRequest) error {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "webhooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bodyFile := filepath.Join(dir, "body")
	if err := os.WriteFile(bodyFile, q.body, 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "SECRET="+secret, "SIG="+q.header.Get("X-Service-Signature"),
		"EID="+q.header.Get("X-Service-Event-Id"), "BODY="+bodyFile)
	results := map[string]bool{}

	goSrc := strings.Replace(snippet(t, doc, "go"), "package webhookverify", "package main", 1) + `
func main() {
	body, _ := os.ReadFile(os.Getenv("BODY"))
	if err := Verify(os.Getenv("SECRET"), os.Getenv("SIG"), os.Getenv("EID"), body, time.Now()); err != nil {
		fmt.Println("false", err)
		return
	}
	fmt.Println("true")
}`
	goSrc = strings.Replace(goSrc, "import (", "import (\n\t\"fmt\"\n\t\"os\"", 1)
	goFile := filepath.Join(dir, "main.go")
	if err := os.WriteFile(goFile, []byte(goSrc), 0o600); err != nil {
		t.Fatal(err)
	}
	results["go"] = runSnippet(t, env, dir, "go", "run", goFile)

	if _, err := exec.LookPath("node"); err == nil {
		js := snippet(t, doc, "node") + "\nconsole.log(String(verify(process.env.SECRET, process.env.SIG, process.env.EID, require('fs').readFileSync(process.env.BODY))));\n"
		results["node"] = runSnippet(t, env, dir, "node", "-e", js)
	} else if os.Getenv("CI") == "true" {
		t.Fatal("node is missing: the Node snippet cannot be checked")
	}
	py := snippet(t, doc, "python") + "\nimport os\nprint(str(verify(os.environ['SECRET'], os.environ['SIG'], os.environ['EID'], open(os.environ['BODY'],'rb').read())).lower())\n"
	results["python"] = runSnippet(t, env, dir, "/usr/bin/python3", "-c", py)

	first, agree := results["go"], true
	for _, ok := range results {
		agree = agree && ok == first
	}
	if !agree {
		t.Fatalf("the published verifiers disagree: %v", results)
	}
	if !first {
		return fmt.Errorf("signature rejected by the published verifiers: %v", results)
	}
	return nil
}

// snippet returns the code block that follows <!-- verify:lang --> in the document.
func snippet(t *testing.T, doc []byte, lang string) string {
	t.Helper()
	re := regexp.MustCompile("(?s)<!-- verify:" + lang + " -->\\s*```[a-z]*\\n(.*?)```")
	m := re.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/webhooks.md has no %s snippet", lang)
	}
	return string(m[1])
}

func runSnippet(t *testing.T, env []string, dir string, name string, args ...string) bool {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(env, "GOWORK=off", "GOFLAGS=")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s snippet: %v\n%s", name, err, out)
	}
	return strings.HasPrefix(strings.TrimSpace(string(out)), "true")
}
