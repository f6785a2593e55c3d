package edge_test

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/postmill/postmill/ports"
)

func TestAccountRoutesShapes(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	r := mustStatus(t, b.do(t, "POST", "/v1/auth/signup", "", map[string]any{"email": "a@example.com", "password": "long enough"}), 201)
	for _, k := range []string{"userId", "organizationId", "accessToken", "refreshToken"} {
		if s, _ := r.body[k].(string); s == "" {
			t.Errorf("signup lacks %s: %s", k, r.raw)
		}
	}
	if len(r.body) != 4 {
		t.Errorf("signup body has extra fields: %s", r.raw)
	}
	r = mustStatus(t, b.do(t, "POST", "/v1/auth/login", "", map[string]any{"email": "a@example.com", "password": "long enough",
		"totp": "123456", "orgId": "{" + strings.ToUpper(otherOrg) + "}"}), 200)
	if r.body["accessToken"] != "a" || r.body["refreshToken"] != "r" || len(r.body) != 2 {
		t.Errorf("login body: %s", r.raw)
	}
	if got := b.fake.lastOrgID(); got != otherOrg {
		t.Errorf("login orgId reached the core as %q, want canonical %q", got, otherOrg)
	}
	r = mustStatus(t, b.do(t, "POST", "/v1/auth/refresh", "", map[string]any{"refreshToken": "r"}), 200)
	if r.body["accessToken"] != "a2" || r.body["refreshToken"] != "r2" {
		t.Errorf("refresh body: %s", r.raw)
	}
	mustError(t, b.do(t, "POST", "/v1/auth/refresh", "", map[string]any{}), 400, "", "Validation failed")

	r = mustStatus(t, b.do(t, "POST", "/v1/auth/logout", "", map[string]any{"refreshToken": "r"}), 200)
	if r.body["revoked"] != true || len(r.body) != 1 {
		t.Errorf("logout body: %s", r.raw)
	}
	mustError(t, b.do(t, "POST", "/v1/auth/logout", "", map[string]any{"refreshToken": "unknown"}), 401, "Unauthorized", "invalid or expired refresh token")
	mustError(t, b.do(t, "POST", "/v1/auth/logout", "", map[string]any{}), 400, "", "Validation failed")

	mustError(t, b.do(t, "POST", "/v1/auth/2fa/enroll", "", map[string]any{"password": "long enough"}), 401, "", "")
	// Enrolment asks for the password again.
	mustError(t, b.do(t, "POST", "/v1/auth/2fa/enroll", userToken, nil), 400, "", "")
	mustError(t, b.do(t, "POST", "/v1/auth/2fa/enroll", userToken, map[string]any{}), 400, "", "Validation failed")
	mustError(t, b.do(t, "POST", "/v1/auth/2fa/enroll", userToken, map[string]any{"password": "wrong one"}), 401, "Unauthorized", "invalid password")
	r = mustStatus(t, b.do(t, "POST", "/v1/auth/2fa/enroll", userToken, map[string]any{"password": "long enough"}), 201)
	if r.body["secret"] != "JBSWY3DPEHPK3PXP" || !strings.HasPrefix(r.body["otpauthUrl"].(string), "otpauth://") {
		t.Errorf("enroll body: %s", r.raw)
	}
	r = mustStatus(t, b.do(t, "POST", "/v1/auth/2fa/verify", userToken, map[string]any{"code": "123456"}), 200)
	if r.body["enabled"] != true {
		t.Errorf("verify body: %s", r.raw)
	}
}

