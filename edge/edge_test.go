package edge_test

import (
	"context"
	"errors"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

func TestErrorBodyOfEachCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		err     error
		status  int
		errWord string
		message string
		check   func(t *testing.T, r response)
	}{
		{name: "invalid_argument with a missing reference", err: ports.MissingReference("api_keys_org_fkey"),
			status: 400, errWord: "Bad Request", message: "Referenced resource does not exist",
			check: func(t *testing.T, r response) {
				if r.body["constraint"] != "api_keys_org_fkey" {
					t.Errorf("constraint: %s", r.raw)
				}
			}},
		{name: "invalid_argument with details", err: ports.ValidationError(ports.FieldViolation{Path: "scopes.1", Message: "unknown scope"}),
			status: 400, errWord: "Bad Request", message: "Validation failed",
			check: func(t *testing.T, r response) {
				if got := detailPaths(t, r.body); !slices.Equal(got, []string{"scopes.1"}) {
					t.Errorf("details %v: %s", got, r.raw)
				}
			}},
		{name: "unauthenticated", err: ports.Unauthenticated("token expired"), status: 401, errWord: "Unauthorized", message: "token expired"},
		{name: "payment_required with extra fields", err: &ports.Error{Code: ports.CodePaymentRequired, Reason: "plan_limit_exceeded",
			Message: "Plan limit reached for emails_sent", Fields: map[string]any{"metric": "emails_sent", "limit": 3000, "statusCode": 1}},
			status: 402, errWord: "plan_limit_exceeded", message: "Plan limit reached for emails_sent",
			check: func(t *testing.T, r response) {
				if r.body["metric"] != "emails_sent" || r.body["limit"] != float64(3000) {
					t.Errorf("extra fields not at top level: %s", r.raw)
				}
				// An extra field never overrides a fixed one (mustError checked statusCode == 402).
			}},
		{name: "permission_denied with reason", err: &ports.Error{Code: ports.CodePermissionDenied, Reason: "org_suspended", Message: "organization sending is paused"},
			status: 403, errWord: "org_suspended", message: "organization sending is paused"},
		{name: "permission_denied plain", err: ports.Errorf(ports.CodePermissionDenied, "nope"), status: 403, errWord: "Forbidden", message: "nope"},
		{name: "not_found", err: ports.NotFound("organization not found"), status: 404, errWord: "Not Found", message: "organization not found"},
		{name: "already_exists", err: ports.AlreadyExists("organizations_slug_key"), status: 409, errWord: "Conflict", message: "Resource already exists",
			check: func(t *testing.T, r response) {
				if r.body["constraint"] != "organizations_slug_key" {
					t.Errorf("constraint: %s", r.raw)
				}
			}},
		{name: "failed_precondition", err: ports.Errorf(ports.CodeFailedPrecondition, "already enabled"), status: 409, errWord: "Conflict", message: "already enabled"},
		{name: "resource_exhausted rate limit", err: ports.RateLimited(17), status: 429, errWord: "Too Many Requests", message: ports.MessageRateLimitExceeded,
			check: func(t *testing.T, r response) {
				if r.body["retryAfterSeconds"] != float64(17) {
					t.Errorf("retryAfterSeconds: %s", r.raw)
				}
			}},
		{name: "resource_exhausted warm-up", err: &ports.Error{Code: ports.CodeResourceExhausted, Reason: "warmup_cap_reached", Message: "warm-up daily send cap reached"},
			status: 429, errWord: "warmup_cap_reached", message: "warm-up daily send cap reached",
			check: func(t *testing.T, r response) {
				if _, ok := r.body["retryAfterSeconds"]; ok {
					t.Errorf("warm-up 429 carries retryAfterSeconds: %s", r.raw)
				}
			}},
		{name: "internal ports error", err: ports.Errorf(ports.CodeInternal, "pool exhausted at db-7.internal"), status: 500,
			errWord: "Internal Server Error", message: "Internal Server Error"},
		{name: "plain error", err: errors.New("pq: connection refused password=hunter2"), status: 500,
			errWord: "Internal Server Error", message: "Internal Server Error"},
		{name: "wrapped ports error keeps its code", err: errorsJoin(ports.NotFound("gone")), status: 404, errWord: "Not Found", message: "gone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := newFakeCore()
			fake.orgErr = c.err
			b := MustStartEdge(t, fake, nil)
			r := b.do(t, "GET", "/v1/organization", userToken, nil)
			mustError(t, r, c.status, c.errWord, c.message)
			if r.header.Get("Retry-After") != "" {
				t.Errorf("Retry-After header %q", r.header.Get("Retry-After"))
			}
			if c.check != nil {
				c.check(t, r)
			}
			if c.status == 500 {
				if len(r.body) != 3 {
					t.Errorf("500 body carries more than statusCode, error, message: %s", r.raw)
				}
				if strings.Contains(string(r.raw), "hunter2") || strings.Contains(string(r.raw), "db-7") {
					t.Errorf("500 leaks the cause: %s", r.raw)
				}
				// The real cause is logged with the request id.
				id := r.header.Get("X-Request-Id")
				found := false
				for _, l := range b.logs.lines(t) {
					if l["msg"] == "internal error" && l["request_id"] == id && strings.Contains(l["error"].(string), c.err.Error()) {
						found = true
					}
				}
				if !found {
					t.Errorf("no internal-error log line with request id %s: %s", id, b.logs.String())
				}
			}
		})
	}
}

