package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var keyTokenRE = regexp.MustCompile(`^svc_live_([0-9a-f]{16})\.[A-Za-z0-9_-]{32}$`)

func TestAPIKeysLifecycleAndScopes(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("heidi@example.com", "")

	// Default scopes, the token format, the prefix.
	r := expect(t, e.post("/v1/api-keys", a.access, map[string]any{"name": "default"}), 201)
	m := keyTokenRE.FindStringSubmatch(r.str("token"))
	if m == nil || r.str("prefix") != m[1] {
		t.Fatalf("token %q prefix %q", r.str("token"), r.str("prefix"))
	}
	if scopes, _ := r.body["scopes"].([]any); len(scopes) != 1 || scopes[0] != "emails:send" || r.body["scopesEnforced"] != true {
		t.Errorf("default scopes: %s", r.raw)
	}
	if r.body["lastUsedAt"] != nil || r.body["revokedAt"] != nil || !uuidRE.MatchString(r.str("id")) {
		t.Errorf("new key fields: %s", r.raw)
	}
	defaultKey := r.str("token")

	billingID, billingKey := e.MustKey(a, []string{"billing:read", "billing:read"})
	// A key without the route's scope: 403 naming what would do.
	f := errorBody(t, e.get("/v1/billing/subscription", defaultKey), 403, "insufficient_scope", "")
	if req, _ := f["requiredScopes"].([]any); len(req) != 1 || req[0] != "billing:read" {
		t.Errorf("requiredScopes: %v", f["requiredScopes"])
	}
	sub := expect(t, e.get("/v1/billing/subscription", billingKey), 200)
	if usage, _ := sub.body["usage"].(map[string]any); usage["emailsSent"] != float64(0) {
		t.Errorf("subscription: %s", sub.raw)
	}
	start, err1 := time.Parse(time.RFC3339, sub.str("periodStart"))
	end, err2 := time.Parse(time.RFC3339, sub.str("periodEnd"))
	if err1 != nil || err2 != nil || !end.After(start) || start.Day() != 1 {
		t.Errorf("subscription period: %s", sub.raw)
	}
	_, starKey := e.MustKey(a, []string{"*"})
	expect(t, e.get("/v1/billing/subscription", starKey), 200)

	// Scopes outside the vocabulary and bad names are 400 with the offending path.
	bad := errorBody(t, e.post("/v1/api-keys", a.access, map[string]any{"name": "x", "scopes": []string{"emails:send", "emails:write"}}), 400, "", "Validation failed")
	if d, _ := bad["details"].([]any); len(d) == 0 || d[0].(map[string]any)["path"] != "scopes.1" {
		t.Errorf("bad scope details: %v", bad["details"])
	}
	errorBody(t, e.post("/v1/api-keys", a.access, map[string]any{"name": ""}), 400, "", "Validation failed")
	errorBody(t, e.post("/v1/api-keys", a.access, map[string]any{"name": strings.Repeat("k", 101)}), 400, "", "Validation failed")
	expect(t, e.post("/v1/api-keys", a.access, map[string]any{"name": strings.Repeat("k", 100)}), 201)

	// Listing: newest first, no token or hash anywhere.
	l := expect(t, e.get("/v1/api-keys", a.access), 200)
	if len(l.list) != 4 {
		t.Fatalf("listed %d keys, want 4: %s", len(l.list), l.raw)
	}
	var created []time.Time
	for _, item := range l.list {
		k := item.(map[string]any)
		if _, ok := k["token"]; ok {
			t.Errorf("listing shows a token: %s", l.raw)
		}
		ts, _ := time.Parse(time.RFC3339Nano, k["createdAt"].(string))
		created = append(created, ts)
	}
	if !slices.IsSortedFunc(created, func(x, y time.Time) int { return y.Compare(x) }) {
		t.Errorf("keys not newest first: %v", created)
	}
	if strings.Contains(string(l.raw), defaultKey[len("svc_live_")+17:]) || strings.Contains(strings.ToLower(string(l.raw)), "hash") {
		t.Errorf("listing leaks secret material: %s", l.raw)
	}

	// lastUsedAt is recorded off the request path: poll for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var used any
		for _, item := range expect(t, e.get("/v1/api-keys", a.access), 200).list {
			if k := item.(map[string]any); k["id"] == billingID {
				used = k["lastUsedAt"]
			}
		}
		if used != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lastUsedAt never recorded")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Revocation is immediate.
	rv := expect(t, e.del("/v1/api-keys/"+billingID, a.access), 200)
	if rv.body["revoked"] != true {
		t.Errorf("revoke answer: %s", rv.raw)
	}
	errorBody(t, e.get("/v1/billing/subscription", billingKey), 401, "Unauthorized", "")
	errorBody(t, e.del("/v1/api-keys/not-a-uuid", a.access), 400, "", "Validation failed")
	errorBody(t, e.del("/v1/api-keys/0190a0b0-0000-7000-8000-000000000000", a.access), 404, "Not Found", "")

	// Malformed and unknown keys are 401.
	for _, tok := range []string{"svc_live_", "svc_live_0123456789abcdef.short", "svc_live_0123456789abcdef." + strings.Repeat("A", 32), defaultKey + "x"} {
		errorBody(t, e.get("/v1/billing/subscription", tok), 401, "", "")
	}
}

