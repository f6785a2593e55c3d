package edge_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// webhookRoutes are every webhook route with the scopes that admit it.
var webhookRoutes = []struct {
	method, path string
	required     []string
}{
	{"GET", "/v1/webhooks", []string{ports.ScopeWebhooksRead, ports.ScopeWebhooksWrite}},
	{"POST", "/v1/webhooks", []string{ports.ScopeWebhooksWrite}},
	{"DELETE", "/v1/webhooks/" + webhookID, []string{ports.ScopeWebhooksWrite}},
	{"POST", "/v1/webhooks/" + webhookID + "/test", []string{ports.ScopeWebhooksWrite}},
	{"POST", "/v1/webhooks/" + webhookID + "/rotate-secret", []string{ports.ScopeWebhooksWrite}},
	{"POST", "/v1/webhooks/" + webhookID + "/replay/" + deliveryID, []string{ports.ScopeWebhooksWrite}},
	{"GET", "/v1/webhook-events", []string{ports.ScopeWebhooksRead, ports.ScopeWebhooksWrite}},
}

// validCreate is a create body that passes validation.
func validCreate() map[string]any {
	return map[string]any{"url": "https://hooks.example.com/postmill", "eventTypes": []string{ports.EventEmailDelivered}}
}

// mustKeys fails unless m has exactly the keys.
func mustKeys(tb testing.TB, what string, m map[string]any, keys ...string) {
	tb.Helper()
	got := slices.Sorted(maps.Keys(m))
	slices.Sort(keys)
	if !slices.Equal(got, keys) {
		tb.Errorf("%s has keys %v, want %v", what, got, keys)
	}
}

var deliveryKeys = []string{"id", "endpointId", "eventId", "eventType", "status", "attempts", "responseCode", "nextRetryAt", "deliveredAt", "createdAt", "blockedReason"}

// mustNotLeak fails when a webhook answer carries what stays in the core: the sealed secret, the payload
// bytes, the organization id.
func mustNotLeak(tb testing.TB, r response) {
	tb.Helper()
	raw := string(r.raw)
	for _, secret := range []string{sealedWebhookSecret, "secret-payload", userOrg, "payload", "originalEventId", "organizationId"} {
		if strings.Contains(raw, secret) {
			tb.Errorf("answer leaks %q: %s", secret, raw)
		}
	}
}

// TestNewRequiresWebhooks checks that a composition root that forgets the webhook service fails at start,
// not on the first webhook request.
func TestNewRequiresWebhooks(t *testing.T) {
	t.Parallel()
	core := newFakeCore().core()
	core.Webhooks = nil
	if _, err := edge.New(edge.Config{}, core); err == nil || !strings.Contains(err.Error(), "Webhooks") {
		t.Errorf("edge.New without Webhooks: err = %v, want one naming Webhooks", err)
	}
}