func errorsJoin(err error) error { return errors.Join(errors.New("context"), err) }

func TestValidationFailuresAre400WithDotJoinedPaths(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	// A real huma schema failure inside an array: body.scopes[1] becomes scopes.1.
	r := b.do(t, "POST", "/v1/api-keys", userToken, map[string]any{"name": "", "scopes": []any{"emails:send", 7}})
	body := mustError(t, r, 400, "Bad Request", "Validation failed")
	paths := detailPaths(t, body)
	for _, want := range []string{"name", "scopes.1"} {
		if !slices.Contains(paths, want) {
			t.Errorf("details %v lack %q: %s", paths, want, r.raw)
		}
	}
	if b.fake.called("CreateAPIKey") != 0 {
		t.Error("core called despite an invalid body")
	}

	// Missing properties are reported at the property, not at the enclosing object.
	r = b.do(t, "POST", "/v1/auth/signup", "", map[string]any{})
	if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Contains(got, "email") || !slices.Contains(got, "password") {
		t.Errorf("missing-field paths %v: %s", got, r.raw)
	}
	r = b.do(t, "POST", "/v1/auth/signup", "", map[string]any{"email": "not-an-email", "password": "short", "organizationName": ""})
	got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed"))
	for _, want := range []string{"email", "password", "organizationName"} {
		if !slices.Contains(got, want) {
			t.Errorf("details %v lack %q", got, want)
		}
	}
	if strings.Contains(string(r.raw), "not-an-email") {
		t.Errorf("validation body echoes the value: %s", r.raw)
	}

	// Patterns of §4.1.
	r = b.do(t, "POST", "/v1/auth/login", "", map[string]any{"email": "a@example.com", "password": "long enough", "totp": "12345", "orgId": "nope"})
	got = detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed"))
	if !slices.Contains(got, "totp") || !slices.Contains(got, "orgId") {
		t.Errorf("login details %v", got)
	}
	mustError(t, b.do(t, "POST", "/v1/auth/2fa/verify", userToken, map[string]any{"code": "12ab56"}), 400, "", "Validation failed")

	// Path ids must be UUIDs; the parameter keeps its name.
	r = b.do(t, "DELETE", "/v1/api-keys/not-a-uuid", userToken, nil)
	if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Equal(got, []string{"id"}) {
		t.Errorf("path id details %v", got)
	}
	mustError(t, b.do(t, "POST", "/v1/admin/organizations/123/pause", adminToken, nil), 400, "", "Validation failed")
	if n := b.fake.called("SetPaused"); n != 0 {
		t.Errorf("SetPaused called %d times with a bad id", n)
	}

	// Limits are integers >= 0 or null.
	r = b.do(t, "PUT", "/v1/admin/organizations/"+otherOrg+"/limits", adminToken, map[string]any{"monthlyLimit": -1})
	if got := detailPaths(t, mustError(t, r, 400, "", "Validation failed")); !slices.Equal(got, []string{"monthlyLimit"}) {
		t.Errorf("limits details %v", got)
	}
}

func TestMalformedJSONIs400WithoutEcho(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	r := b.do(t, "POST", "/v1/auth/signup", "", `{"email":"a@example.com","password":"do-not-echo-me",`)
	mustError(t, r, 400, "Bad Request", "")
	if strings.Contains(string(r.raw), "do-not-echo-me") {
		t.Errorf("malformed body echoed: %s", r.raw)
	}
	if b.fake.called("Signup") != 0 {
		t.Error("core called with a malformed body")
	}
}

