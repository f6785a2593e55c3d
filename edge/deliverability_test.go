package edge_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// deliverabilityRoutes are the Key routes of SPEC §4.5 with the scopes that admit them and a body that
// passes validation.
var deliverabilityRoutes = []struct {
	method, path string
	body         any
	required     []string
	status       int
}{
	{"GET", "/v1/suppressions", nil, []string{ports.ScopeSuppressionsRead, ports.ScopeSuppressionsWrite}, 200},
	{"POST", "/v1/suppressions", map[string]any{"address": "someone@example.net"}, []string{ports.ScopeSuppressionsWrite}, 201},
	{"DELETE", "/v1/suppressions/" + suppressionID, nil, []string{ports.ScopeSuppressionsWrite}, 200},
	{"GET", "/v1/bounces", nil, []string{ports.ScopeEmailsRead}, 200},
	{"GET", "/v1/complaints", nil, []string{ports.ScopeEmailsRead}, 200},
}

var suppressionKeys = []string{"id", "address", "scope", "reason", "createdAt"}

// TestNewRequiresTheNewServices checks that a composition root that forgets a service fails at start, not
// on the first request that needs it.
func TestNewRequiresTheNewServices(t *testing.T) {
	t.Parallel()
	for name, clear := range map[string]func(*ports.Core){
		"Templates":      func(c *ports.Core) { c.Templates = nil },
		"Deliverability": func(c *ports.Core) { c.Deliverability = nil },
		"Tracking":       func(c *ports.Core) { c.Tracking = nil },
	} {
		core := newFakeCore().core()
		clear(&core)
		if _, err := edge.New(edge.Config{}, core); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("edge.New without %s: err = %v, want one naming it", name, err)
		}
	}
}

func TestDeliverabilityScopes(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.deleteFound = true
	b := MustStartEdge(t, fake, nil)

	for _, rt := range deliverabilityRoutes {
		mustError(t, b.do(t, rt.method, rt.path, "", rt.body), 401, "Unauthorized", "")
		// Key routes: a session is the wrong credential.
		mustError(t, b.do(t, rt.method, rt.path, userToken, rt.body), 401, "Unauthorized", "")
		got := mustError(t, b.do(t, rt.method, rt.path, sendKey, rt.body), 403, "insufficient_scope", "")
		want := make([]any, 0, len(rt.required))
		for _, s := range rt.required {
			want = append(want, s)
		}
		if req, _ := got["requiredScopes"].([]any); !slices.Equal(req, want) {
			t.Errorf("%s %s: requiredScopes %v, want %v", rt.method, rt.path, got["requiredScopes"], want)
		}
	}
	if n := b.fake.calledWith("List") + b.fake.calledWith("CreateSuppression") + b.fake.calledWith("DeleteSuppression"); n != 0 {
		t.Fatalf("refused requests reached the core: %v", b.fake.calls)
	}

	// Each scope admits exactly its routes; suppressions:write may list too (SPEC §5 rule 9).
	for _, key := range []struct {
		token string
		scope string
	}{
		{suppressionsReadKey, ports.ScopeSuppressionsRead},
		{suppressionsWriteKey, ports.ScopeSuppressionsWrite},
		{readKey, ports.ScopeEmailsRead},
	} {
		for _, rt := range deliverabilityRoutes {
			r := b.do(t, rt.method, rt.path, key.token, rt.body)
			if slices.Contains(rt.required, key.scope) {
				mustStatus(t, r, rt.status)
				continue
			}
			mustError(t, r, 403, "insufficient_scope", "")
		}
	}
	for _, key := range []string{starKey, unenforcedKy} {
		for _, rt := range deliverabilityRoutes {
			mustStatus(t, b.do(t, rt.method, rt.path, key, rt.body), rt.status)
		}
	}
}

