package e2e

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/deploy/app"
)

// localConfig is the platform as `make run` starts it, on :0 ports: local mode with its DNS server and
// mail catcher in the process. The test's usual exemption of 127.0.0.1 for the MTA is taken away, so
// delivery to the catcher relies on the exemption local mode adds, and the local DNS forwards nothing.
func localConfig(t *testing.T) app.Config {
	t.Helper()
	cfg := testConfig(t, pgtest.URL(t))
	cfg.MTAAllowNets = nil
	cfg.MTARetryBase = 200 * time.Millisecond
	cfg.Local = app.LocalConfig{Enabled: true, DNSAddr: "127.0.0.1:0", CatcherAddr: "127.0.0.1:0", CatcherMax: 50, DNSUpstream: "none"}
	return cfg
}

// TestLocalModeWalkthrough is "try it in five minutes": sign up, create a key and a domain, verify it
// against the in-process DNS, send, and find the message in the catcher, DKIM-verified against the key the
// local DNS publishes, with its raw source, and shown by /local/mail in a browser. A restart on the same
// data directory still shows it.
func TestLocalModeWalkthrough(t *testing.T) {
	t.Parallel()
	cfg := localConfig(t)
	e := MustStart(t, cfg, "all")
	if e.app.LocalDNSAddr() == "" || e.app.CatcherAddr() == "" {
		t.Fatalf("local mode did not start its DNS server (%q) or catcher (%q)", e.app.LocalDNSAddr(), e.app.CatcherAddr())
	}

	owner := e.MustSignup("dev@laptop.example", "")
	d := expect(t, e.post("/v1/domains", owner.access, map[string]any{"domain": "laptop.example"}), 201)
	// Nothing was published by hand: the records come from the local DNS server.
	v := expect(t, e.post("/v1/domains/"+d.str("id")+"/verify", owner.access, nil), 201)
	if v.str("status") != "verified" {
		t.Fatalf("verify through the local DNS: %s", v.raw)
	}
	for _, r := range v.body["records"].([]any) {
		if rec := r.(map[string]any); rec["verified"] != true {
			t.Errorf("record not verified: %v", rec)
		}
	}
	// An inbound domain's MX is published too, naming the inbound MX host.
	in := expect(t, e.post("/v1/inbound/domains", owner.access, map[string]any{"domain": "in.laptop.example"}), 201)
	if v := expect(t, e.post("/v1/inbound/domains/"+in.str("id")+"/verify", owner.access, nil), 201); v.str("status") != "verified" {
		t.Errorf("inbound domain through the local DNS: %s", v.raw)
	}
	_, key := e.MustKey(owner, []string{"emails:send", "emails:read"})

	sent := expect(t, e.do(req{method: "POST", path: "/v1/emails", token: key, body: map[string]any{
		"from": "Dev <dev@laptop.example>", "to": "friend@gmail.com", "cc": []string{"pal@gmail.com"},
		"subject": "Hello from local mode", "text": "plain body", "html": "<p>Hello <b>world</b></p>",
		"attachments": []map[string]any{{"filename": "hello.txt", "contentType": "text/plain", "content": "aGVsbG8="}},
	}}), 202)
	id := sent.str("id")
	deadline := time.Now().Add(30 * time.Second)
	var m resp
	for {
		m = expect(t, e.get("/v1/emails/"+id, key), 200)
		if m.str("status") == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("message never delivered to the catcher: %s", m.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if tl := timeline(m); !contains(tl, "sent") || !contains(tl, "delivered") {
		t.Errorf("timeline %v", tl)
	}

	list := expect(t, e.get("/local/api/messages", ""), 200)
	if len(list.list) != 1 {
		t.Fatalf("caught %d messages, want 1 (both recipients share a domain, so one transaction): %s", len(list.list), list.raw)
	}
	caught := list.list[0].(map[string]any)
	cid := caught["id"].(string)
	dk := caught["dkim"].(map[string]any)
	if caught["subject"] != "Hello from local mode" || dk["result"] != "pass" || dk["domain"] != "laptop.example" {
		t.Fatalf("caught message: %s", list.raw)
	}
	if env := caught["envelopeFrom"].(string); !strings.HasSuffix(env, "@bounce.laptop.example") {
		t.Errorf("envelope sender %q is not the VERP return path", env)
	}
	if to := caught["envelopeTo"].([]any); len(to) != 2 {
		t.Errorf("envelope recipients %v", to)
	}

	full := expect(t, e.get("/local/api/messages/"+cid, ""), 200)
	if !strings.Contains(full.str("html"), "<b>world</b>") || strings.TrimSpace(full.str("text")) != "plain body" {
		t.Errorf("parts: %s", full.raw)
	}
	atts, _ := full.body["attachments"].([]any)
	if len(atts) != 1 || atts[0].(map[string]any)["filename"] != "hello.txt" {
		t.Fatalf("attachments: %s", full.raw)
	}
	if a := expect(t, e.get(atts[0].(map[string]any)["url"].(string), ""), 200); string(a.raw) != "hello" {
		t.Errorf("attachment content %q", a.raw)
	}

	raw := expect(t, e.get("/local/api/messages/"+cid+"/raw", ""), 200)
	if raw.header.Get("Content-Type") != "message/rfc822" || !bytes.Contains(raw.raw, []byte("DKIM-Signature:")) ||
		!bytes.Contains(raw.raw, []byte("Message-Id: <"+id+"@laptop.example>")) && !bytes.Contains(raw.raw, []byte("Message-ID: <"+id+"@laptop.example>")) {
		t.Fatalf("raw source: %s", raw.raw)
	}
	// Verified again here, by the test, against the key the local DNS serves.
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(raw.raw), &dkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) { return lookupTXT(e.app.LocalDNSAddr(), name) },
	})
	if err != nil || len(vs) != 1 || vs[0].Err != nil {
		t.Fatalf("DKIM of the caught message: %v %+v", err, vs)
	}
	tampered := bytes.Replace(raw.raw, []byte("Subject: Hello"), []byte("Subject: Jello"), 1)
	if vs, _ := dkim.VerifyWithOptions(bytes.NewReader(tampered), &dkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) { return lookupTXT(e.app.LocalDNSAddr(), name) },
	}); len(vs) != 1 || vs[0].Err == nil {
		t.Fatal("a tampered copy verified: the check above proves nothing")
	}

	// The page, in a browser with no network beyond loopback.
	if browser := localBrowser(t); browser != "" {
		dom := browser2DOM(t, browser, e.base+"/local/mail")
		for _, want := range []string{"Hello from local mode", "DKIM: pass"} {
			if !strings.Contains(dom, want) {
				t.Errorf("/local/mail in Chromium lacks %q:\n%s", want, dom)
			}
		}
		dom = browser2DOM(t, browser, e.base+"/local/mail/"+cid)
		for _, want := range []string{"Hello from local mode", "DKIM: pass", "hello.txt", `sandbox=""`} {
			if !strings.Contains(dom, want) {
				t.Errorf("the message page in Chromium lacks %q:\n%s", want, dom)
			}
		}
	}

	// A restart on the same data directory keeps what was caught.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again := MustStart(t, cfg, "all")
	after := expect(t, again.get("/local/api/messages", ""), 200)
	if len(after.list) != 1 || after.list[0].(map[string]any)["id"] != cid {
		t.Fatalf("after a restart: %s", after.raw)
	}
	expect(t, again.del("/local/api/messages", ""), 200)
	if after := expect(t, again.get("/local/api/messages", ""), 200); len(after.list) != 0 {
		t.Fatalf("after clearing: %s", after.raw)
	}
}

