package edge_test

import (
	"bytes"
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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// Tokens the fake core recognises. Session tokens have the JWT shape; keys the svc_live_ shape.
const (
	userToken    = "eyJhbGciOiJIUzI1NiJ9.dXNlcg.c2ln"
	adminToken   = "eyJhbGciOiJIUzI1NiJ9.YWRtaW4.c2ln"
	bogusJWT     = "eyJhbGciOiJIUzI1NiJ9.Ym9ndXM.c2ln"
	sendKey      = "svc_live_0123456789abcdef.send"
	billingKey   = "svc_live_1123456789abcdef.billing"
	starKey      = "svc_live_2123456789abcdef.star"
	unenforcedKy = "svc_live_3123456789abcdef.legacy"

	userOrg  = "0190a0b0-0000-7000-8000-00000000000a"
	adminOrg = "0190a0b0-0000-7000-8000-00000000000b"
	otherOrg = "0190a0b0-0000-7000-8000-0000000000ff"
	keyID    = "0190a0b0-0000-7000-8000-000000000001"
)

// fakeCore implements the driving interfaces of ports.Core with canned answers and records what the edge
// passed in, so tests can assert on the HTTP concerns alone.
type fakeCore struct {
	mu    sync.Mutex
	calls []string
	// orgIDs records the organization id each tenant call received.
	orgIDs []string
	// scopes records what CreateAPIKey received.
	scopes      [][]string
	scopesIsNil []bool
	limiterKeys []string
	plans       []ports.Plan

	// Overrides.
	deny   time.Duration // when non-zero the limiter refuses with this RetryAfter
	orgErr error         // returned by GetOrganization
	panics bool          // GetOrganization panics
	limErr error         // returned by Allow
	org    ports.Organization
}

func newFakeCore() *fakeCore {
	return &fakeCore{org: ports.Organization{
		ID: userOrg, Name: "Acme", Slug: "acme",
		CreatedAt: time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600)),
		Plan:      ports.Plan{MonthlyLimit: 3000},
	}}
}

func (f *fakeCore) core() ports.Core {
	return ports.Core{
		Accounts: f, Auth: f, APIKeys: f, SMTPCredentials: f, Organizations: f, RateLimiter: f,
	}
}

func (f *fakeCore) record(call, orgID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if orgID != "" {
		f.orgIDs = append(f.orgIDs, orgID)
	}
}

func (f *fakeCore) called(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == call {
			n++
		}
	}
	return n
}

func (f *fakeCore) lastOrgID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.orgIDs) == 0 {
		return ""
	}
	return f.orgIDs[len(f.orgIDs)-1]
}

// AccountService.

func (f *fakeCore) Signup(_ context.Context, in ports.SignupInput) (ports.SignupResult, error) {
	f.record("Signup", "")
	return ports.SignupResult{UserID: "0190a0b0-0000-7000-8000-0000000000c1", OrganizationID: userOrg,
		Tokens: ports.TokenPair{AccessToken: "access-" + in.Email, RefreshToken: "refresh"}}, nil
}

func (f *fakeCore) Login(_ context.Context, in ports.LoginInput) (ports.TokenPair, error) {
	f.record("Login", in.OrgID)
	return ports.TokenPair{AccessToken: "a", RefreshToken: "r"}, nil
}

func (f *fakeCore) Refresh(context.Context, string) (ports.TokenPair, error) {
	f.record("Refresh", "")
	return ports.TokenPair{AccessToken: "a2", RefreshToken: "r2"}, nil
}

func (f *fakeCore) EnrollTOTP(_ context.Context, p ports.Principal) (ports.TOTPEnrollment, error) {
	f.record("EnrollTOTP", p.OrganizationID)
	return ports.TOTPEnrollment{Secret: "JBSWY3DPEHPK3PXP", OTPAuthURL: "otpauth://totp/Postmill:u?secret=JBSWY3DPEHPK3PXP"}, nil
}

func (f *fakeCore) VerifyTOTP(_ context.Context, p ports.Principal, _ string) error {
	f.record("VerifyTOTP", p.OrganizationID)
	return nil
}

// AuthService.