func TestSuppressionRoutesShapes(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	r := mustStatus(t, b.do(t, "GET", "/v1/suppressions", suppressionsReadKey, nil), 200)
	if len(r.list) != 2 {
		t.Fatalf("list: %s", r.raw)
	}
	first, second := r.list[0].(map[string]any), r.list[1].(map[string]any)
	mustKeys(t, "listed suppression", first, suppressionKeys...)
	for k, want := range map[string]any{
		"id": suppressionID, "address": "bounced@example.net", "scope": "tenant", "reason": "bounce", "createdAt": "2026-11-12T00:00:00Z",
	} {
		if first[k] != want {
			t.Errorf("listed %s = %v, want %v", k, first[k], want)
		}
	}
	if second["address"] != "example.com" || second["scope"] != "domain" {
		t.Errorf("order not kept: %s", r.raw)
	}
	if strings.Contains(string(r.raw), userOrg) {
		t.Errorf("the list leaks the organization id: %s", r.raw)
	}

	// Defaults: scope tenant, reason manual; an organization id in the body is ignored.
	r = mustStatus(t, b.do(t, "POST", "/v1/suppressions", suppressionsWriteKey,
		map[string]any{"address": " Someone@Example.NET ", "organizationId": otherOrg}), 201)
	mustKeys(t, "created suppression", r.body, suppressionKeys...)
	if r.body["id"] != suppressionID || r.body["address"] != "someone@example.net" || r.body["scope"] != "tenant" ||
		r.body["reason"] != "manual" || r.body["createdAt"] != "2026-11-22T10:00:00Z" {
		t.Errorf("create: %s", r.raw)
	}
	mustStatus(t, b.do(t, "POST", "/v1/suppressions", suppressionsWriteKey,
		map[string]any{"address": "example.org", "scope": "domain", "reason": "complaint"}), 201)
	b.fake.mu.Lock()
	creates := slices.Clone(b.fake.suppressionCreates)
	b.fake.mu.Unlock()
	if !slices.Equal(creates, []ports.NewSuppression{
		{Address: " Someone@Example.NET ", Scope: "tenant", Reason: "manual"},
		{Address: "example.org", Scope: "domain", Reason: "complaint"},
	}) {
		t.Errorf("creates reaching the core: %+v", creates)
	}
	if got := b.fake.lastOrgID(); got != userOrg {
		t.Errorf("create used organization %s, want the key's", got)
	}

	// Global suppressions belong to platform admins: the core refuses them, the edge answers 403.
	r = b.do(t, "POST", "/v1/suppressions", starKey, map[string]any{"address": "x@example.net", "scope": "global"})
	mustError(t, r, 403, "Forbidden", "global suppressions are managed by platform admins")

	// Delete answers whether something was deleted; the id is canonicalised.
	r = mustStatus(t, b.do(t, "DELETE", "/v1/suppressions/"+strings.ToUpper(suppressionID), suppressionsWriteKey, nil), 200)
	mustKeys(t, "delete", r.body, "deleted")
	if r.body["deleted"] != false {
		t.Errorf("delete of nothing: %s", r.raw)
	}
	b.fake.mu.Lock()
	b.fake.deleteFound = true
	b.fake.mu.Unlock()
	r = mustStatus(t, b.do(t, "DELETE", "/v1/suppressions/"+suppressionID, suppressionsWriteKey, nil), 200)
	if r.body["deleted"] != true {
		t.Errorf("delete: %s", r.raw)
	}
	// An id that is not a UUID is refused like on every other {id} route, without asking the core.
	for _, id := range []string{"abc", "not-a-uuid", "12345", "x%20y"} {
		r = b.do(t, "DELETE", "/v1/suppressions/"+id, suppressionsWriteKey, nil)
		if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Equal(got, []string{"id"}) {
			t.Errorf("delete %s: detail paths %v, want [id]", id, got)
		}
	}
	b.fake.mu.Lock()
	deletes := slices.Clone(b.fake.deletes)
	b.fake.mu.Unlock()
	if !slices.Equal(deletes, []string{suppressionID, suppressionID}) {
		t.Errorf("deletes reaching the core: %v", deletes)
	}
}