func TestOversizedBodyIs413(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), func(c *edge.Config) { c.MaxBodyBytes = 128 })
	big := `{"email":"a@example.com","password":"` + strings.Repeat("p", 200) + `"}`
	mustError(t, b.do(t, "POST", "/v1/auth/signup", "", big), 413, "Request Entity Too Large", "")
	if b.fake.called("Signup") != 0 {
		t.Error("core called with an oversized body")
	}
	// Exactly the limit is accepted.
	exact := `{"email":"a@example.com","password":"long enough"}`
	exact += strings.Repeat(" ", 128-len(exact))
	mustStatus(t, b.do(t, "POST", "/v1/auth/signup", "", exact), 201)
}

func TestUnknownRouteIs404InErrorShape(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	mustError(t, b.do(t, "GET", "/v1/nope", "", nil), 404, "Not Found", "Cannot GET /v1/nope")
	// A known path with another method is not a 405 page from the mux.
	mustError(t, b.do(t, "DELETE", "/v1/auth/signup", "", nil), 404, "Not Found", "Cannot DELETE /v1/auth/signup")
}

func TestOnlyBearerHeaderAuthenticates(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	for _, route := range []struct{ path, token string }{
		{"/v1/organization", userToken},
		{"/v1/billing/subscription", billingKey},
	} {
		mustStatus(t, b.do(t, "GET", route.path, route.token, nil), 200)
		for name, headers := range map[string][]string{
			"none":          nil,
			"query token":   nil,
			"basic auth":    {"Authorization", "Basic " + route.token},
			"cookie":        {"Cookie", "session=" + route.token + "; access_token=" + route.token + "; token=" + route.token},
			"other scheme":  {"Authorization", "Token " + route.token},
			"empty bearer":  {"Authorization", "Bearer "},
			"bearer no gap": {"Authorization", "Bearer" + route.token},
		} {
			path := route.path
			if name == "query token" {
				path += "?access_token=" + route.token + "&token=" + route.token + "&key=" + route.token
			}
			r := b.do(t, "GET", path, "", nil, headers...)
			if r.status != 401 {
				t.Errorf("%s on %s: status %d: %s", name, route.path, r.status, r.raw)
				continue
			}
			mustError(t, r, 401, "Unauthorized", "")
		}
	}
}

func TestCredentialKindsAreNotInterchangeable(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	// A session JWT on a Key route never reaches key lookup.
	mustError(t, b.do(t, "GET", "/v1/billing/subscription", userToken, nil), 401, "Unauthorized", "")
	if n := b.fake.called("AuthenticateAPIKey"); n != 0 {
		t.Errorf("AuthenticateAPIKey called %d times for a JWT", n)
	}
	// An API key on a Session route never reaches session verification.
	mustError(t, b.do(t, "GET", "/v1/api-keys", starKey, nil), 401, "Unauthorized", "")
	mustError(t, b.do(t, "GET", "/v1/admin/organizations", starKey, nil), 401, "Unauthorized", "")
	if n := b.fake.called("AuthenticateSession"); n != 0 {
		t.Errorf("AuthenticateSession called %d times for an API key", n)
	}
	// Something that is neither is refused before the core, too.
	mustError(t, b.do(t, "GET", "/v1/api-keys", "garbage", nil), 401, "", "")
	if n := b.fake.called("AuthenticateSession"); n != 0 {
		t.Errorf("AuthenticateSession called %d times for garbage", n)
	}
}

func TestScopesAnyOneSuffices(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	r := b.do(t, "GET", "/v1/billing/subscription", sendKey, nil)
	body := mustError(t, r, 403, "insufficient_scope", "")
	if got, _ := body["requiredScopes"].([]any); len(got) != 1 || got[0] != ports.ScopeBillingRead {
		t.Errorf("requiredScopes: %s", r.raw)
	}
	for _, key := range []string{billingKey, starKey, unenforcedKy} {
		mustStatus(t, b.do(t, "GET", "/v1/billing/subscription", key, nil), 200)
	}
	mustError(t, b.do(t, "GET", "/v1/billing/subscription", "svc_live_unknown.key", nil), 401, "Unauthorized", "")
}