func TestCredentialRoutesShapes(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	r := mustStatus(t, b.do(t, "GET", "/v1/api-keys", userToken, nil), 200)
	if len(r.list) != 2 {
		t.Fatalf("list: %s", r.raw)
	}
	used, fresh := r.list[0].(map[string]any), r.list[1].(map[string]any)
	if used["lastUsedAt"] != "2026-05-01T17:00:00Z" || used["revokedAt"] != nil {
		t.Errorf("timestamps not RFC 3339 UTC / null: %v", used)
	}
	if v, ok := fresh["lastUsedAt"]; !ok || v != nil {
		t.Errorf("unset lastUsedAt must be null, got %v (present %v)", v, ok)
	}
	if s, ok := fresh["scopes"].([]any); !ok || len(s) != 0 {
		t.Errorf("nil scopes must render [], got %v", fresh["scopes"])
	}
	for _, k := range []string{"id", "name", "prefix", "scopes", "scopesEnforced", "lastUsedAt", "revokedAt", "createdAt"} {
		if _, ok := used[k]; !ok {
			t.Errorf("key lacks %s: %v", k, used)
		}
	}
	if _, ok := used["token"]; ok || strings.Contains(strings.ToLower(string(r.raw)), "hash") {
		t.Errorf("listing leaks secret material: %s", r.raw)
	}

	// Absent scopes reach the core as nil (so it applies the default); an explicit list as given.
	r = mustStatus(t, b.do(t, "POST", "/v1/api-keys", userToken, map[string]any{"name": "default"}), 201)
	if r.body["token"] != "svc_live_0123456789abcdef.plaintext" || strings.Contains(string(r.raw), "secret-hash") {
		t.Errorf("create body: %s", r.raw)
	}
	mustStatus(t, b.do(t, "POST", "/v1/api-keys", userToken, map[string]any{"name": "n", "scopes": nil}), 201)
	mustStatus(t, b.do(t, "POST", "/v1/api-keys", userToken, map[string]any{"name": "b", "scopes": []string{"billing:read", "billing:read"}}), 201)
	b.fake.mu.Lock()
	nils, scopes := slices.Clone(b.fake.scopesIsNil), slices.Clone(b.fake.scopes)
	b.fake.mu.Unlock()
	if !slices.Equal(nils, []bool{true, true, false}) || !slices.Equal(scopes[2], []string{"billing:read", "billing:read"}) {
		t.Errorf("scopes reaching the core: nil=%v %v", nils, scopes)
	}
	mustError(t, b.do(t, "POST", "/v1/api-keys", userToken, map[string]any{"name": strings.Repeat("k", 101)}), 400, "", "Validation failed")
	mustStatus(t, b.do(t, "POST", "/v1/api-keys", userToken, map[string]any{"name": strings.Repeat("k", 100)}), 201)

	upper := strings.ToUpper(keyID)
	r = mustStatus(t, b.do(t, "DELETE", "/v1/api-keys/"+upper, userToken, nil), 200)
	if r.body["revoked"] != true || b.fake.called("RevokeAPIKey:"+keyID) != 1 {
		t.Errorf("revoke: %s (id canonicalised? %v)", r.raw, b.fake.calls)
	}

	r = mustStatus(t, b.do(t, "POST", "/v1/smtp-credentials", userToken, map[string]any{"name": "ignored"}), 201)
	for _, k := range []string{"id", "username", "password", "host", "port", "createdAt"} {
		if _, ok := r.body[k]; !ok {
			t.Errorf("smtp create lacks %s: %s", k, r.raw)
		}
	}
	mustStatus(t, b.do(t, "POST", "/v1/smtp-credentials", userToken, nil), 201)
	r = mustStatus(t, b.do(t, "GET", "/v1/smtp-credentials", userToken, nil), 200)
	if len(r.list) != 1 || strings.Contains(string(r.raw), "password") || strings.Contains(string(r.raw), "argon2") {
		t.Errorf("smtp list: %s", r.raw)
	}
	r = mustStatus(t, b.do(t, "DELETE", "/v1/smtp-credentials/"+keyID, userToken, nil), 200)
	if r.body["deleted"] != true {
		t.Errorf("smtp delete: %s", r.raw)
	}
}