func TestSuppressionListEmpty(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.suppressions, fake.globalSupps = nil, nil
	b := MustStartEdge(t, fake, nil)
	for _, c := range []struct{ path, token string }{{"/v1/suppressions", starKey}, {"/v1/admin/suppressions", adminToken}} {
		r := mustStatus(t, b.do(t, "GET", c.path, c.token, nil), 200)
		if strings.TrimSpace(string(r.raw)) != "[]" {
			t.Errorf("%s with nothing: %s, want []", c.path, r.raw)
		}
	}
}

func TestSuppressionValidation(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	for _, route := range []struct{ path, token string }{{"/v1/suppressions", starKey}, {"/v1/admin/suppressions", adminToken}} {
		for _, c := range []struct {
			name  string
			body  any
			paths []string
		}{
			{"address missing", map[string]any{}, []string{"address"}},
			{"address empty", map[string]any{"address": ""}, []string{"address"}},
			{"address too long", map[string]any{"address": strings.Repeat("a", 309) + "@example.net"}, []string{"address"}},
			{"address not a string", map[string]any{"address": []string{"a@example.net"}}, []string{"address"}},
			{"unknown reason", map[string]any{"address": "a@example.net", "reason": "spam"}, []string{"reason"}},
			{"empty reason", map[string]any{"address": "a@example.net", "reason": ""}, []string{"reason"}},
			{"unknown scope", map[string]any{"address": "a@example.net", "scope": "everyone"}, []string{"scope"}},
			{"empty scope", map[string]any{"address": "a@example.net", "scope": ""}, []string{"scope"}},
		} {
			r := b.do(t, "POST", route.path, route.token, c.body)
			body := mustError(t, r, 400, "Bad Request", "Validation failed")
			if got := detailPaths(t, body); !slices.Equal(got, c.paths) {
				t.Errorf("%s %s: detail paths %v, want %v: %s", route.path, c.name, got, c.paths, r.raw)
			}
		}
	}
	// The admin route makes only global suppressions: another scope is an error, not silently global.
	for _, scope := range []string{"tenant", "domain", "recipient"} {
		r := b.do(t, "POST", "/v1/admin/suppressions", adminToken, map[string]any{"address": "a@example.net", "scope": scope})
		if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Equal(got, []string{"scope"}) {
			t.Errorf("admin scope %s: %v", scope, got)
		}
	}
	if n := b.fake.calledWith("CreateSuppression") + b.fake.calledWith("CreateGlobalSuppression"); n != 0 {
		t.Errorf("the core was reached %d times with invalid bodies", n)
	}
	// 320 characters is within the bound.
	mustStatus(t, b.do(t, "POST", "/v1/suppressions", starKey, map[string]any{"address": strings.Repeat("a", 308) + "@example.net"}), 201)
	// The core's own verdicts keep their details.
	fake := newFakeCore()
	fake.deliverabilityErr = ports.ValidationError(ports.FieldViolation{Path: "address", Message: "must be a bare domain for scope domain"})
	b = MustStartEdge(t, fake, nil)
	r := b.do(t, "POST", "/v1/suppressions", starKey, map[string]any{"address": "a@example.net", "scope": "domain"})
	if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Equal(got, []string{"address"}) ||
		!strings.Contains(string(r.raw), "must be a bare domain for scope domain") {
		t.Errorf("core validation: %s", r.raw)
	}
}

