package e2e

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestSignupDerivesOrganizationAndConflicts(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("Alice.Smith@Example.COM", "")
	if !uuidRE.MatchString(a.userID) || !uuidRE.MatchString(a.orgID) || a.access == "" || a.refresh == "" {
		t.Fatalf("signup answer incomplete: %+v", a)
	}
	org := expect(t, e.get("/v1/organization", a.access), 200)
	if org.str("id") != a.orgID || org.str("name") != "alice.smith" || org.str("slug") != "alice-smith" {
		t.Errorf("derived organization: %s", org.raw)
	}
	if org.body["paused"] != false {
		t.Errorf("new organization paused: %s", org.raw)
	}
	if _, err := time.Parse(time.RFC3339, org.str("createdAt")); err != nil {
		t.Errorf("createdAt %q not RFC 3339", org.str("createdAt"))
	}
	plan, _ := org.body["plan"].(map[string]any)
	if plan["monthlyLimit"] != float64(3000) {
		t.Errorf("default plan: %s", org.raw)
	}

	// The same email (normalised) again: 409 naming the constraint, never echoing the address.
	r := e.do(req{method: "POST", path: "/v1/auth/signup", header: map[string]string{"X-Forwarded-For": nextClientIP()},
		body: map[string]any{"email": "alice.smith@example.com", "password": "another password", "organizationName": "Other"}})
	b := errorBody(t, r, 409, "", "Resource already exists")
	if b["constraint"] != "users_email_key" || strings.Contains(string(r.raw), "alice") {
		t.Errorf("duplicate email body: %s", r.raw)
	}
	// A new email whose organization slug is taken.
	r = e.do(req{method: "POST", path: "/v1/auth/signup", header: map[string]string{"X-Forwarded-For": nextClientIP()},
		body: map[string]any{"email": "bob@example.com", "password": "another password", "organizationName": "Alice Smith"}})
	if b := errorBody(t, r, 409, "", "Resource already exists"); b["constraint"] != "organizations_slug_key" {
		t.Errorf("duplicate slug body: %s", r.raw)
	}
	// Nothing of bob was written: he can sign up with a free name afterwards.
	e.MustSignup("bob@example.com", "Bob's Shop")
}

func TestSignupValidation(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	cases := []struct {
		name  string
		body  any
		paths []string
	}{
		{"bad email and short password", map[string]any{"email": "not-an-email", "password": "short"}, []string{"email", "password"}},
		{"missing fields", map[string]any{}, []string{"email", "password"}},
		{"long organization name", map[string]any{"email": "x@example.com", "password": "long enough", "organizationName": strings.Repeat("n", 121)}, []string{"organizationName"}},
		{"empty organization name", map[string]any{"email": "x@example.com", "password": "long enough", "organizationName": ""}, []string{"organizationName"}},
	}
	for _, c := range cases {
		r := e.do(req{method: "POST", path: "/v1/auth/signup", body: c.body, header: map[string]string{"X-Forwarded-For": nextClientIP()}})
		b := errorBody(t, r, 400, "Bad Request", "Validation failed")
		details, _ := b["details"].([]any)
		var paths []string
		for _, d := range details {
			m, _ := d.(map[string]any)
			paths = append(paths, m["path"].(string))
			if m["message"] == "" {
				t.Errorf("%s: detail without message: %s", c.name, r.raw)
			}
		}
		for _, p := range c.paths {
			if !slices.Contains(paths, p) {
				t.Errorf("%s: details %v lack path %q: %s", c.name, paths, p, r.raw)
			}
		}
	}
	r := e.do(req{method: "POST", path: "/v1/auth/signup", body: `{"email": "x@example.com",`, header: map[string]string{"X-Forwarded-For": nextClientIP()}})
	errorBody(t, r, 400, "", "")
}

func TestLoginRefreshRotationAndReuse(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("carol@example.com", "")

	errorBody(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": "wrong password"}), 401, "Unauthorized", "")
	errorBody(t, e.post("/v1/auth/login", "", map[string]any{"email": "nobody@example.com", "password": "wrong password"}), 401, "Unauthorized", "")
	r := expect(t, e.post("/v1/auth/login", "", map[string]any{"email": "CAROL@example.com", "password": a.password}), 200)
	access, refresh := r.str("accessToken"), r.str("refreshToken")
	expect(t, e.get("/v1/organization", access), 200)

	// A refresh token is not an access token.
	errorBody(t, e.get("/v1/organization", refresh), 401, "", "")

	r1 := expect(t, e.post("/v1/auth/refresh", "", map[string]any{"refreshToken": refresh}), 200)
	if r1.str("refreshToken") == refresh || r1.str("accessToken") == "" {
		t.Fatalf("refresh did not rotate: %s", r1.raw)
	}
	expect(t, e.get("/v1/organization", r1.str("accessToken")), 200)
	// Reusing the spent token fails and revokes the family: the token it was exchanged for dies too.
	errorBody(t, e.post("/v1/auth/refresh", "", map[string]any{"refreshToken": refresh}), 401, "", "")
	errorBody(t, e.post("/v1/auth/refresh", "", map[string]any{"refreshToken": r1.str("refreshToken")}), 401, "", "")
	// Another login is another family and still works.
	r2 := expect(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password}), 200)
	expect(t, e.post("/v1/auth/refresh", "", map[string]any{"refreshToken": r2.str("refreshToken")}), 200)
	errorBody(t, e.post("/v1/auth/refresh", "", map[string]any{"refreshToken": "rt_garbage"}), 401, "", "")
	errorBody(t, e.post("/v1/auth/refresh", "", map[string]any{}), 400, "", "Validation failed")
}