func TestAdminIs401Or403(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	mustError(t, b.do(t, "GET", "/v1/admin/organizations", "", nil), 401, "Unauthorized", "")
	mustError(t, b.do(t, "GET", "/v1/admin/organizations", bogusJWT, nil), 401, "Unauthorized", "")
	mustError(t, b.do(t, "GET", "/v1/admin/organizations", userToken, nil), 403, "Forbidden", "")
	mustError(t, b.do(t, "POST", "/v1/admin/organizations/"+otherOrg+"/pause", userToken, nil), 403, "Forbidden", "")
	if n := b.fake.called("SetPaused"); n != 0 {
		t.Errorf("non-admin reached SetPaused %d times", n)
	}
	r := mustStatus(t, b.do(t, "GET", "/v1/admin/organizations", adminToken, nil), 200)
	if len(r.list) != 1 {
		t.Errorf("admin list: %s", r.raw)
	}
	// The admin targets the organization in the path (canonicalised), not their own.
	r = mustStatus(t, b.do(t, "POST", "/v1/admin/organizations/{"+strings.ToUpper(otherOrg)+"}/pause", adminToken, nil), 200)
	if r.body["paused"] != true || r.body["id"] != otherOrg || b.fake.lastOrgID() != otherOrg {
		t.Errorf("pause: %s (core got %s)", r.raw, b.fake.lastOrgID())
	}
	r = mustStatus(t, b.do(t, "POST", "/v1/admin/organizations/"+otherOrg+"/resume", adminToken, nil), 200)
	if r.body["paused"] != false {
		t.Errorf("resume: %s", r.raw)
	}
}

func TestAdminRoutesRequireTwoFactor(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	for _, route := range []struct{ method, path string }{
		{"GET", "/v1/admin/organizations"},
		{"POST", "/v1/admin/organizations/" + otherOrg + "/pause"},
		{"GET", "/v1/admin/suppressions"},
	} {
		body := mustError(t, b.do(t, route.method, route.path, admin1FAToken, nil), 403, "Forbidden",
			"Platform admin routes require two-factor authentication: enable it for this account with POST /v1/auth/2fa/enroll and /v1/auth/2fa/verify")
		if body["statusCode"] != float64(403) {
			t.Errorf("%s %s: %v", route.method, route.path, body)
		}
	}
	if n := b.fake.called("SetPaused") + b.fake.called("ListOrganizations"); n != 0 {
		t.Errorf("an admin without 2FA reached the core %d times", n)
	}
	// The admin's non-admin routes work as before, and turning the requirement off admits them.
	mustStatus(t, b.do(t, "GET", "/v1/organization", admin1FAToken, nil), 200)
	off := MustStartEdge(t, newFakeCore(), func(c *edge.Config) { c.AdminWithout2FA = true })
	mustStatus(t, off.do(t, "GET", "/v1/admin/organizations", admin1FAToken, nil), 200)
	mustError(t, off.do(t, "GET", "/v1/admin/organizations", userToken, nil), 403, "Forbidden", "Platform admin required")
}

func TestOrganizationIDComesOnlyFromThePrincipal(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	r := b.do(t, "POST", "/v1/api-keys?organizationId="+otherOrg+"&orgId="+otherOrg, userToken,
		map[string]any{"name": "ci", "organizationId": otherOrg, "orgId": otherOrg, "organization_id": otherOrg})
	mustStatus(t, r, 201)
	if got := b.fake.lastOrgID(); got != userOrg {
		t.Errorf("CreateAPIKey got organization %s, want the principal's %s", got, userOrg)
	}
	mustStatus(t, b.do(t, "GET", "/v1/organization?organizationId="+otherOrg, userToken, nil), 200)
	if got := b.fake.lastOrgID(); got != userOrg {
		t.Errorf("GetOrganization got %s", got)
	}
	mustStatus(t, b.do(t, "POST", "/v1/smtp-credentials", userToken, map[string]any{"name": "ignored", "organizationId": otherOrg}), 201)
	if got := b.fake.lastOrgID(); got != userOrg {
		t.Errorf("CreateSMTPCredential got %s", got)
	}
	mustStatus(t, b.do(t, "GET", "/v1/billing/subscription?organizationId="+otherOrg, billingKey, nil), 200)
	if got := b.fake.lastOrgID(); got != userOrg {
		t.Errorf("Subscription got %s", got)
	}
}