func TestAdminSuppressions(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	routes := []struct {
		method, path string
		body         any
		status       int
	}{
		{"GET", "/v1/admin/suppressions", nil, 200},
		{"POST", "/v1/admin/suppressions", map[string]any{"address": "trap@example.net"}, 201},
		{"DELETE", "/v1/admin/suppressions/" + globalSuppID, nil, 200},
	}
	for _, rt := range routes {
		mustError(t, b.do(t, rt.method, rt.path, "", rt.body), 401, "Unauthorized", "")
		mustError(t, b.do(t, rt.method, rt.path, bogusJWT, rt.body), 401, "Unauthorized", "")
		mustError(t, b.do(t, rt.method, rt.path, starKey, rt.body), 401, "Unauthorized", "")
		mustError(t, b.do(t, rt.method, rt.path, userToken, rt.body), 403, "Forbidden", "Platform admin required")
	}
	if n := b.fake.calledWith("ListGlobalSuppressions") + b.fake.calledWith("CreateGlobalSuppression") +
		b.fake.calledWith("DeleteGlobalSuppression"); n != 0 {
		t.Fatalf("non-admins reached the core %d times", n)
	}

	r := mustStatus(t, b.do(t, "GET", "/v1/admin/suppressions", adminToken, nil), 200)
	if len(r.list) != 1 {
		t.Fatalf("admin list: %s", r.raw)
	}
	listed := r.list[0].(map[string]any)
	mustKeys(t, "global suppression", listed, suppressionKeys...)
	if listed["scope"] != "global" || listed["address"] != "spamtrap.example" || listed["reason"] != "invalid" {
		t.Errorf("admin list: %s", r.raw)
	}

	// scope may be omitted or say global; either way the core is asked for a global suppression.
	r = mustStatus(t, b.do(t, "POST", "/v1/admin/suppressions", adminToken, map[string]any{"address": "Trap@Example.net"}), 201)
	mustKeys(t, "created global suppression", r.body, suppressionKeys...)
	if r.body["id"] != globalSuppID || r.body["scope"] != "global" || r.body["address"] != "trap@example.net" || r.body["reason"] != "manual" {
		t.Errorf("admin create: %s", r.raw)
	}
	mustStatus(t, b.do(t, "POST", "/v1/admin/suppressions", adminToken, map[string]any{"address": "example.biz", "scope": "global", "reason": "complaint"}), 201)
	b.fake.mu.Lock()
	creates := slices.Clone(b.fake.globalCreates)
	b.fake.mu.Unlock()
	if !slices.Equal(creates, []ports.NewSuppression{
		{Address: "Trap@Example.net", Scope: "global", Reason: "manual"},
		{Address: "example.biz", Scope: "global", Reason: "complaint"},
	}) {
		t.Errorf("global creates reaching the core: %+v", creates)
	}
	if b.fake.calledWith("CreateSuppression") != 0 {
		t.Error("the admin route created a tenant suppression")
	}

	b.fake.mu.Lock()
	b.fake.deleteFound = true
	b.fake.mu.Unlock()
	r = mustStatus(t, b.do(t, "DELETE", "/v1/admin/suppressions/{"+strings.ToUpper(globalSuppID)+"}", adminToken, nil), 200)
	if r.body["deleted"] != true {
		t.Errorf("admin delete: %s", r.raw)
	}
	r = b.do(t, "DELETE", "/v1/admin/suppressions/nope", adminToken, nil)
	if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Equal(got, []string{"id"}) {
		t.Errorf("admin delete of a non-UUID: detail paths %v, want [id]", got)
	}
	b.fake.mu.Lock()
	deletes := slices.Clone(b.fake.deletes)
	b.fake.mu.Unlock()
	if !slices.Equal(deletes, []string{"global:" + globalSuppID}) {
		t.Errorf("deletes reaching the core: %v", deletes)
	}
}