func TestLoginPicksOrganization(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("dave@example.com", "")
	other := e.MustSignup("erin@example.com", "")
	// orgId of an organization the user does not belong to is refused.
	errorBody(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password, "orgId": other.orgID}), 401, "", "")
	r := expect(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password, "orgId": a.orgID}), 200)
	if got := expect(t, e.get("/v1/organization", r.str("accessToken")), 200).str("id"); got != a.orgID {
		t.Errorf("token org %s, want %s", got, a.orgID)
	}
	errorBody(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password, "orgId": "nope"}), 400, "", "Validation failed")
}

func TestTwoFactor(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("frank@example.com", "")

	errorBody(t, e.post("/v1/auth/2fa/enroll", "", map[string]any{"password": a.password}), 401, "", "")
	// Enrolment asks for the password again.
	errorBody(t, e.post("/v1/auth/2fa/enroll", a.access, nil), 400, "", "")
	errorBody(t, e.post("/v1/auth/2fa/enroll", a.access, map[string]any{"password": "not the password"}), 401, "", "invalid password")
	r := expect(t, e.post("/v1/auth/2fa/enroll", a.access, map[string]any{"password": a.password}), 201)
	secret := r.str("secret")
	if secret == "" || !strings.HasPrefix(r.str("otpauthUrl"), "otpauth://totp/") || !strings.Contains(r.str("otpauthUrl"), "secret="+secret) {
		t.Fatalf("enroll answer: %s", r.raw)
	}
	// Enrolling does not yet require a code at login.
	expect(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password}), 200)

	errorBody(t, e.post("/v1/auth/2fa/verify", a.access, map[string]any{"code": wrongCode(t, secret)}), 400, "", "")
	errorBody(t, e.post("/v1/auth/2fa/verify", a.access, map[string]any{"code": "12ab56"}), 400, "", "Validation failed")
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v := expect(t, e.post("/v1/auth/2fa/verify", a.access, map[string]any{"code": code}), 200)
	if v.body["enabled"] != true {
		t.Fatalf("verify answer: %s", v.raw)
	}
	// Enabled: a second enrolment is refused, login needs a right code.
	errorBody(t, e.post("/v1/auth/2fa/enroll", a.access, map[string]any{"password": a.password}), 409, "", "")
	errorBody(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password}), 401, "", "")
	errorBody(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password, "totp": wrongCode(t, secret)}), 401, "", "")
	errorBody(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password, "totp": "12345"}), 400, "", "Validation failed")
	// The code accepted by verify is spent: replaying it (or any earlier step) is refused. The next step's
	// code is within the allowed skew and works once.
	errorBody(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password, "totp": code}), 401, "", "")
	next, _ := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	expect(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password, "totp": next}), 200)
	errorBody(t, e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password, "totp": next}), 401, "", "")
}

// wrongCode returns a 6-digit code that is not valid for secret in the window around now.
func wrongCode(tb testing.TB, secret string) string {
	tb.Helper()
	valid := map[string]bool{}
	for _, d := range []time.Duration{-60 * time.Second, -30 * time.Second, 0, 30 * time.Second, 60 * time.Second} {
		c, err := totp.GenerateCode(secret, time.Now().Add(d))
		if err != nil {
			tb.Fatal(err)
		}
		valid[c] = true
	}
	for _, c := range []string{"000000", "111111", "222222", "333333"} {
		if !valid[c] {
			return c
		}
	}
	tb.Fatal("no wrong code found")
	return ""
}

func TestSessionAndKeyTokensAreNotInterchangeable(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("grace@example.com", "")
	_, key := e.MustKey(a, []string{"*"})
	// A key on a Session route and a session token on a Key route are both 401.
	errorBody(t, e.get("/v1/api-keys", key), 401, "Unauthorized", "")
	errorBody(t, e.get("/v1/billing/subscription", a.access), 401, "Unauthorized", "")
	expect(t, e.get("/v1/billing/subscription", key), 200)
	// Only "Authorization: Bearer" is read.
	for _, r := range []req{
		{method: "GET", path: "/v1/api-keys?access_token=" + a.access},
		{method: "GET", path: "/v1/api-keys", header: map[string]string{"Authorization": "Token " + a.access}},
		{method: "GET", path: "/v1/api-keys", header: map[string]string{"Authorization": "Basic " + a.access}},
		{method: "GET", path: "/v1/api-keys", header: map[string]string{"Cookie": "session=" + a.access}},
		{method: "GET", path: "/v1/billing/subscription?key=" + key},
	} {
		errorBody(t, e.do(r), http.StatusUnauthorized, "Unauthorized", "")
	}
	// A tampered access token fails verification.
	errorBody(t, e.get("/v1/api-keys", a.access[:len(a.access)-2]+"xx"), 401, "", "")
}