func TestOrganizationAndBillingShapes(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	r := mustStatus(t, b.do(t, "GET", "/v1/organization", userToken, nil), 200)
	if r.body["id"] != userOrg || r.body["slug"] != "acme" || r.body["paused"] != false || r.body["createdAt"] != "2026-03-04T04:06:07Z" {
		t.Errorf("organization: %s", r.raw)
	}
	plan, _ := r.body["plan"].(map[string]any)
	if plan["monthlyLimit"] != float64(3000) {
		t.Errorf("plan: %s", r.raw)
	}
	if v, ok := plan["warmupCap"]; !ok || v != nil {
		t.Errorf("a zero warm-up cap must render null: %s", r.raw)
	}

	r = mustStatus(t, b.do(t, "PUT", "/v1/admin/organizations/"+otherOrg+"/limits", adminToken, map[string]any{"monthlyLimit": 50000, "warmupCap": 200}), 200)
	if p, _ := r.body["plan"].(map[string]any); p["monthlyLimit"] != float64(50000) || p["warmupCap"] != float64(200) {
		t.Errorf("limits: %s", r.raw)
	}
	r = mustStatus(t, b.do(t, "PUT", "/v1/admin/organizations/"+otherOrg+"/limits", adminToken, map[string]any{"monthlyLimit": nil, "warmupCap": 0}), 200)
	if p, _ := r.body["plan"].(map[string]any); p["monthlyLimit"] != nil || p["warmupCap"] != nil {
		t.Errorf("cleared limits: %s", r.raw)
	}
	mustStatus(t, b.do(t, "PUT", "/v1/admin/organizations/"+otherOrg+"/limits", adminToken, map[string]any{}), 200)
	b.fake.mu.Lock()
	plans := slices.Clone(b.fake.plans)
	b.fake.mu.Unlock()
	if !slices.Equal(plans, []ports.Plan{{MonthlyLimit: 50000, WarmupCap: 200}, {}, {}}) {
		t.Errorf("plans reaching the core: %v", plans)
	}

	r = mustStatus(t, b.do(t, "GET", "/v1/billing/subscription", billingKey, nil), 200)
	usage, _ := r.body["usage"].(map[string]any)
	if r.body["periodStart"] != "2026-11-01T00:00:00Z" || r.body["periodEnd"] != "2026-12-01T00:00:00Z" || usage["emailsSent"] != float64(42) {
		t.Errorf("subscription: %s", r.raw)
	}
	if p, _ := r.body["plan"].(map[string]any); p["monthlyLimit"] != float64(3000) || p["warmupCap"] != nil {
		t.Errorf("subscription plan: %s", r.raw)
	}
}

