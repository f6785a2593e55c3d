package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

// clearOfWindowEdge waits, when the fixed rate-limit window of the given length (aligned to the Unix epoch,
// core/ratelimit) ends within need, until the next one starts, so that a test counting requests up to a
// limit does not see its counter reset halfway.
func clearOfWindowEdge(t *testing.T, window, need time.Duration) {
	t.Helper()
	left := window - time.Duration(time.Now().UnixNano()%int64(window))
	if left < need {
		time.Sleep(left + 100*time.Millisecond)
	}
}

func TestSignupRateLimitPerClientIP(t *testing.T) {
	t.Parallel()
	clearOfWindowEdge(t, time.Hour, time.Minute)
	url := pgtest.URL(t)
	// Two edge processes over one database share the window (SPEC §8: fixed windows shared by every edge).
	e1 := MustStart(t, testConfig(t, url), "all")
	e2 := MustStart(t, testConfig(t, url), "all")
	ip := nextClientIP()
	for i := range 5 {
		e := []*env{e1, e2}[i%2]
		expect(t, e.do(req{method: "POST", path: "/v1/auth/signup", header: map[string]string{"X-Forwarded-For": ip},
			body: map[string]any{"email": fmt.Sprintf("rl%d@example.com", i), "password": "long enough"}}), 201)
	}
	r := e1.do(req{method: "POST", path: "/v1/auth/signup", header: map[string]string{"X-Forwarded-For": ip},
		body: map[string]any{"email": "rl6@example.com", "password": "long enough"}})
	b := errorBody(t, r, 429, "Too Many Requests", "Rate limit exceeded. Try again later.")
	if s, _ := b["retryAfterSeconds"].(float64); s < 1 || s > 3600 {
		t.Errorf("retryAfterSeconds %v", b["retryAfterSeconds"])
	}
	if r.header.Get("Retry-After") != "" {
		t.Error("429 carries a Retry-After header")
	}
	// Another client is not limited, and the refused signup wrote nothing.
	expect(t, e2.do(req{method: "POST", path: "/v1/auth/signup", header: map[string]string{"X-Forwarded-For": nextClientIP()},
		body: map[string]any{"email": "rl6@example.com", "password": "long enough"}}), 201)
}

func TestLoginRateLimitAndUntrustedForwardedFor(t *testing.T) {
	t.Parallel()
	clearOfWindowEdge(t, time.Minute, 30*time.Second)
	cfg := testConfig(t, pgtest.URL(t))
	cfg.TrustedProxies = nil // the socket address counts; X-Forwarded-For is ignored
	e := MustStart(t, cfg, "all")
	e.MustSignup("lena@example.com", "")
	for range 10 {
		r := e.do(req{method: "POST", path: "/v1/auth/login", header: map[string]string{"X-Forwarded-For": nextClientIP()},
			body: map[string]any{"email": "lena@example.com", "password": "wrong password"}})
		expect(t, r, 401)
	}
	r := e.do(req{method: "POST", path: "/v1/auth/login", header: map[string]string{"X-Forwarded-For": nextClientIP()},
		body: map[string]any{"email": "lena@example.com", "password": "correct horse battery"}})
	b := errorBody(t, r, 429, "Too Many Requests", "Rate limit exceeded. Try again later.")
	if s, _ := b["retryAfterSeconds"].(float64); s < 1 || s > 60 {
		t.Errorf("retryAfterSeconds %v", b["retryAfterSeconds"])
	}
}

func TestErrorShapeDocsAndOperations(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)

	r := e.get("/v1/no-such-route", "")
	errorBody(t, r, 404, "Not Found", "")
	errorBody(t, e.get("/nothing/here", ""), 404, "Not Found", "")
	if id := r.header.Get("X-Request-Id"); id == "" {
		t.Error("no X-Request-Id on a response")
	}
	r = e.do(req{method: "GET", path: "/healthz", header: map[string]string{"X-Request-Id": "trace-me-123"}})
	expect(t, r, 200)
	if r.header.Get("X-Request-Id") != "trace-me-123" {
		t.Errorf("request id not echoed: %q", r.header.Get("X-Request-Id"))
	}
	expect(t, e.get("/readyz", ""), 200)

	// Oversized bodies are refused in the same shape.
	big := `{"email":"a@example.com","password":"` + strings.Repeat("p", 2<<20) + `"}`
	r = e.do(req{method: "POST", path: "/v1/auth/signup", body: big, header: map[string]string{"X-Forwarded-For": nextClientIP()}})
	if r.status != 413 && r.status != 400 {
		t.Errorf("oversized body: %d %s", r.status, r.raw)
	}

	// The OpenAPI document lists every route of this release.
	doc := expect(t, e.get("/v1/openapi.json", ""), 200)
	if v, _ := doc.body["openapi"].(string); !strings.HasPrefix(v, "3.1") {
		t.Errorf("openapi version %q", v)
	}
	paths, _ := doc.body["paths"].(map[string]any)
	want := map[string][]string{
		"/v1/auth/signup":                     {"post"},
		"/v1/auth/login":                      {"post"},
		"/v1/auth/refresh":                    {"post"},
		"/v1/auth/2fa/enroll":                 {"post"},
		"/v1/auth/2fa/verify":                 {"post"},
		"/v1/api-keys":                        {"get", "post"},
		"/v1/api-keys/{id}":                   {"delete"},
		"/v1/smtp-credentials":                {"get", "post"},
		"/v1/smtp-credentials/{id}":           {"delete"},
		"/v1/organization":                    {"get"},
		"/v1/admin/organizations":             {"get"},
		"/v1/admin/organizations/{id}/pause":  {"post"},
		"/v1/admin/organizations/{id}/resume": {"post"},
		"/v1/admin/organizations/{id}/limits": {"put"},
		"/v1/billing/subscription":            {"get"},
	}
	for p, methods := range want {
		item, ok := paths[p].(map[string]any)
		if !ok {
			t.Errorf("OpenAPI lacks %s", p)
			continue
		}
		for _, m := range methods {
			if _, ok := item[m]; !ok {
				t.Errorf("OpenAPI lacks %s %s", m, p)
			}
		}
	}
	res, err := http.Get(e.base + "/docs")
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(html), "openapi") {
		t.Errorf("/docs: %d", res.StatusCode)
	}

	// Metrics count requests by route pattern and status; they are served on the operations listener only.
	e.MustSignup("mike@example.com", "")
	errorBody(t, e.get("/metrics", ""), 404, "Not Found", "")
	m := e.getURL(t, e.app.MetricsURL()+"/metrics")
	expect(t, m, 200)
	if !regexp.MustCompile(`postmill_http_requests_total\{[^}]*route="/v1/auth/signup"[^}]*\} [1-9]`).Match(m.raw) &&
		!regexp.MustCompile(`postmill_http_requests_total\{[^}]*route="POST /v1/auth/signup"[^}]*\} [1-9]`).Match(m.raw) {
		t.Errorf("metrics lack the signup route counter")
	}
	if !strings.Contains(string(m.raw), "postmill_http_request_duration_seconds") {
		t.Error("metrics lack the latency histogram")
	}
}