func TestWebhookRoutesShapes(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	r := mustStatus(t, b.do(t, "GET", "/v1/webhooks", starKey, nil), 200)
	mustNotLeak(t, r)
	if len(r.list) != 2 {
		t.Fatalf("list: %s", r.raw)
	}
	newest, older := r.list[0].(map[string]any), r.list[1].(map[string]any)
	mustKeys(t, "listed endpoint", newest, "id", "url", "enabled", "eventTypes", "secret", "createdAt")
	for k, want := range map[string]any{
		"id": webhookID, "url": "https://hooks.example.com/postmill", "enabled": true,
		"secret": "whsec_***", "createdAt": "2026-11-02T00:00:00Z",
	} {
		if newest[k] != want {
			t.Errorf("listed %s = %v, want %v", k, newest[k], want)
		}
	}
	if types, _ := newest["eventTypes"].([]any); !slices.Equal(types, []any{"email.delivered", "email.bounced"}) {
		t.Errorf("eventTypes %v", newest["eventTypes"])
	}
	if older["id"] != oldWebhookID || older["enabled"] != false || older["secret"] != "whsec_***" {
		t.Errorf("older endpoint (order kept, secret masked?): %v", older)
	}
	if types, ok := older["eventTypes"].([]any); !ok || len(types) != 0 {
		t.Errorf("nil eventTypes must render [], got %v", older["eventTypes"])
	}
	if strings.Contains(string(r.raw), plainWebhookSecret) {
		t.Errorf("listing shows the plaintext secret: %s", r.raw)
	}

	// An organization id in the body is ignored (SPEC §5 rule 1); the URL reaches the core as given.
	in := map[string]any{"url": "HTTPS://Hooks.Example.com:8443/in?x=1", "eventTypes": []string{"domain.verified", "email.delivered"}, "organizationId": otherOrg}
	r = mustStatus(t, b.do(t, "POST", "/v1/webhooks", starKey, in), 201)
	mustNotLeak(t, r)
	mustKeys(t, "created endpoint", r.body, "id", "url", "enabled", "eventTypes", "secret", "createdAt")
	if r.body["secret"] != plainWebhookSecret || r.body["url"] != "HTTPS://Hooks.Example.com:8443/in?x=1" || r.body["enabled"] != true {
		t.Errorf("create: %s", r.raw)
	}
	b.fake.mu.Lock()
	creates := slices.Clone(b.fake.hookCreates)
	b.fake.mu.Unlock()
	if len(creates) != 1 || creates[0].url != "HTTPS://Hooks.Example.com:8443/in?x=1" ||
		!slices.Equal(creates[0].eventTypes, []string{"domain.verified", "email.delivered"}) {
		t.Errorf("core received %+v", creates)
	}
	if got := b.fake.lastOrgID(); got != userOrg {
		t.Errorf("create used organization %s, want the key's", got)
	}

	// Basic credentials in the URL reach the core as given; the answer shows the password as ***.
	in = map[string]any{"url": "https://hook:pa55w0rd@hooks.example.com/in", "eventTypes": []string{"email.sent"}}
	r = mustStatus(t, b.do(t, "POST", "/v1/webhooks", starKey, in), 201)
	if r.body["url"] != "https://hook:***@hooks.example.com/in" || strings.Contains(string(r.raw), "pa55w0rd") {
		t.Errorf("create with credentials: %s", r.raw)
	}
	b.fake.mu.Lock()
	creates = slices.Clone(b.fake.hookCreates)
	b.fake.mu.Unlock()
	if len(creates) != 2 || creates[1].url != "https://hook:pa55w0rd@hooks.example.com/in" {
		t.Errorf("core received %+v", creates)
	}

	r = mustStatus(t, b.do(t, "POST", "/v1/webhooks/"+strings.ToUpper(webhookID)+"/rotate-secret", starKey, nil), 201)
	mustNotLeak(t, r)
	mustKeys(t, "rotated endpoint", r.body, "id", "url", "enabled", "eventTypes", "secret", "createdAt")
	if r.body["secret"] != plainWebhookSecret || r.body["id"] != webhookID || b.fake.called("RotateSecret:"+webhookID) != 1 {
		t.Errorf("rotate (id canonicalised?): %s %v", r.raw, b.fake.calls)
	}

	r = mustStatus(t, b.do(t, "POST", "/v1/webhooks/"+webhookID+"/test", starKey, nil), 201)
	mustNotLeak(t, r)
	mustKeys(t, "test delivery", r.body, deliveryKeys...)
	for k, want := range map[string]any{
		"id": deliveryID, "endpointId": webhookID, "eventId": "evt_replay_" + eventID, "eventType": "email.bounced",
		"status": "failed", "attempts": float64(2), "responseCode": float64(503),
		"nextRetryAt": "2026-11-21T09:30:00Z", "deliveredAt": nil, "createdAt": "2026-11-21T08:00:00Z",
	} {
		if v, ok := r.body[k]; !ok || v != want {
			t.Errorf("delivery %s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	if b.fake.called("TestEndpoint:"+webhookID) != 1 {
		t.Errorf("test reached the core as %v", b.fake.calls)
	}

	r = mustStatus(t, b.do(t, "POST", "/v1/webhooks/"+webhookID+"/replay/{"+strings.ToUpper(deliveryID)+"}", starKey, nil), 201)
	mustNotLeak(t, r)
	mustKeys(t, "replayed delivery", r.body, deliveryKeys...)
	if r.body["id"] != deliveryID || b.fake.called("Replay:"+webhookID+"/"+deliveryID) != 1 {
		t.Errorf("replay (ids canonicalised, in order?): %s %v", r.raw, b.fake.calls)
	}

	r = mustStatus(t, b.do(t, "GET", "/v1/webhook-events", starKey, nil), 200)
	mustNotLeak(t, r)
	if len(r.list) != 2 {
		t.Fatalf("webhook-events: %s", r.raw)
	}
	first, second := r.list[0].(map[string]any), r.list[1].(map[string]any)
	mustKeys(t, "listed delivery", second, deliveryKeys...)
	if first["id"] != deliveryID || second["id"] != oldDeliveryID {
		t.Errorf("order not kept: %s", r.raw)
	}
	for k, want := range map[string]any{
		"endpointId": oldWebhookID, "eventId": eventID, "eventType": "email.delivered", "status": "delivered",
		"attempts": float64(1), "responseCode": float64(204), "nextRetryAt": nil, "deliveredAt": "2026-11-20T08:00:00Z",
	} {
		if v, ok := second[k]; !ok || v != want {
			t.Errorf("listed delivery %s = %v (present %v), want %v", k, v, ok, want)
		}
	}

	r = mustStatus(t, b.do(t, "DELETE", "/v1/webhooks/"+strings.ToUpper(webhookID), starKey, nil), 200)
	if r.body["deleted"] != true || len(r.body) != 1 || b.fake.called("DeleteEndpoint:"+webhookID) != 1 {
		t.Errorf("delete: %s %v", r.raw, b.fake.calls)
	}
}

func TestWebhookRoutesEmptyLists(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.endpoints, fake.deliveries = nil, nil
	b := MustStartEdge(t, fake, nil)
	for _, path := range []string{"/v1/webhooks", "/v1/webhook-events"} {
		r := mustStatus(t, b.do(t, "GET", path, starKey, nil), 200)
		if strings.TrimSpace(string(r.raw)) != "[]" {
			t.Errorf("%s with nothing: %s, want []", path, r.raw)
		}
	}
}

func TestWebhookRoutesNotFound(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.webhookErr = ports.NotFound("webhook endpoint not found")
	b := MustStartEdge(t, fake, nil)
	for _, rt := range webhookRoutes[2:6] {
		mustError(t, b.do(t, rt.method, rt.path, starKey, nil), 404, "Not Found", "webhook endpoint not found")
	}

	// A malformed id is a 400 that never reaches the core.
	for _, path := range []string{
		"/v1/webhooks/not-a-uuid", "/v1/webhooks/not-a-uuid/test", "/v1/webhooks/not-a-uuid/rotate-secret",
		"/v1/webhooks/" + webhookID + "/replay/not-a-uuid", "/v1/webhooks/not-a-uuid/replay/" + deliveryID,
	} {
		method := "POST"
		if !strings.Contains(path[len("/v1/webhooks/"):], "/") {
			method = "DELETE"
		}
		body := mustError(t, b.do(t, method, path, starKey, nil), 400, "", "Validation failed")
		if paths := detailPaths(t, body); len(paths) != 1 || (paths[0] != "id" && paths[0] != "deliveryId") {
			t.Errorf("%s %s: details %v", method, path, paths)
		}
	}
	for _, c := range []string{"DeleteEndpoint:not-a-uuid", "TestEndpoint:not-a-uuid", "RotateSecret:not-a-uuid"} {
		if b.fake.called(c) != 0 {
			t.Errorf("%s reached the core", c)
		}
	}
}

func TestWebhookScopes(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	// webhooks:read lists and nothing else; every refusal names the scope that would do.
	for _, rt := range webhookRoutes {
		var body any
		if rt.path == "/v1/webhooks" && rt.method == "POST" {
			body = validCreate()
		}
		r := b.do(t, rt.method, rt.path, webhooksReadKey, body)
		if rt.method == "GET" {
			mustStatus(t, r, 200)
			continue
		}
		got := mustError(t, r, 403, "insufficient_scope", "")
		if req, _ := got["requiredScopes"].([]any); !slices.Equal(req, []any{"webhooks:write"}) {
			t.Errorf("%s %s: requiredScopes %v", rt.method, rt.path, got["requiredScopes"])
		}
	}
	if n := b.fake.called("CreateEndpoint"); n != 0 {
		t.Errorf("a read-only key reached CreateEndpoint %d times", n)
	}

	// webhooks:write may list too (SPEC §5 rule 9) and do everything else.
	for _, rt := range webhookRoutes {
		var body any
		want := 201
		switch {
		case rt.method == "GET", rt.method == "DELETE":
			want = 200
		case rt.path == "/v1/webhooks":
			body = validCreate()
		}
		mustStatus(t, b.do(t, rt.method, rt.path, webhooksWriteKey, body), want)
	}

	// A key with neither scope is told both alternatives on the list routes.
	for _, rt := range webhookRoutes {
		var body any
		if rt.path == "/v1/webhooks" && rt.method == "POST" {
			body = validCreate()
		}
		got := mustError(t, b.do(t, rt.method, rt.path, sendKey, body), 403, "insufficient_scope", "")
		want := make([]any, 0, len(rt.required))
		for _, s := range rt.required {
			want = append(want, s)
		}
		if req, _ := got["requiredScopes"].([]any); !slices.Equal(req, want) {
			t.Errorf("%s %s: requiredScopes %v, want %v", rt.method, rt.path, got["requiredScopes"], want)
		}
	}

	// Unrestricted keys pass; sessions and anonymous callers do not (Key routes, SPEC §5).
	for _, rt := range webhookRoutes[:1] {
		mustStatus(t, b.do(t, rt.method, rt.path, unenforcedKy, nil), 200)
	}
	for _, rt := range webhookRoutes {
		mustError(t, b.do(t, rt.method, rt.path, userToken, nil), 401, "", "")
		mustError(t, b.do(t, rt.method, rt.path, "", nil), 401, "", "")
	}
}

func TestWebhookCreateValidation(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	with := func(k string, v any) map[string]any {
		m := validCreate()
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name string
		body any
		path string
	}{
		{"ftp scheme", with("url", "ftp://hooks.example.com/x"), "url"},
		{"javascript scheme", with("url", "javascript:alert(1)"), "url"},
		{"file scheme", with("url", "file:///etc/passwd"), "url"},
		{"scheme without host", with("url", "https://"), "url"},
		{"scheme with empty host and port", with("url", "http://:8080/x"), "url"},
		{"relative", with("url", "/hooks"), "url"},
		{"no scheme", with("url", "hooks.example.com/x"), "url"},
		{"empty url", with("url", ""), "url"},
		{"missing url", with("url", nil), "url"},
		{"url not a string", with("url", 42), "url"},
		{"empty eventTypes", with("eventTypes", []string{}), "eventTypes"},
		{"missing eventTypes", with("eventTypes", nil), "eventTypes"},
		{"null eventTypes", `{"url":"https://hooks.example.com","eventTypes":null}`, "eventTypes"},
		{"eventTypes not an array", with("eventTypes", "email.sent"), "eventTypes"},
		{"unknown type", with("eventTypes", []string{"email.delivered", "email.sent", "email.teleported"}), "eventTypes.2"},
		{"timeline-only type", with("eventTypes", []string{"email.delivered", "email.cancelled"}), "eventTypes.1"},
		{"type without prefix", with("eventTypes", []string{"delivered"}), "eventTypes.0"},
		{"type in other case", with("eventTypes", []string{"Email.Delivered"}), "eventTypes.0"},
		{"type not a string", with("eventTypes", []any{"email.sent", 7}), "eventTypes.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := mustError(t, b.do(t, "POST", "/v1/webhooks", starKey, tc.body), 400, "Bad Request", "Validation failed")
			if paths := detailPaths(t, body); !slices.Equal(paths, []string{tc.path}) {
				t.Errorf("details %v, want [%s]: %v", paths, tc.path, body["details"])
			}
		})
	}
	t.Run("no body", func(t *testing.T) {
		t.Parallel()
		mustError(t, b.do(t, "POST", "/v1/webhooks", starKey, nil), 400, "", "")
	})
	t.Run("both fields wrong", func(t *testing.T) {
		t.Parallel()
		body := mustError(t, b.do(t, "POST", "/v1/webhooks", starKey, map[string]any{"url": "gopher://x", "eventTypes": []string{"nope"}}), 400, "", "Validation failed")
		paths := detailPaths(t, body)
		slices.Sort(paths)
		if !slices.Equal(paths, []string{"eventTypes.0", "url"}) {
			t.Errorf("details %v", paths)
		}
	})
	// Cleanups run after every parallel subtest has finished.
	t.Cleanup(func() {
		if n := b.fake.called("CreateEndpoint"); n != 0 {
			t.Errorf("an invalid create reached the core %d times", n)
		}
	})

	// Every SPEC §6 type is accepted at once, and plain http to a public host is allowed.
	all := map[string]any{"url": "http://hooks.example.com:8080/all", "eventTypes": ports.WebhookEventTypes}
	b2 := MustStartEdge(t, newFakeCore(), nil)
	mustStatus(t, b2.do(t, "POST", "/v1/webhooks", webhooksWriteKey, all), 201)
	b2.fake.mu.Lock()
	got := b2.fake.hookCreates[0].eventTypes
	b2.fake.mu.Unlock()
	if !slices.Equal(got, ports.WebhookEventTypes) {
		t.Errorf("core received %v", got)
	}
}

func TestOpenAPIWebhookSchemas(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	r := mustStatus(t, b.do(t, "GET", "/v1/openapi.json", "", nil), 200)
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.raw, &doc); err != nil {
		t.Fatal(err)
	}
	var create struct {
		Properties struct {
			URL struct {
				Format  string `json:"format"`
				Pattern string `json:"pattern"`
			} `json:"url"`
			EventTypes struct {
				MinItems int `json:"minItems"`
				Items    struct {
					Enum []string `json:"enum"`
				} `json:"items"`
			} `json:"eventTypes"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(doc.Components.Schemas["CreateWebhookRequest"], &create); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(create.Properties.EventTypes.Items.Enum, ports.WebhookEventTypes) || create.Properties.EventTypes.MinItems != 1 {
		t.Errorf("eventTypes documented as %+v", create.Properties.EventTypes)
	}
	if create.Properties.URL.Format != "uri" || create.Properties.URL.Pattern == "" {
		t.Errorf("url documented as %+v", create.Properties.URL)
	}
	if slices.Sort(create.Required); !slices.Equal(create.Required, []string{"eventTypes", "url"}) {
		t.Errorf("required %v", create.Required)
	}
	for schema, fields := range map[string][]string{
		"WebhookEndpointResponse":        {"id", "url", "enabled", "eventTypes", "secret", "createdAt"},
		"CreatedWebhookEndpointResponse": {"id", "url", "enabled", "eventTypes", "secret", "createdAt"},
		"WebhookDeliveryResponse":        deliveryKeys,
	} {
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(doc.Components.Schemas[schema], &s); err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		if got := slices.Sorted(maps.Keys(s.Properties)); !slices.Equal(got, slices.Sorted(slices.Values(fields))) {
			t.Errorf("%s documents %v, want %v", schema, got, fields)
		}
	}
	if !strings.Contains(string(doc.Components.Schemas["WebhookEndpointResponse"]), "whsec_***") {
		t.Errorf("the listing schema does not document the mask: %s", doc.Components.Schemas["WebhookEndpointResponse"])
	}
}