func TestBouncesPage(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	// The hard bounce has the class the core gave it; the soft one none, which lists as unknown.
	fake.bouncePage.Data[0].Class = ports.BounceClassBadMailbox
	b := MustStartEdge(t, fake, nil)
	r := mustStatus(t, b.do(t, "GET", "/v1/bounces", readKey, nil), 200)
	mustKeys(t, "bounce page", r.body, "data", "nextCursor")
	if r.body["nextCursor"] != "cursor-2" {
		t.Errorf("nextCursor: %s", r.raw)
	}
	data, _ := r.body["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("data: %s", r.raw)
	}
	bounceKeys := []string{"id", "messageId", "recipientId", "address", "type", "class", "status", "action", "diagnosticCode",
		"remoteMta", "reportingMta", "createdAt"}
	hard, soft := data[0].(map[string]any), data[1].(map[string]any)
	mustKeys(t, "hard bounce", hard, bounceKeys...)
	mustKeys(t, "soft bounce", soft, bounceKeys...)
	for k, want := range map[string]any{
		"id": bounceID, "messageId": emailID, "recipientId": recipientID, "address": "gone@example.net", "type": "hard",
		"class": "bad_mailbox", "status": "5.1.1", "action": "failed", "diagnosticCode": "smtp; 550 5.1.1 user unknown", "remoteMta": "mx.example.net",
		"reportingMta": "mta.postmill.local", "createdAt": "2026-11-21T09:00:00Z",
	} {
		if hard[k] != want {
			t.Errorf("hard bounce %s = %v, want %v", k, hard[k], want)
		}
	}
	// What the report did not say is null, never "".
	for _, k := range []string{"status", "action", "diagnosticCode", "remoteMta", "reportingMta"} {
		if v, ok := soft[k]; !ok || v != nil {
			t.Errorf("soft bounce %s = %q (present %v), want null", k, v, ok)
		}
	}
	if soft["type"] != "soft" || soft["address"] != "full@example.net" || soft["class"] != "unknown" {
		t.Errorf("soft bounce: %v", soft)
	}
	if strings.Contains(string(r.raw), userOrg) {
		t.Errorf("bounces leak the organization id: %s", r.raw)
	}

	// limit and cursor reach the core; limit defaults to 25.
	mustStatus(t, b.do(t, "GET", "/v1/bounces?limit=100&cursor=cursor-2&organizationId="+otherOrg, readKey, nil), 200)
	b.fake.mu.Lock()
	queries := slices.Clone(b.fake.pageQueries)
	b.fake.mu.Unlock()
	if !slices.Equal(queries, []ports.PageQuery{{Limit: 25}, {Limit: 100, Cursor: "cursor-2"}}) {
		t.Errorf("queries reaching the core: %+v", queries)
	}
	if got := b.fake.lastOrgID(); got != userOrg {
		t.Errorf("bounces listed for organization %s, want the key's", got)
	}
}

func TestComplaintsPage(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	r := mustStatus(t, b.do(t, "GET", "/v1/complaints?limit=1", readKey, nil), 200)
	mustKeys(t, "complaint page", r.body, "data", "nextCursor")
	// The last page has a null cursor.
	if v, ok := r.body["nextCursor"]; !ok || v != nil {
		t.Errorf("nextCursor on the last page = %v (present %v), want null", v, ok)
	}
	data, _ := r.body["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("data: %s", r.raw)
	}
	complaintKeys := []string{"id", "messageId", "recipientId", "address", "feedbackType", "userAgent", "reportedDomain",
		"sourceIp", "arrivalDate", "createdAt"}
	full, bare := data[0].(map[string]any), data[1].(map[string]any)
	mustKeys(t, "complaint", full, complaintKeys...)
	mustKeys(t, "bare complaint", bare, complaintKeys...)
	for k, want := range map[string]any{
		"id": complaintID, "messageId": emailID, "recipientId": recipientID, "address": "angry@example.net",
		"feedbackType": "abuse", "userAgent": "SomeISP-FBL/1.0", "reportedDomain": "example.org", "sourceIp": "192.0.2.10",
		"arrivalDate": "2026-11-21T06:00:00Z", "createdAt": "2026-11-21T07:00:00Z",
	} {
		if full[k] != want {
			t.Errorf("complaint %s = %v, want %v", k, full[k], want)
		}
	}
	for _, k := range []string{"recipientId", "feedbackType", "userAgent", "reportedDomain", "sourceIp", "arrivalDate"} {
		if v, ok := bare[k]; !ok || v != nil {
			t.Errorf("bare complaint %s = %v (present %v), want null", k, v, ok)
		}
	}
	b.fake.mu.Lock()
	queries := slices.Clone(b.fake.pageQueries)
	b.fake.mu.Unlock()
	if !slices.Equal(queries, []ports.PageQuery{{Limit: 1}}) {
		t.Errorf("queries reaching the core: %+v", queries)
	}
}