func TestRateLimitsByClientIP(t *testing.T) {
	t.Parallel()
	xff := "X-Forwarded-For"

	direct := MustStartEdge(t, newFakeCore(), nil)
	mustStatus(t, direct.do(t, "POST", "/v1/auth/signup", "", map[string]any{"email": "a@example.com", "password": "long enough"}, xff, "203.0.113.9"), 201)
	mustStatus(t, direct.do(t, "POST", "/v1/auth/login", "", map[string]any{"email": "a@example.com", "password": "long enough"}), 200)
	if got := direct.fake.limiterKeysSnapshot(); !slices.Equal(got, []string{"signup:127.0.0.1|1h0m0s", "login:127.0.0.1|1m0s"}) {
		t.Errorf("untrusted peer: limiter keys %v", got)
	}

	proxied := MustStartEdge(t, newFakeCore(), func(c *edge.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}
	})
	for _, c := range []struct{ header, want string }{
		{"203.0.113.9", "203.0.113.9"},
		// The client can prepend anything; the right-most untrusted entry wins.
		{"198.51.100.1, 203.0.113.9, 10.1.2.3", "203.0.113.9"},
		// IPv6 clients count by /64: one subscriber routinely holds a whole /64.
		{"[2001:db8::1]:4711, 10.0.0.1", "2001:db8::/64"},
		{"2001:db8:0:0:ffff:1:2:3", "2001:db8::/64"},
		{"2001:db8:0:1::1", "2001:db8:0:1::/64"},
		// An IPv4-mapped address is the IPv4 client.
		{"::ffff:203.0.113.7", "203.0.113.7"},
		// Only trusted hops: the farthest one is the client.
		{"10.9.9.9, 10.1.1.1", "10.9.9.9"},
		// Garbage stops the walk at the nearest trusted hop.
		{"203.0.113.9, garbage, 10.1.1.1", "10.1.1.1"},
	} {
		before := len(proxied.fake.limiterKeysSnapshot())
		mustStatus(t, proxied.do(t, "POST", "/v1/auth/signup", "", map[string]any{"email": "a@example.com", "password": "long enough"}, xff, c.header), 201)
		keys := proxied.fake.limiterKeysSnapshot()
		if len(keys) != before+1 || keys[before] != "signup:"+c.want+"|1h0m0s" {
			t.Errorf("X-Forwarded-For %q: limiter keys %v, want signup:%s", c.header, keys[before:], c.want)
		}
	}
	// No header: the trusted peer itself.
	mustStatus(t, proxied.do(t, "POST", "/v1/auth/signup", "", map[string]any{"email": "a@example.com", "password": "long enough"}), 201)
	if keys := proxied.fake.limiterKeysSnapshot(); keys[len(keys)-1] != "signup:127.0.0.1|1h0m0s" {
		t.Errorf("no X-Forwarded-For: %v", keys[len(keys)-1])
	}
}

