package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/deploy/app"
)

// env is one running Postmill (all tiers in this process) on :0 ports with its own database schema.
type env struct {
	t    testing.TB
	app  *app.App
	base string
	http *http.Client
}

// testConfig is a configuration that runs on loopback :0 ports against databaseURL.
func testConfig(tb testing.TB, databaseURL string) app.Config {
	tb.Helper()
	cfg, err := app.LoadEnv(func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	cfg.DatabaseURL = databaseURL
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.MetricsAddr = "127.0.0.1:0"
	cfg.RPCAddr = "127.0.0.1:0"
	cfg.SubmissionAddr = "127.0.0.1:0"
	cfg.SMTPAddr = "127.0.0.1:0"
	cfg.DataDir = tb.TempDir()
	cfg.SecretKeys = [][]byte{[]byte(randomHex(tb, 32))}
	cfg.AdminEmails = []string{"root@admin.example"}
	cfg.AdminRequire2FA = false // tests that check the requirement turn it back on
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	// The MX sinks listen on 127.0.0.1, the one loopback address the MTA may deliver to here.
	cfg.MTAAllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	cfg.ShutdownGraceSecs = 5
	return cfg
}

// MustStart starts an App for cfg and stops it when the test ends.
func MustStart(tb testing.TB, cfg app.Config, targets string) *env {
	tb.Helper()
	ts, err := app.ParseTargets(targets)
	if err != nil {
		tb.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	a, err := app.New(cfg, ts, logger)
	if err != nil {
		tb.Fatalf("app.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		tb.Fatalf("app.Start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			tb.Errorf("stopping: %v", err)
		}
	})
	return &env{t: tb, app: a, base: a.HTTPURL(), http: &http.Client{Timeout: 30 * time.Second}}
}

// MustStartAll is the usual test platform: every tier, a fresh schema.
func MustStartAll(tb testing.TB) *env {
	tb.Helper()
	return MustStart(tb, testConfig(tb, pgtest.URL(tb)), "all")
}

func randomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ipCounter hands out distinct documentation-range client addresses (RFC 5737) for X-Forwarded-For, so
// tests that sign up several users are not limited by the per-IP signup window. Nothing is sent to them:
// they only appear in a header on loopback requests.
var ipCounter atomic.Uint32

func nextClientIP() string {
	n := ipCounter.Add(1)
	return fmt.Sprintf("203.0.%d.%d", (n/250)%250, n%250+1)
}

// resp is a decoded response.
type resp struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
	list   []any
}

func (r resp) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

type req struct {
	method, path, token string
	body                any
	header              map[string]string
}

func (e *env) do(r req) resp {
	e.t.Helper()
	var rdr io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		rdr = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rdr = bytes.NewReader(buf)
	}
	hr, err := http.NewRequest(r.method, e.base+r.path, rdr)
	if err != nil {
		e.t.Fatal(err)
	}
	if rdr != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	res, err := e.http.Do(hr)
	if err != nil {
		e.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, header: res.Header, raw: raw}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		_ = json.Unmarshal(trimmed, &out.body)
	} else if len(trimmed) > 0 && trimmed[0] == '[' {
		_ = json.Unmarshal(trimmed, &out.list)
	}
	return out
}

func (e *env) get(path, token string) resp { return e.do(req{method: "GET", path: path, token: token}) }
func (e *env) post(path, token string, body any) resp {
	return e.do(req{method: "POST", path: path, token: token, body: body})
}
func (e *env) del(path, token string) resp {
	return e.do(req{method: "DELETE", path: path, token: token})
}

// expect fails the test when the status differs, printing the body.
func expect(tb testing.TB, r resp, status int) resp {
	tb.Helper()
	if r.status != status {
		tb.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	return r
}

// account is a signed-up user with its organization and tokens.
type account struct {
	email, password string
	userID, orgID   string
	access, refresh string
}

// MustSignup signs up a new user (from its own client address) and returns its account.
func (e *env) MustSignup(email string, orgName string) account {
	e.t.Helper()
	body := map[string]any{"email": email, "password": "correct horse battery"}
	if orgName != "" {
		body["organizationName"] = orgName
	}
	r := expect(e.t, e.do(req{method: "POST", path: "/v1/auth/signup", body: body,
		header: map[string]string{"X-Forwarded-For": nextClientIP()}}), 201)
	return account{email: email, password: "correct horse battery", userID: r.str("userId"),
		orgID: r.str("organizationId"), access: r.str("accessToken"), refresh: r.str("refreshToken")}
}

// MustKey creates an API key with the given scopes (nil = default) and returns its token.
func (e *env) MustKey(a account, scopes []string) (id, token string) {
	e.t.Helper()
	body := map[string]any{"name": "test key"}
	if scopes != nil {
		body["scopes"] = scopes
	}
	r := expect(e.t, e.post("/v1/api-keys", a.access, body), 201)
	return r.str("id"), r.str("token")
}

// errorBody asserts SPEC §7's error shape and returns the body.
func errorBody(tb testing.TB, r resp, status int, errWord, message string) map[string]any {
	tb.Helper()
	expect(tb, r, status)
	if r.header.Get("Content-Type") == "" || !strings.Contains(r.header.Get("Content-Type"), "json") {
		tb.Errorf("error content-type %q", r.header.Get("Content-Type"))
	}
	if got, _ := r.body["statusCode"].(float64); int(got) != status {
		tb.Errorf("statusCode %v, want %d: %s", r.body["statusCode"], status, r.raw)
	}
	if errWord != "" && r.str("error") != errWord {
		tb.Errorf("error %q, want %q: %s", r.str("error"), errWord, r.raw)
	}
	if message != "" && r.str("message") != message {
		tb.Errorf("message %q, want %q: %s", r.str("message"), message, r.raw)
	}
	if r.str("message") == "" {
		tb.Errorf("error body without a message: %s", r.raw)
	}
	return r.body
}
