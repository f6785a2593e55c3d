package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/deploy/app"
)

// waitFor polls fn every 100ms until it returns true or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLogsAndAnalytics makes API calls and sends mail as a new user would, then reads them back: the
// requests in GET /v1/logs (filters, paging bounds, redacted bodies, the truncated client address) and the
// events in GET /v1/analytics (buckets, totals, per domain and per tag); another organization sees none of
// it, and API keys cannot read either.
func TestLogsAndAnalytics(t *testing.T) {
	t.Parallel()
	logsAndAnalytics(t, nil)
}

// TestLogsAndAnalyticsClickHouse is TestLogsAndAnalytics with POSTMILL_ANALYTICS=clickhouse, against a
// private clickhouse-server (Debian's 18.16, deploy/scripts/test-deps.sh).
func TestLogsAndAnalyticsClickHouse(t *testing.T) {
	t.Parallel()
	addr := mustClickHouse(t)
	db := "postmill_e2e_" + randomHex(t, 6)
	logsAndAnalytics(t, func(c *app.Config) {
		c.Analytics, c.ClickHouseDSN = "clickhouse", "clickhouse://"+addr+"/"+db
	})
}

func logsAndAnalytics(t *testing.T, mutate func(*app.Config)) {
	w := MustMailWorld(t, mutate)
	keyID, key := w.MustKey(w.owner, []string{"*"})
	w.key = key
	sess := w.owner.access

	sent := expect(t, w.send(t, map[string]any{
		"from": "ada@" + senderDomain, "to": []string{"reader@rcpt.example"}, "subject": "Analytics check",
		"text": "Hello", "tags": map[string]string{"campaign": "launch"},
	}, nil), 202)
	w.waitStatus(t, sent.str("id"), "delivered", 30*time.Second)
	bad := w.send(t, map[string]any{"from": "ada@" + senderDomain, "subject": "no recipients"}, nil)
	if bad.status != 400 {
		t.Fatalf("a send without recipients answered %d", bad.status)
	}

	// A TOTP enrolment: its answer carries the seed twice (secret, and inside otpauthUrl).
	enrol := expect(t, w.post("/v1/auth/2fa/enroll", sess, map[string]any{"password": w.owner.password}), 201)
	seed := enrol.str("secret")
	if seed == "" || !strings.Contains(enrol.str("otpauthUrl"), seed) {
		t.Fatalf("enrolment: %s", enrol.raw)
	}

	// The request log: the send, the refused send, the key creation and the enrolment appear within seconds.
	var logs []any
	waitFor(t, 15*time.Second, "four logged requests", func() bool {
		r := expect(t, w.get("/v1/logs?limit=100", sess), 200)
		logs, _ = r.body["data"].([]any)
		return len(logs) >= 4
	})
	enrolLogged := false
	for _, l := range logs {
		if m := l.(map[string]any); m["route"] == "/v1/auth/2fa/enroll" {
			enrolLogged = true
			e := expect(t, w.get("/v1/logs/"+m["id"].(string), sess), 200)
			if strings.Contains(string(e.raw), seed) || strings.Contains(strings.ToLower(string(e.raw)), "otpauth://") {
				t.Errorf("the logged enrolment shows the TOTP seed: %s", e.raw)
			}
		}
	}
	if !enrolLogged {
		t.Errorf("the enrolment is not in the request log: %v", logs)
	}
	var sendLog, badLog, keyLog map[string]any
	for _, l := range logs {
		m := l.(map[string]any)
		switch {
		case m["route"] == "/v1/emails" && m["status"] == float64(202):
			sendLog = m
		case m["route"] == "/v1/emails" && m["status"] == float64(400):
			badLog = m
		case m["route"] == "/v1/api-keys" && m["method"] == "POST":
			keyLog = m
		}
	}
	if sendLog == nil || badLog == nil || keyLog == nil {
		t.Fatalf("logs lack the send, the refused send or the key creation: %v", logs)
	}
	if sendLog["apiKeyId"] != keyID || sendLog["userId"] != nil || keyLog["userId"] != w.owner.userID || keyLog["apiKeyId"] != nil {
		t.Errorf("who made the calls: send %v/%v, key creation %v/%v", sendLog["apiKeyId"], sendLog["userId"], keyLog["userId"], keyLog["apiKeyId"])
	}
	if ip, _ := sendLog["clientIp"].(string); !strings.HasSuffix(ip, ".0") {
		t.Errorf("client address %q is not truncated to its /24", ip)
	}
	if sendLog["path"] != "/v1/emails" || sendLog["method"] != "POST" || sendLog["requestId"] == "" {
		t.Errorf("send log: %v", sendLog)
	}

	d := expect(t, w.get("/v1/logs/"+sendLog["id"].(string), sess), 200)
	if !strings.Contains(d.str("requestBody"), "Analytics check") || !strings.Contains(d.str("responseBody"), sent.str("id")) {
		t.Errorf("send log bodies: %q / %q", d.str("requestBody"), d.str("responseBody"))
	}
	k := expect(t, w.get("/v1/logs/"+keyLog["id"].(string), sess), 200)
	if strings.Contains(k.str("responseBody"), key) || !strings.Contains(k.str("responseBody"), "[redacted]") {
		t.Errorf("the key creation's logged response shows the key: %q", k.str("responseBody"))
	}

	// Filters and bounds.
	r := expect(t, w.get("/v1/logs?status=4xx", sess), 200)
	for _, l := range r.body["data"].([]any) {
		if s := l.(map[string]any)["status"].(float64); s < 400 || s >= 500 {
			t.Errorf("status=4xx listed a %v", s)
		}
	}
	if n := len(r.body["data"].([]any)); n < 1 {
		t.Errorf("status=4xx listed nothing")
	}
	// MustMailWorld created a key too: two key creations, nothing else.
	if r := expect(t, w.get("/v1/logs?route=/v1/api-keys&method=POST", sess), 200); len(r.body["data"].([]any)) != 2 {
		t.Errorf("route and method filter: %s", r.raw)
	}
	if r := expect(t, w.get("/v1/logs?q=EMAILS&limit=1", sess), 200); len(r.body["data"].([]any)) != 1 || r.body["nextCursor"] == nil {
		t.Errorf("search with limit 1: %s", r.raw)
	}
	for _, q := range []string{"limit=0", "limit=101", "status=abc", "from=yesterday"} {
		if r := w.get("/v1/logs?"+q, sess); r.status != 400 || r.body["statusCode"] != float64(400) {
			t.Errorf("GET /v1/logs?%s answered %d: %s", q, r.status, r.raw)
		}
	}
	if r := w.get("/v1/logs", key); r.status == 200 {
		t.Errorf("an API key read the request log")
	}

	// Analytics: the send and its delivery, hourly over 24h and daily over 7d.
	var a resp
	waitFor(t, 15*time.Second, "the send and delivery in analytics", func() bool {
		a = expect(t, w.get("/v1/analytics?range=24h", sess), 200)
		tot, _ := a.body["totals"].(map[string]any)
		return tot["sent"] == float64(1) && tot["delivered"] == float64(1)
	})
	if b := a.body["buckets"].([]any); len(b) != 24 || a.body["bucket"] != "hour" {
		t.Errorf("24h: %d buckets of %v", len(b), a.body["bucket"])
	}
	if rates := a.body["rates"].(map[string]any); rates["delivery"] != float64(1) {
		t.Errorf("rates: %v", rates)
	}
	if a := expect(t, w.get("/v1/analytics?range=7d", sess), 200); len(a.body["buckets"].([]any)) != 7 || a.body["bucket"] != "day" {
		t.Errorf("7d: %s", a.raw)
	}
	for q, want := range map[string]float64{"domain=" + senderDomain: 1, "domain=other.example": 0, "tag=campaign:launch": 1, "tag=campaign:other": 0} {
		a := expect(t, w.get("/v1/analytics?range=30d&"+q, sess), 200)
		if got := a.body["totals"].(map[string]any)["sent"]; got != want {
			t.Errorf("%s: sent %v, want %v", q, got, want)
		}
	}
	for _, q := range []string{"range=1y", "range=", "range=24h&domain=a.example&tag=a:b"} {
		if r := w.get("/v1/analytics?"+q, sess); r.status != 400 && q != "range=" {
			t.Errorf("GET /v1/analytics?%s answered %d: %s", q, r.status, r.raw)
		}
	}

	// Tenancy: another organization sees none of it.
	other := w.MustSignup(fmt.Sprintf("other-%s@example.test", randomHex(t, 4)), "")
	if r := expect(t, w.get("/v1/logs", other.access), 200); len(r.body["data"].([]any)) != 0 {
		t.Errorf("another organization lists %s", r.raw)
	}
	if r := w.get("/v1/logs/"+sendLog["id"].(string), other.access); r.status != 404 {
		t.Errorf("another organization's GET /v1/logs/{id} answered %d", r.status)
	}
	if r := expect(t, w.get("/v1/analytics?range=24h", other.access), 200); r.body["totals"].(map[string]any)["sent"] != float64(0) {
		t.Errorf("another organization's analytics: %s", r.raw)
	}
}