func TestRateLimitedIs429WithRetryAfterSecondsOnly(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.deny = 41*time.Second + 300*time.Millisecond
	b := MustStartEdge(t, fake, nil)
	for _, path := range []string{"/v1/auth/signup", "/v1/auth/login"} {
		r := b.do(t, "POST", path, "", map[string]any{"email": "a@example.com", "password": "long enough"})
		body := mustError(t, r, 429, "Too Many Requests", "Rate limit exceeded. Try again later.")
		if body["retryAfterSeconds"] != float64(42) {
			t.Errorf("%s retryAfterSeconds %v", path, body["retryAfterSeconds"])
		}
		if r.header.Get("Retry-After") != "" {
			t.Errorf("%s sets Retry-After", path)
		}
	}
	if fake.called("Signup")+fake.called("Login") != 0 {
		t.Error("core reached despite the rate limit")
	}
	// Refresh is not limited.
	mustStatus(t, b.do(t, "POST", "/v1/auth/refresh", "", map[string]any{"refreshToken": "r"}), 200)
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestRequestID(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	if got := b.do(t, "GET", "/healthz", "", nil, "X-Request-Id", "trace-me-123").header.Get("X-Request-Id"); got != "trace-me-123" {
		t.Errorf("sane id not echoed: %q", got)
	}
	for _, bad := range []string{"", "has space", strings.Repeat("x", 129), "semi;colon"} {
		got := b.do(t, "GET", "/v1/nope", "", nil, "X-Request-Id", bad).header.Get("X-Request-Id")
		if !uuidRE.MatchString(got) {
			t.Errorf("for incoming %q got %q, want a generated uuid", bad, got)
		}
	}
	// Every line of a request carries its id, including the access log.
	id := b.do(t, "GET", "/v1/organization", userToken, nil, "X-Request-Id", "req-42").header.Get("X-Request-Id")
	var access map[string]any
	for _, l := range b.logs.lines(t) {
		if l["request_id"] == id && l["msg"] == "request" {
			access = l
		}
	}
	if access == nil || access["route"] != "/v1/organization" || access["method"] != "GET" || access["status"] != float64(200) {
		t.Errorf("access log line for %s: %v", id, access)
	}
	if _, ok := access["duration_ms"]; !ok {
		t.Errorf("access log without duration: %v", access)
	}
}

func TestAccessLogNeverHoldsSecrets(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	mustStatus(t, b.do(t, "POST", "/v1/auth/signup", "", map[string]any{"email": "secret-user@example.com", "password": "correct horse battery"}), 201)
	mustStatus(t, b.do(t, "POST", "/v1/auth/refresh", "", map[string]any{"refreshToken": "rt-very-secret"}), 200)
	mustStatus(t, b.do(t, "GET", "/v1/billing/subscription", starKey, nil), 200)
	mustStatus(t, b.do(t, "DELETE", "/v1/api-keys/"+keyID, userToken, nil), 200)
	logs := b.logs.String()
	for _, secret := range []string{"correct horse", "rt-very-secret", starKey, userToken, "secret-user", keyID} {
		if strings.Contains(logs, secret) {
			t.Errorf("log holds %q: %s", secret, logs)
		}
	}
	if !strings.Contains(logs, `"route":"/v1/api-keys/{id}"`) {
		t.Errorf("log lacks the route pattern: %s", logs)
	}
}

func TestMetricsUseTheRoutePattern(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	mustStatus(t, b.do(t, "DELETE", "/v1/api-keys/"+keyID, userToken, nil), 200)
	mustStatus(t, b.do(t, "DELETE", "/v1/api-keys/0190a0b0-0000-7000-8000-000000000002", userToken, nil), 200)
	mustError(t, b.do(t, "GET", "/v1/organization", "", nil), 401, "", "")
	mustError(t, b.do(t, "GET", "/v1/nope/"+keyID, "", nil), 404, "", "")
	mustError(t, b.do(t, "BREW", "/v1/organization", "", nil), 404, "", "")

	text := b.metrics(t) // the registry the composition root serves on its own listener
	for _, want := range []string{
		`postmill_http_requests_total{method="DELETE",route="/v1/api-keys/{id}",status="200"} 2`,
		`postmill_http_requests_total{method="GET",route="/v1/organization",status="401"} 1`,
		`postmill_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`postmill_http_requests_total{method="_OTHER",route="unmatched",status="404"} 1`,
		`postmill_http_request_duration_seconds_count{method="DELETE",route="/v1/api-keys/{id}"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(text, keyID) {
		t.Error("a raw path reached a metric label")
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	up := MustStartEdge(t, newFakeCore(), nil)
	mustStatus(t, up.do(t, "GET", "/healthz", "", nil), 200)
	mustStatus(t, up.do(t, "GET", "/readyz", "", nil), 200)

	down := MustStartEdge(t, newFakeCore(), func(c *edge.Config) {
		c.Ready = func(context.Context) error {
			return errors.New("database at 10.0.0.5 refused")
		}
	})
	mustStatus(t, down.do(t, "GET", "/healthz", "", nil), 200)
	r := down.do(t, "GET", "/readyz", "", nil)
	mustError(t, r, 503, "Service Unavailable", "")
	if strings.Contains(string(r.raw), "10.0.0.5") {
		t.Errorf("readiness leaks the cause: %s", r.raw)
	}
}

func TestPanicsAndDependencyFailuresAre500WithoutDetail(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.panics = true
	fake.limErr = errors.New("rate store unreachable at 10.0.0.7")
	b := MustStartEdge(t, fake, nil)

	r := b.do(t, "GET", "/v1/organization", userToken, nil)
	body := mustError(t, r, 500, "Internal Server Error", "Internal Server Error")
	if len(body) != 3 || strings.Contains(string(r.raw), "boom") {
		t.Errorf("panic body: %s", r.raw)
	}
	r = b.do(t, "POST", "/v1/auth/login", "", map[string]any{"email": "a@example.com", "password": "long enough"})
	if mustError(t, r, 500, "", "Internal Server Error"); strings.Contains(string(r.raw), "10.0.0.7") {
		t.Errorf("limiter failure leaks: %s", r.raw)
	}
	if fake.called("Login") != 0 {
		t.Error("login proceeded although the limiter failed")
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "panic serving request") || !strings.Contains(logs, "rate store unreachable") {
		t.Errorf("causes not logged: %s", logs)
	}
	// The server keeps serving after a panic.
	mustStatus(t, b.do(t, "GET", "/healthz", "", nil), 200)
}