func TestSMTPCredentials(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("ivan@example.com", "")
	r := expect(t, e.post("/v1/smtp-credentials", a.access, map[string]any{"name": "ignored"}), 201)
	if r.str("username") == "" || r.str("username") == "ignored" || len(r.str("password")) < 24 || r.str("host") == "" || r.body["port"] != float64(1587) {
		t.Fatalf("create answer: %s", r.raw)
	}
	password := r.str("password")
	expect(t, e.post("/v1/smtp-credentials", a.access, nil), 201)
	l := expect(t, e.get("/v1/smtp-credentials", a.access), 200)
	if len(l.list) != 2 || strings.Contains(string(l.raw), password) {
		t.Fatalf("listing: %s", l.raw)
	}
	for _, item := range l.list {
		c := item.(map[string]any)
		if _, ok := c["password"]; ok || c["host"] == "" || c["port"] != float64(1587) {
			t.Errorf("listed credential: %v", c)
		}
	}
	if l.list[0].(map[string]any)["id"] == r.str("id") {
		t.Errorf("credentials not newest first")
	}
	d := expect(t, e.del("/v1/smtp-credentials/"+r.str("id"), a.access), 200)
	if d.body["deleted"] != true {
		t.Errorf("delete answer: %s", d.raw)
	}
	errorBody(t, e.del("/v1/smtp-credentials/"+r.str("id"), a.access), 404, "", "")
	if n := len(expect(t, e.get("/v1/smtp-credentials", a.access), 200).list); n != 1 {
		t.Errorf("%d credentials after delete, want 1", n)
	}
}

// TestCrossOrganization proves tenancy for every resource that exists so far: keys, SMTP credentials, the
// organization and the billing subscription.
func TestCrossOrganization(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("judy@example.com", "")
	b := e.MustSignup("mallory@example.com", "")

	keyA, tokenA := e.MustKey(a, []string{"billing:read"})
	credA := expect(t, e.post("/v1/smtp-credentials", a.access, nil), 201).str("id")
	_, tokenB := e.MustKey(b, []string{"billing:read"})

	if l := expect(t, e.get("/v1/api-keys", b.access), 200); len(l.list) != 1 || strings.Contains(string(l.raw), keyA) {
		t.Errorf("B sees A's keys: %s", l.raw)
	}
	if l := expect(t, e.get("/v1/smtp-credentials", b.access), 200); len(l.list) != 0 {
		t.Errorf("B sees A's SMTP credentials: %s", l.raw)
	}
	errorBody(t, e.del("/v1/api-keys/"+keyA, b.access), 404, "", "")
	errorBody(t, e.del("/v1/smtp-credentials/"+credA, b.access), 404, "", "")
	// A's key and credential survived B's attempts.
	expect(t, e.get("/v1/billing/subscription", tokenA), 200)
	if l := expect(t, e.get("/v1/smtp-credentials", a.access), 200); len(l.list) != 1 {
		t.Errorf("A's credential gone: %s", l.raw)
	}
	// Each credential sees its own organization, whatever a body or query says.
	if got := expect(t, e.get("/v1/organization?organizationId="+a.orgID, b.access), 200).str("id"); got != b.orgID {
		t.Errorf("B's session sees organization %s", got)
	}
	expect(t, e.do(req{method: "GET", path: "/v1/billing/subscription?organizationId=" + a.orgID, token: tokenB}), 200)
	// An admin action on A is not visible as B's state.
	root := e.MustSignup("root@admin.example", "")
	expect(t, e.post("/v1/admin/organizations/"+a.orgID+"/pause", root.access, nil), 200)
	if expect(t, e.get("/v1/organization", b.access), 200).body["paused"] != false {
		t.Error("pausing A paused B")
	}
}