func TestFeedbackPagesEmptyAndInvalid(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.bouncePage, fake.complaintPage = ports.BouncePage{}, ports.ComplaintPage{}
	b := MustStartEdge(t, fake, nil)
	for _, path := range []string{"/v1/bounces", "/v1/complaints"} {
		r := mustStatus(t, b.do(t, "GET", path, readKey, nil), 200)
		if strings.TrimSpace(string(r.raw)) != `{"data":[],"nextCursor":null}` {
			t.Errorf("%s with nothing: %s", path, r.raw)
		}
		for query, field := range map[string]string{
			"?limit=0":                             "limit",
			"?limit=101":                           "limit",
			"?limit=ten":                           "limit",
			"?cursor=" + strings.Repeat("c", 1025): "cursor",
		} {
			r := b.do(t, "GET", path+query, readKey, nil)
			if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Equal(got, []string{field}) {
				t.Errorf("%s%.20s: detail paths %v, want [%s]", path, query, got, field)
			}
		}
	}
	fake.mu.Lock()
	n := len(fake.pageQueries)
	fake.mu.Unlock()
	if n != 2 {
		t.Errorf("the core was asked %d times, want only for the two valid requests", n)
	}

	// A cursor the store does not recognise is the core's 400.
	bad := newFakeCore()
	bad.deliverabilityErr = ports.ValidationError(ports.FieldViolation{Path: "cursor", Message: "invalid cursor"})
	b = MustStartEdge(t, bad, nil)
	for _, path := range []string{"/v1/bounces", "/v1/complaints"} {
		r := b.do(t, "GET", path+"?cursor=forged", readKey, nil)
		if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Equal(got, []string{"cursor"}) {
			t.Errorf("%s with a forged cursor: %s", path, r.raw)
		}
	}
}

func TestOpenAPIDeliverabilitySchemas(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	create := mustSchema(t, b, "CreateSuppressionRequest")
	if req, _ := create["required"].([]any); !slices.Equal(req, []any{"address"}) {
		t.Errorf("create requires %v, want only address", req)
	}
	scope := property(t, create, "scope")
	if enum, _ := scope["enum"].([]any); !slices.Equal(enum, []any{"global", "tenant", "domain", "recipient"}) || scope["default"] != "tenant" {
		t.Errorf("scope documented as %v", scope)
	}
	reason := property(t, create, "reason")
	if enum, _ := reason["enum"].([]any); !slices.Equal(enum, []any{"bounce", "complaint", "invalid", "manual"}) || reason["default"] != "manual" {
		t.Errorf("reason documented as %v", reason)
	}
	if a := property(t, create, "address"); a["minLength"] != float64(1) {
		t.Errorf("address documented as %v", a)
	}
	global := property(t, mustSchema(t, b, "CreateGlobalSuppressionRequest"), "scope")
	if enum, _ := global["enum"].([]any); !slices.Equal(enum, []any{"global"}) || global["default"] != "global" {
		t.Errorf("admin scope documented as %v", global)
	}
	bounce := mustSchema(t, b, "BounceResponse")
	for _, f := range []string{"status", "action", "diagnosticCode", "remoteMta", "reportingMta"} {
		if typ, _ := property(t, bounce, f)["type"].([]any); !slices.Equal(typ, []any{"string", "null"}) {
			t.Errorf("bounce %s documented with type %v", f, property(t, bounce, f)["type"])
		}
	}
	if property(t, bounce, "messageId")["type"] != "string" {
		t.Errorf("bounce messageId is documented as nullable")
	}

	// The page parameters are documented with their bounds.
	r := mustStatus(t, b.do(t, "GET", "/v1/openapi.json", "", nil), 200)
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string         `json:"name"`
				In     string         `json:"in"`
				Schema map[string]any `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(r.raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/bounces", "/v1/complaints"} {
		var limit map[string]any
		for _, p := range doc.Paths[path]["get"].Parameters {
			if p.Name == "limit" && p.In == "query" {
				limit = p.Schema
			}
		}
		if limit["minimum"] != float64(1) || limit["maximum"] != float64(100) || limit["default"] != float64(25) {
			t.Errorf("%s limit documented as %v", path, limit)
		}
	}
}