// TestLocalRoutesNeedLocalMode: the production shape has no /local routes and no catcher.
func TestLocalRoutesNeedLocalMode(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	for _, path := range []string{"/local/mail", "/local/api/messages"} {
		expect(t, e.get(path, ""), 404)
	}
	if e.app.CatcherAddr() != "" || e.app.LocalDNSAddr() != "" {
		t.Fatal("a catcher or a local DNS server runs without local mode")
	}
	cfg := testConfig(t, pgtest.URL(t))
	cfg.Local = app.LocalConfig{Enabled: true, DNSAddr: "127.0.0.1:0", CatcherAddr: "127.0.0.1:0", CatcherMax: 10}
	if _, err := app.New(cfg, app.Targets{app.TargetEdge}, nil); err == nil || !strings.Contains(err.Error(), "POSTMILL_LOCAL") {
		t.Fatalf("local mode in an edge-only process: %v", err)
	}

	// A catcher address that is taken fails the start, and the DNS server that had started is closed.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dnsAddr := freeDNSAddr(t)
	cfg.Local = app.LocalConfig{Enabled: true, DNSAddr: dnsAddr, CatcherAddr: busy.Addr().String(), CatcherMax: 10, DNSUpstream: "none"}
	ts, _ := app.ParseTargets("all")
	a, err := app.New(cfg, ts, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Start(ctx); err == nil || !strings.Contains(err.Error(), "POSTMILL_CATCHER_ADDR") {
		t.Fatalf("start with the catcher's address taken: %v", err)
	}
	again, err := net.ListenPacket("udp", dnsAddr)
	if err != nil {
		t.Fatalf("the local DNS server of a failed start still holds %s: %v", dnsAddr, err)
	}
	_ = again.Close()
}

// localBrowser is Chromium's path, or "" with the browser checks skipped (fatal under CI=true, where
// deploy/scripts/test-deps.sh installs it).
func localBrowser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH (CI=true: the browser check is required)")
	}
	t.Log("no chromium on PATH: the browser check is skipped")
	return ""
}

// browser2DOM loads url in headless Chromium the way edge/docs_browser_test.go does, with every address
// but loopback unreachable (names do not resolve, other traffic goes to a refusing proxy), and returns
// the DOM once the page's scripts settled.
func browser2DOM(t *testing.T, browser, url string) string {
	t.Helper()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no network in this test", http.StatusForbidden)
	}))
	defer proxy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-extensions", "--mute-audio",
		"--user-data-dir="+t.TempDir(),
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"--proxy-server="+proxy.URL,
		"--virtual-time-budget=5000",
		"--dump-dom", url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// freeDNSAddr is a loopback port free for both UDP and TCP, as the local DNS server listens on both: a
// port the kernel gave for UDP may be taken for TCP (an outgoing connection's port).
func freeDNSAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := pc.LocalAddr().String()
		l, err := net.Listen("tcp", addr)
		_ = pc.Close()
		if err == nil {
			_ = l.Close()
			return addr
		}
	}
	t.Fatal("no loopback port free for both UDP and TCP")
	return ""
}