func (f *fakeCore) AuthenticateAPIKey(_ context.Context, token string) (ports.Principal, error) {
	f.record("AuthenticateAPIKey", "")
	p := ports.Principal{Kind: ports.PrincipalAPIKey, OrganizationID: userOrg, APIKeyID: keyID, ScopesEnforced: true}
	switch token {
	case sendKey:
		p.Scopes = []string{ports.ScopeEmailsSend}
	case billingKey:
		p.Scopes = []string{ports.ScopeBillingRead}
	case starKey:
		p.Scopes = []string{ports.ScopeAll}
	case unenforcedKy:
		p.ScopesEnforced = false
	default:
		return ports.Principal{}, ports.Unauthenticated("Invalid API key")
	}
	return p, nil
}

func (f *fakeCore) AuthenticateSession(_ context.Context, token string) (ports.Principal, error) {
	f.record("AuthenticateSession", "")
	switch token {
	case userToken:
		return ports.Principal{Kind: ports.PrincipalSession, OrganizationID: userOrg, UserID: "u1"}, nil
	case adminToken:
		return ports.Principal{Kind: ports.PrincipalSession, OrganizationID: adminOrg, UserID: "u2", IsAdmin: true}, nil
	}
	return ports.Principal{}, ports.Unauthenticated("Invalid session token")
}

// APIKeyService.

func (f *fakeCore) ListAPIKeys(_ context.Context, orgID string) ([]ports.APIKey, error) {
	f.record("ListAPIKeys", orgID)
	used := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("X", -5*3600))
	return []ports.APIKey{
		{ID: keyID, OrganizationID: orgID, Name: "used", Prefix: "0123456789abcdef", TokenHash: []byte("secret-hash"),
			Scopes: []string{"emails:send"}, ScopesEnforced: true, LastUsedAt: &used, CreatedAt: used},
		{ID: keyID, OrganizationID: orgID, Name: "fresh", Prefix: "1123456789abcdef", TokenHash: []byte("secret-hash"),
			CreatedAt: used},
	}, nil
}

func (f *fakeCore) CreateAPIKey(_ context.Context, orgID, name string, scopes []string) (ports.CreatedAPIKey, error) {
	f.record("CreateAPIKey", orgID)
	f.mu.Lock()
	f.scopes = append(f.scopes, scopes)
	f.scopesIsNil = append(f.scopesIsNil, scopes == nil)
	f.mu.Unlock()
	if scopes == nil {
		scopes = ports.DefaultScopes
	}
	return ports.CreatedAPIKey{
		APIKey: ports.APIKey{ID: keyID, OrganizationID: orgID, Name: name, Prefix: "0123456789abcdef",
			TokenHash: []byte("secret-hash"), Scopes: scopes, ScopesEnforced: true, CreatedAt: time.Now()},
		Token: "svc_live_0123456789abcdef.plaintext",
	}, nil
}

func (f *fakeCore) RevokeAPIKey(_ context.Context, orgID, id string) error {
	f.record("RevokeAPIKey:"+id, orgID)
	return nil
}

// SMTPCredentialService.

func (f *fakeCore) CreateSMTPCredential(_ context.Context, orgID string) (ports.CreatedSMTPCredential, error) {
	f.record("CreateSMTPCredential", orgID)
	return ports.CreatedSMTPCredential{
		SMTPCredential: ports.SMTPCredential{ID: keyID, OrganizationID: orgID, Username: "smtp_abc",
			PasswordHash: "$argon2id$hash", Host: "smtp.example", Port: 1587, CreatedAt: time.Now()},
		Password: "plain-smtp-password",
	}, nil
}

func (f *fakeCore) ListSMTPCredentials(_ context.Context, orgID string) ([]ports.SMTPCredential, error) {
	f.record("ListSMTPCredentials", orgID)
	return []ports.SMTPCredential{{ID: keyID, OrganizationID: orgID, Username: "smtp_abc",
		PasswordHash: "$argon2id$hash", Host: "smtp.example", Port: 1587, CreatedAt: time.Now()}}, nil
}

func (f *fakeCore) DeleteSMTPCredential(_ context.Context, orgID, _ string) error {
	f.record("DeleteSMTPCredential", orgID)
	return nil
}

// OrganizationService.

func (f *fakeCore) GetOrganization(_ context.Context, orgID string) (ports.Organization, error) {
	f.record("GetOrganization", orgID)
	if f.panics {
		panic("boom: secret state")
	}
	if f.orgErr != nil {
		return ports.Organization{}, f.orgErr
	}
	o := f.org
	o.ID = orgID
	return o, nil
}

func (f *fakeCore) ListOrganizations(context.Context) ([]ports.Organization, error) {
	f.record("ListOrganizations", "")
	return []ports.Organization{f.org}, nil
}