func TestOpenAPIListsEveryRoute(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	r := mustStatus(t, b.do(t, "GET", "/v1/openapi.json", "", nil), 200)
	var doc struct {
		OpenAPI    string `json:"openapi"`
		Components struct {
			SecuritySchemes map[string]struct {
				Type   string `json:"type"`
				Scheme string `json:"scheme"`
			} `json:"securitySchemes"`
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
		Paths map[string]map[string]struct {
			OperationID string                     `json:"operationId"`
			Tags        []string                   `json:"tags"`
			Summary     string                     `json:"summary"`
			Security    []map[string][]string      `json:"security"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(r.raw, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	for name, s := range doc.Components.SecuritySchemes {
		if s.Type != "http" || s.Scheme != "bearer" {
			t.Errorf("security scheme %s is %s/%s, want http bearer", name, s.Type, s.Scheme)
		}
	}
	want := []struct {
		method, path, id string
		status           string
		security         string // "" public, else the scheme name
		scopes           []string
	}{
		{"post", "/v1/auth/signup", "signup", "201", "", nil},
		{"post", "/v1/auth/login", "login", "200", "", nil},
		{"post", "/v1/auth/refresh", "refresh-token", "200", "", nil},
		{"post", "/v1/auth/logout", "logout", "200", "", nil},
		{"post", "/v1/auth/2fa/enroll", "enroll-2fa", "201", "session", nil},
		{"post", "/v1/auth/2fa/verify", "verify-2fa", "200", "session", nil},
		{"get", "/v1/api-keys", "list-api-keys", "200", "session", nil},
		{"post", "/v1/api-keys", "create-api-key", "201", "session", nil},
		{"delete", "/v1/api-keys/{id}", "revoke-api-key", "200", "session", nil},
		{"post", "/v1/smtp-credentials", "create-smtp-credential", "201", "session", nil},
		{"get", "/v1/smtp-credentials", "list-smtp-credentials", "200", "session", nil},
		{"delete", "/v1/smtp-credentials/{id}", "delete-smtp-credential", "200", "session", nil},
		{"get", "/v1/organization", "get-organization", "200", "session", nil},
		{"get", "/v1/admin/organizations", "admin-list-organizations", "200", "session", nil},
		{"post", "/v1/admin/organizations/{id}/pause", "admin-pause-organization", "200", "session", nil},
		{"post", "/v1/admin/organizations/{id}/resume", "admin-resume-organization", "200", "session", nil},
		{"put", "/v1/admin/organizations/{id}/limits", "admin-set-organization-limits", "200", "session", nil},
		{"get", "/v1/billing/subscription", "get-billing-subscription", "200", "apiKey", []string{"billing:read"}},
		{"get", "/v1/domains", "list-domains", "200", "session", nil},
		{"post", "/v1/domains", "create-domain", "201", "session", nil},
		{"get", "/v1/domains/{id}", "get-domain", "200", "session", nil},
		{"get", "/v1/domains/{id}/dns-records", "list-domain-dns-records", "200", "session", nil},
		{"post", "/v1/domains/{id}/verify", "verify-domain", "201", "session", nil},
		{"post", "/v1/domains/{id}/suspend", "suspend-domain", "201", "session", nil},
		{"post", "/v1/emails", "send-email", "202", "apiKey", []string{"emails:send"}},
		{"post", "/v1/emails/batch", "send-email-batch", "202", "apiKey", []string{"emails:send"}},
		{"get", "/v1/emails/{id}", "get-email", "200", "apiKey", []string{"emails:read"}},
		{"post", "/v1/emails/{id}/cancel", "cancel-email", "201", "apiKey", []string{"emails:send"}},
		{"get", "/v1/emails", "list-emails", "200", "session", nil},
		{"get", "/v1/webhooks", "list-webhooks", "200", "apiKey", []string{"webhooks:read", "webhooks:write"}},
		{"post", "/v1/webhooks", "create-webhook", "201", "apiKey", []string{"webhooks:write"}},
		{"delete", "/v1/webhooks/{id}", "delete-webhook", "200", "apiKey", []string{"webhooks:write"}},
		{"post", "/v1/webhooks/{id}/test", "test-webhook", "201", "apiKey", []string{"webhooks:write"}},
		{"post", "/v1/webhooks/{id}/rotate-secret", "rotate-webhook-secret", "201", "apiKey", []string{"webhooks:write"}},
		{"post", "/v1/webhooks/{id}/replay/{deliveryId}", "replay-webhook-delivery", "201", "apiKey", []string{"webhooks:write"}},
		{"get", "/v1/webhook-events", "list-webhook-events", "200", "apiKey", []string{"webhooks:read", "webhooks:write"}},
		{"patch", "/v1/domains/{id}", "update-domain", "200", "session", nil},
		{"post", "/v1/templates", "create-template", "201", "apiKey", []string{"templates:write"}},
		{"post", "/v1/templates/{id}/versions", "create-template-version", "201", "apiKey", []string{"templates:write"}},
		{"post", "/v1/templates/{id}/publish", "publish-template", "201", "apiKey", []string{"templates:write"}},
		{"get", "/v1/templates", "list-templates", "200", "session", nil},
		{"get", "/v1/templates/{id}", "get-template", "200", "session", nil},
		{"get", "/v1/templates/{id}/versions", "list-template-versions", "200", "session", nil},
		{"get", "/v1/suppressions", "list-suppressions", "200", "apiKey", []string{"suppressions:read", "suppressions:write"}},
		{"post", "/v1/suppressions", "create-suppression", "201", "apiKey", []string{"suppressions:write"}},
		{"delete", "/v1/suppressions/{id}", "delete-suppression", "200", "apiKey", []string{"suppressions:write"}},
		{"get", "/v1/bounces", "list-bounces", "200", "apiKey", []string{"emails:read"}},
		{"get", "/v1/complaints", "list-complaints", "200", "apiKey", []string{"emails:read"}},
		{"get", "/v1/admin/suppressions", "admin-list-suppressions", "200", "session", nil},
		{"post", "/v1/admin/suppressions", "admin-create-suppression", "201", "session", nil},
		{"delete", "/v1/admin/suppressions/{id}", "admin-delete-suppression", "200", "session", nil},
		{"post", "/v1/inbound/domains", "create-inbound-domain", "201", "session", nil},
		{"get", "/v1/inbound/domains", "list-inbound-domains", "200", "session", nil},
		{"get", "/v1/inbound/domains/{id}", "get-inbound-domain", "200", "session", nil},
		{"post", "/v1/inbound/domains/{id}/verify", "verify-inbound-domain", "201", "session", nil},
		{"post", "/v1/inbound/domains/{id}/suspend", "suspend-inbound-domain", "201", "session", nil},
		{"delete", "/v1/inbound/domains/{id}", "delete-inbound-domain", "200", "session", nil},
		{"post", "/v1/inbound/routes", "create-inbound-route", "201", "session", nil},
		{"patch", "/v1/inbound/routes/{id}", "update-inbound-route", "200", "session", nil},
		{"delete", "/v1/inbound/routes/{id}", "delete-inbound-route", "200", "session", nil},
		{"get", "/v1/inbound/routes", "list-inbound-routes", "200", "session", nil},
		{"get", "/v1/inbound/routes/resolve", "resolve-inbound-route", "200", "session", nil},
		{"get", "/v1/received-emails", "list-received-emails", "200", "apiKey", []string{"inbound:read"}},
		{"get", "/v1/received-emails/{id}", "get-received-email", "200", "apiKey", []string{"inbound:read"}},
		{"get", "/v1/received-emails/{id}/raw", "get-received-email-raw", "200", "apiKey", []string{"inbound:read"}},
		{"get", "/v1/received-emails/{id}/attachments/{attId}", "get-received-attachment", "200", "apiKey", []string{"inbound:read"}},
	}
	// Every /v1 operation is listed above. The public routes outside /v1 (tracking) are tested with them.
	count := 0
	for path, item := range doc.Paths {
		if strings.HasPrefix(path, "/v1/") {
			count += len(item)
		}
	}
	if count != len(want) {
		t.Errorf("OpenAPI has %d /v1 operations, want %d", count, len(want))
	}
	for _, w := range want {
		op, ok := doc.Paths[w.path][w.method]
		if !ok {
			t.Errorf("OpenAPI lacks %s %s", w.method, w.path)
			continue
		}
		if op.OperationID != w.id || len(op.Tags) == 0 || op.Summary == "" {
			t.Errorf("%s %s: operationId %q tags %v summary %q", w.method, w.path, op.OperationID, op.Tags, op.Summary)
		}
		var success []string
		for code := range op.Responses {
			if strings.HasPrefix(code, "2") {
				success = append(success, code)
			}
		}
		if !slices.Equal(success, []string{w.status}) {
			t.Errorf("%s %s: success responses %v, want %s", w.method, w.path, success, w.status)
		}
		if _, ok := op.Responses["422"]; ok {
			t.Errorf("%s %s documents 422; validation failures are 400", w.method, w.path)
		}
		if w.security == "" {
			if len(op.Security) != 0 {
				t.Errorf("%s %s is public but has security %v", w.method, w.path, op.Security)
			}
			continue
		}
		if len(op.Security) != 1 || op.Security[0][w.security] == nil || !slices.Equal(op.Security[0][w.security], w.scopes) && len(w.scopes) > 0 {
			t.Errorf("%s %s: security %v, want %s %v", w.method, w.path, op.Security, w.security, w.scopes)
		}
		if _, ok := op.Responses["401"]; !ok {
			t.Errorf("%s %s does not document 401", w.method, w.path)
		}
	}
	if _, ok := doc.Paths["/v1/api-keys/{id}"]["delete"].Responses["400"]; !ok {
		t.Error("a route with a path id does not document 400")
	}
	send := doc.Paths["/v1/emails"]["post"]
	for _, code := range []string{"400", "401", "402", "403", "413", "429"} {
		if _, ok := send.Responses[code]; !ok {
			t.Errorf("POST /v1/emails does not document %s", code)
		}
	}
	if _, ok := doc.Paths["/v1/domains/{id}/verify"]["post"].Responses["429"]; !ok {
		t.Error("verify does not document 429")
	}
	if _, ok := doc.Paths["/v1/emails/{id}/cancel"]["post"].Responses["409"]; !ok {
		t.Error("cancel does not document 409")
	}
	var sendReq struct {
		Properties map[string]struct {
			OneOf []struct {
				Type     string `json:"type"`
				MinItems int    `json:"minItems"`
			} `json:"oneOf"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(doc.Components.Schemas["SendEmailRequest"], &sendReq); err != nil {
		t.Fatal(err)
	}
	if to := sendReq.Properties["to"].OneOf; len(to) != 2 || to[0].Type != "string" || to[1].Type != "array" || to[1].MinItems != 1 {
		t.Errorf("to is not documented as string or non-empty array: %+v", to)
	}
	if !slices.Equal(sendReq.Required, []string{"from", "to"}) {
		t.Errorf("send required fields %v", sendReq.Required)
	}
	if !strings.Contains(string(r.raw), `"name":"Idempotency-Key"`) {
		t.Error("the Idempotency-Key header is not documented")
	}
	if b := string(doc.Components.Schemas["BatchResponse"]); !strings.Contains(b, "BatchItemAccepted") || !strings.Contains(b, "BatchItemFailed") {
		t.Errorf("batch results are not documented as accepted or failed: %s", b)
	}
	if !strings.Contains(string(doc.Components.Schemas["EmailPageResponse"]), `"nextCursor"`) {
		t.Errorf("email page: %s", doc.Components.Schemas["EmailPageResponse"])
	}
	if strings.Contains(strings.ToLower(string(doc.Components.Schemas["DomainWithRecordsResponse"])), "private") {
		t.Error("the domain schema documents private key material")
	}
	if !strings.Contains(string(doc.Components.Schemas["ErrorBody"]), `"statusCode"`) {
		t.Errorf("error schema: %s", doc.Components.Schemas["ErrorBody"])
	}
	for schema, fields := range map[string][]string{
		"CreatedAPIKeyResponse":         {"id", "prefix", "scopes", "lastUsedAt", "token"},
		"CreatedSMTPCredentialResponse": {"password", "host", "port"},
		"OrganizationResponse":          {"slug", "paused", "plan"},
		"DomainResponse":                {"openTracking", "clickTracking"},
		"DomainWithRecordsResponse":     {"openTracking", "clickTracking", "records"},
		"UpdateDomainRequest":           {"openTracking", "clickTracking"},
		"TemplateResponse":              {"currentVersion", "createdAt", "updatedAt"},
		"TemplateWithVersionsResponse":  {"currentVersion", "versions"},
		"TemplateVersionResponse":       {"templateId", "version", "subject", "html", "text", "reactSource"},
		"SuppressionResponse":           {"id", "address", "scope", "reason", "createdAt"},
		"BouncePageResponse":            {"data", "nextCursor"},
		"BounceResponse":                {"messageId", "recipientId", "type", "status", "action", "diagnosticCode", "remoteMta", "reportingMta"},
		"ComplaintPageResponse":         {"data", "nextCursor"},
		"ComplaintResponse":             {"feedbackType", "userAgent", "reportedDomain", "sourceIp", "arrivalDate"},
	} {
		for _, f := range fields {
			if !strings.Contains(string(doc.Components.Schemas[schema]), `"`+f+`"`) {
				t.Errorf("schema %s does not document %s: %s", schema, f, doc.Components.Schemas[schema])
			}
		}
	}
	if strings.Contains(string(r.raw), "$schema") {
		t.Error("response schemas carry $schema links")
	}

	y := mustStatus(t, b.do(t, "GET", "/v1/openapi.yaml", "", nil), 200)
	if !strings.Contains(string(y.raw), "openapi: 3.1") {
		t.Errorf("yaml: %.100s", y.raw)
	}
	res, err := b.srv.Client().Get(b.srv.URL + "/docs")
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(html), "/v1/openapi") {
		t.Errorf("/docs: %d %.200s", res.StatusCode, html)
	}
}

// spans is the process-wide span recorder: the tracer provider is global, so every test's server reports
// here and the tracing test picks its own trace out by id.
var (
	spansOnce sync.Once
	spans     *tracetest.SpanRecorder
)

func recordSpans() *tracetest.SpanRecorder {
	spansOnce.Do(func() {
		spans = tracetest.NewSpanRecorder()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
		otel.SetTextMapPropagator(propagation.TraceContext{})
	})
	return spans
}

func TestServerSpanPerRequestNamedByRoute(t *testing.T) {
	t.Parallel()
	rec := recordSpans()
	b := MustStartEdge(t, newFakeCore(), nil)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := b.do(t, "DELETE", "/v1/api-keys/"+keyID, userToken, nil,
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	mustStatus(t, r, 200)
	deadline := time.Now().Add(2 * time.Second)
	for {
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID().String() != traceID {
				continue
			}
			if s.Name() != "DELETE /v1/api-keys/{id}" || s.Parent().SpanID().String() != "00f067aa0ba902b7" {
				t.Errorf("span %q parent %s", s.Name(), s.Parent().SpanID())
			}
			found := false
			for _, a := range s.Attributes() {
				if a.Key == "http.route" && a.Value.AsString() == "/v1/api-keys/{id}" {
					found = true
				}
			}
			if !found {
				t.Errorf("span lacks http.route: %v", s.Attributes())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no server span continued the incoming trace")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
