package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/deploy/app"
)

const msgAdmin2FA = "Platform admin routes require two-factor authentication: enable it for this account with " +
	"POST /v1/auth/2fa/enroll and /v1/auth/2fa/verify"

// TestAdminRoutesRequireTwoFactor: POSTMILL_ADMIN_EMAILS bootstraps only the first admin, and by default
// that admin reaches /v1/admin/* only once their account has 2FA.
func TestAdminRoutesRequireTwoFactor(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, pgtest.URL(t))
	cfg.AdminEmails = []string{"root@admin.example", "ops@admin.example"}
	cfg.AdminRequire2FA = true
	e := MustStart(t, cfg, "all")

	root := e.MustSignup("root@admin.example", "")
	// A second listed address signing up later is not made an admin: nothing proves they own it.
	ops := e.MustSignup("ops@admin.example", "")
	errorBody(t, e.get("/v1/admin/organizations", ops.access), 403, "Forbidden", "Platform admin required")

	errorBody(t, e.get("/v1/admin/organizations", root.access), 403, "Forbidden", msgAdmin2FA)
	errorBody(t, e.post("/v1/admin/organizations/"+ops.orgID+"/pause", root.access, nil), 403, "Forbidden", msgAdmin2FA)
	// The admin's own session routes are not affected.
	expect(t, e.get("/v1/organization", root.access), 200)

	r := expect(t, e.post("/v1/auth/2fa/enroll", root.access, map[string]any{"password": root.password}), 201)
	code, err := totp.GenerateCode(r.str("secret"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	expect(t, e.post("/v1/auth/2fa/verify", root.access, map[string]any{"code": code}), 200)
	if list := expect(t, e.get("/v1/admin/organizations", root.access), 200).list; len(list) != 2 {
		t.Fatalf("admin list has %d organizations, want 2", len(list))
	}
}

func TestAuthLogoutRevokesTheLogin(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("gina@example.com", "")
	next := expect(t, e.post("/v1/auth/refresh", "", map[string]any{"refreshToken": a.refresh}), 200)
	other := expect(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password}), 200)

	// Logging out with the first (spent) token of the login ends the whole login.
	r := expect(t, e.post("/v1/auth/logout", "", map[string]any{"refreshToken": a.refresh}), 200)
	if r.body["revoked"] != true || len(r.body) != 1 {
		t.Fatalf("logout answer: %s", r.raw)
	}
	errorBody(t, e.post("/v1/auth/refresh", "", map[string]any{"refreshToken": next.str("refreshToken")}), 401, "", "invalid or expired refresh token")
	expect(t, e.post("/v1/auth/logout", "", map[string]any{"refreshToken": next.str("refreshToken")}), 200)
	// Another login of the same user is untouched.
	expect(t, e.post("/v1/auth/refresh", "", map[string]any{"refreshToken": other.str("refreshToken")}), 200)

	errorBody(t, e.post("/v1/auth/logout", "", map[string]any{"refreshToken": "rt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}), 401, "", "")
	errorBody(t, e.post("/v1/auth/logout", "", map[string]any{}), 400, "", "Validation failed")
}

func TestLoginThrottledPerAccount(t *testing.T) {
	t.Parallel()
	clearOfWindowEdge(t, 15*time.Minute, time.Minute)
	e := MustStartAll(t)
	a := e.MustSignup("hank@example.com", "")
	login := func(email, password string) resp {
		// A new client address each time: only the per-account limit can stop these.
		return e.do(req{method: "POST", path: "/v1/auth/login", header: map[string]string{"X-Forwarded-For": nextClientIP()},
			body: map[string]any{"email": email, "password": password}})
	}
	for range 20 {
		expect(t, login(a.email, "wrong password"), 401)
	}
	b := errorBody(t, login(a.email, a.password), 429, "Too Many Requests", "Rate limit exceeded. Try again later.")
	if s, _ := b["retryAfterSeconds"].(float64); s < 1 || s > 15*60 {
		t.Errorf("retryAfterSeconds %v", b["retryAfterSeconds"])
	}
	// Other accounts log in as usual.
	other := e.MustSignup("ivy@example.com", "")
	expect(t, login(other.email, other.password), 200)
}

// TestAuthSurvivesKeyRotation restarts the platform on one database with POSTMILL_SECRET_KEY=new,old: the
// session and refresh token of a login made under the old key keep working, and the 2FA seed sealed under
// it still opens.
func TestAuthSurvivesKeyRotation(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	oldKey, newKey := []byte(randomHex(t, 32)), []byte(randomHex(t, 32))

	cfg := testConfig(t, dbURL)
	cfg.SecretKeys = [][]byte{oldKey}
	before := mustStartStoppable(t, cfg)
	a := before.MustSignup("jill@example.com", "")
	r := expect(t, before.post("/v1/auth/2fa/enroll", a.access, map[string]any{"password": a.password}), 201)
	secret := r.str("secret")
	code, _ := totp.GenerateCode(secret, time.Now())
	expect(t, before.post("/v1/auth/2fa/verify", a.access, map[string]any{"code": code}), 200)
	before.stop()

	cfg = testConfig(t, dbURL)
	cfg.SecretKeys = [][]byte{newKey, oldKey}
	after := mustStartStoppable(t, cfg)
	defer after.stop()
	expect(t, after.get("/v1/organization", a.access), 200)
	pair := expect(t, after.post("/v1/auth/refresh", "", map[string]any{"refreshToken": a.refresh}), 200)
	expect(t, after.get("/v1/organization", pair.str("accessToken")), 200)
	next, _ := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	expect(t, after.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password, "totp": next}), 200)
}

// stoppable is an env the test stops itself, to start another platform on the same database after it.
type stoppable struct {
	*env
	stop func()
}

func mustStartStoppable(tb testing.TB, cfg app.Config) stoppable {
	tb.Helper()
	ts, err := app.ParseTargets("all")
	if err != nil {
		tb.Fatal(err)
	}
	a, err := app.New(cfg, ts, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatalf("app.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		tb.Fatalf("app.Start: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			tb.Errorf("stopping: %v", err)
		}
	}
	tb.Cleanup(stop)
	return stoppable{env: &env{t: tb, app: a, base: a.HTTPURL(), http: &http.Client{Timeout: 30 * time.Second}}, stop: stop}
}