func (f *fakeCore) SetPaused(_ context.Context, orgID string, paused bool) (ports.Organization, error) {
	f.record("SetPaused", orgID)
	o := f.org
	o.ID, o.Paused = orgID, paused
	return o, nil
}

func (f *fakeCore) SetPlan(_ context.Context, orgID string, plan ports.Plan) (ports.Organization, error) {
	f.record("SetPlan", orgID)
	f.mu.Lock()
	f.plans = append(f.plans, plan)
	f.mu.Unlock()
	o := f.org
	o.ID, o.Plan = orgID, plan
	return o, nil
}

func (f *fakeCore) Subscription(_ context.Context, orgID string) (ports.Subscription, error) {
	f.record("Subscription", orgID)
	return ports.Subscription{OrganizationID: orgID, Plan: ports.Plan{MonthlyLimit: 3000, WarmupCap: 0},
		PeriodStart: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), PeriodEnd: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		EmailsSent: 42}, nil
}

// RateLimiter.

func (f *fakeCore) Allow(_ context.Context, key string, limit int, window time.Duration) (ports.RateDecision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limiterKeys = append(f.limiterKeys, key+"|"+window.String())
	if f.limErr != nil {
		return ports.RateDecision{}, f.limErr
	}
	if f.deny > 0 {
		return ports.RateDecision{Allowed: false, Count: limit + 1, Limit: limit, RetryAfter: f.deny}, nil
	}
	return ports.RateDecision{Allowed: true, Count: 1, Limit: limit}, nil
}

func (f *fakeCore) limiterKeysSnapshot() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.limiterKeys...)
}

// syncBuffer collects log output from concurrent requests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines decodes the JSON log lines.
func (b *syncBuffer) lines(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			tb.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// testBundle is one edge under test with its fake core, logs and metrics registry.
type testBundle struct {
	fake *fakeCore
	srv  *httptest.Server
	logs *syncBuffer
	reg  *prometheus.Registry
}

// MustStartEdge serves an edge over fake on a loopback httptest server; edit mutates the config first.
func MustStartEdge(tb testing.TB, fake *fakeCore, edit func(*edge.Config)) *testBundle {
	tb.Helper()
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	cfg := edge.Config{
		Logger:     slog.New(slog.NewJSONHandler(logs, nil)),
		Registerer: reg,
		Gatherer:   reg,
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := edge.New(cfg, fake.core())
	if err != nil {
		tb.Fatalf("edge.New: %v", err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(srv.Close)
	return &testBundle{fake: fake, srv: srv, logs: logs, reg: reg}
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
	list   []any
}

func (b *testBundle) do(tb testing.TB, method, path, token string, body any, headers ...string) response {
	tb.Helper()
	var rdr io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rdr = strings.NewReader(v)
	default:
		buf, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		rdr = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rdr)
	if err != nil {
		tb.Fatal(err)
	}
	if rdr != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.srv.Client().Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	r := response{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	_ = json.Unmarshal(raw, &r.list)
	return r
}

// mustStatus fails unless r has the status.
func mustStatus(tb testing.TB, r response, status int) response {
	tb.Helper()
	if r.status != status {
		tb.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	return r
}

// mustError checks the SPEC §7 shape and returns the body; empty errWord or message are not checked.
func mustError(tb testing.TB, r response, status int, errWord, message string) map[string]any {
	tb.Helper()
	mustStatus(tb, r, status)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		tb.Errorf("content-type %q, want application/json", ct)
	}
	if got, _ := r.body["statusCode"].(float64); int(got) != status {
		tb.Errorf("statusCode %v, want %d: %s", r.body["statusCode"], status, r.raw)
	}
	if e, _ := r.body["error"].(string); e == "" || (errWord != "" && e != errWord) {
		tb.Errorf("error %q, want %q: %s", e, errWord, r.raw)
	}
	if m, _ := r.body["message"].(string); m == "" || (message != "" && m != message) {
		tb.Errorf("message %q, want %q: %s", m, message, r.raw)
	}
	return r.body
}

// detailPaths lists the paths of a validation body's details.
func detailPaths(tb testing.TB, body map[string]any) []string {
	tb.Helper()
	details, _ := body["details"].([]any)
	var out []string
	for _, d := range details {
		m, _ := d.(map[string]any)
		p, _ := m["path"].(string)
		if msg, _ := m["message"].(string); msg == "" {
			tb.Errorf("detail without message: %v", m)
		}
		out = append(out, p)
	}
	return out
}