func TestOrganizationAdmin(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	user := e.MustSignup("kate@example.com", "")
	root := e.MustSignup("ROOT@admin.example", "Platform")

	// 401 without a valid token, 403 for a valid non-admin.
	errorBody(t, e.get("/v1/admin/organizations", ""), 401, "", "")
	errorBody(t, e.get("/v1/admin/organizations", "garbage"), 401, "", "")
	errorBody(t, e.get("/v1/admin/organizations", user.access), 403, "Forbidden", "")
	errorBody(t, e.post("/v1/admin/organizations/"+user.orgID+"/pause", user.access, nil), 403, "", "")
	_, key := e.MustKey(root, []string{"*"})
	errorBody(t, e.get("/v1/admin/organizations", key), 401, "", "")

	l := expect(t, e.get("/v1/admin/organizations", root.access), 200)
	if len(l.list) != 2 {
		t.Fatalf("admin lists %d organizations: %s", len(l.list), l.raw)
	}
	p := expect(t, e.post("/v1/admin/organizations/"+user.orgID+"/pause", root.access, nil), 200)
	if p.body["paused"] != true || p.str("id") != user.orgID {
		t.Errorf("pause answer: %s", p.raw)
	}
	if expect(t, e.get("/v1/organization", user.access), 200).body["paused"] != true {
		t.Error("pause not stored")
	}
	if expect(t, e.post("/v1/admin/organizations/"+user.orgID+"/resume", root.access, nil), 200).body["paused"] != false {
		t.Error("resume did not resume")
	}
	lim := expect(t, e.do(req{method: "PUT", path: "/v1/admin/organizations/" + user.orgID + "/limits", token: root.access,
		body: map[string]any{"monthlyLimit": 50000, "warmupCap": 200}}), 200)
	if plan, _ := lim.body["plan"].(map[string]any); plan["monthlyLimit"] != float64(50000) || plan["warmupCap"] != float64(200) {
		t.Errorf("limits answer: %s", lim.raw)
	}
	org := expect(t, e.get("/v1/organization", user.access), 200)
	if plan, _ := org.body["plan"].(map[string]any); plan["monthlyLimit"] != float64(50000) {
		t.Errorf("limits not stored: %s", org.raw)
	}
	// null or 0 = none.
	none := expect(t, e.do(req{method: "PUT", path: "/v1/admin/organizations/" + user.orgID + "/limits", token: root.access,
		body: map[string]any{"monthlyLimit": nil, "warmupCap": 0}}), 200)
	if plan, _ := none.body["plan"].(map[string]any); plan["monthlyLimit"] != nil || plan["warmupCap"] != nil {
		t.Errorf("clearing limits: %s", none.raw)
	}
	errorBody(t, e.do(req{method: "PUT", path: "/v1/admin/organizations/" + user.orgID + "/limits", token: root.access,
		body: map[string]any{"monthlyLimit": -1, "warmupCap": 0}}), 400, "", "Validation failed")
	errorBody(t, e.post("/v1/admin/organizations/0190a0b0-0000-7000-8000-000000000000/pause", root.access, nil), 404, "", "")
}
