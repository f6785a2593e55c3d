package e2e

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// Segments end to end (SPEC §4.9): CRUD, the rule language's matches and refusals, preview counts and
// samples, tenancy (a rule naming another organization's topic key matches nothing), scopes, and a seeded
// randomized run of rules through the compiler and the SQL builder against PostgreSQL.

var segmentScopes = []string{"segments:read", "segments:write", "contacts:write", "topics:write"}

func TestSegmentsRulesPreviewAndTenancy(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("owner-"+randomHex(t, 4)+"@example.test", "")
	b := e.MustSignup("other-"+randomHex(t, 4)+"@example.test", "")
	_, key := e.MustKey(a, segmentScopes)
	_, otherKey := e.MustKey(b, segmentScopes)

	expect(t, e.post("/v1/contacts/import", key, map[string]any{"contacts": []any{
		map[string]any{"email": "ann@example.test", "firstName": "Ann", "locale": "fr", "properties": map[string]any{"seats": 12, "plan": "pro"}},
		map[string]any{"email": "bob_b@example.test", "firstName": "Bob", "properties": map[string]any{"seats": "9", "plan": "free"}},
		map[string]any{"email": "cat@example.test", "properties": map[string]any{"seats": "many"}, "consentStatus": "unsubscribed"},
	}}), 200)
	topic := expect(t, e.post("/v1/topics", key, map[string]any{"key": "news", "name": "News"}), 201)
	expect(t, e.post("/v1/topics/"+topic.str("id")+"/subscribe", key, map[string]any{"email": "ann@example.test"}), 200)
	// The other organization has a topic "weekly" with a subscriber of its own.
	ot := expect(t, e.post("/v1/topics", otherKey, map[string]any{"key": "weekly", "name": "Weekly"}), 201)
	expect(t, e.post("/v1/topics/"+ot.str("id")+"/subscribe", otherKey, map[string]any{"email": "ann@example.test"}), 200)

	count := func(rule string) float64 {
		t.Helper()
		r := expect(t, e.post("/v1/segments/preview", key, json.RawMessage(`{"rule":`+rule+`}`)), 200)
		n, _ := r.body["count"].(float64)
		if sample, _ := r.body["sample"].([]any); len(sample) != int(n) && len(sample) != 25 {
			t.Fatalf("%s: sample of %d for count %v", rule, len(sample), n)
		}
		return n
	}
	for rule, want := range map[string]float64{
		`{"field":"properties.seats","cmp":"gt","value":10}`:                      1,
		`{"field":"properties.seats","cmp":"gte","value":9}`:                      2,
		`{"field":"email","cmp":"contains","value":"b_b"}`:                        1,
		`{"field":"email","cmp":"contains","value":"%"}`:                          0,
		`{"field":"email","cmp":"eq","value":"ANN@example.test"}`:                 1,
		`{"field":"topic.news","cmp":"eq"}`:                                       1,
		`{"field":"topic.weekly","cmp":"exists"}`:                                 0,
		`{"field":"topic.news","cmp":"exists","value":false}`:                     2,
		`{"field":"locale","cmp":"eq","value":null}`:                              2,
		`{"field":"consentStatus","cmp":"in","value":["unsubscribed","pending"]}`: 1,
		`{"field":"email","cmp":"in","value":[]}`:                                 0,
		`{"field":"createdAt","cmp":"gte","value":{"daysAgo":1}}`:                 3,
		`{"field":"lastSentAt","cmp":"exists"}`:                                   0,
		`{"field":"bounced","cmp":"eq","value":false}`:                            3,
		`{"op":"or","rules":[{"field":"firstName","cmp":"eq","value":"Bob"},{"op":"and","rules":[{"field":"properties.plan","cmp":"eq","value":"pro"},{"field":"topic.news","cmp":"neq","value":"pending"}]}]}`: 2,
	} {
		if got := count(rule); got != want {
			t.Errorf("%s: count %v, want %v", rule, got, want)
		}
	}
	deep := `{"field":"email","cmp":"exists"}`
	for range 5 {
		deep = `{"op":"and","rules":[` + deep + `]}`
	}
	for rule, path := range map[string]string{
		`{"field":"password","cmp":"eq","value":"x"}`:                              "rule.field",
		`{"field":"bounced","cmp":"gt","value":true}`:                              "rule.cmp",
		`{"field":"email","cmp":"eq","value":"` + strings.Repeat("a", 1025) + `"}`: "rule.value",
		`{"field":"createdAt","cmp":"gt","value":{"daysAgo":40000}}`:               "rule.value.daysAgo",
		`{"field":"firstName","cmp":"exists","value":true}`:                        "rule.value",
		`{"field":"createdAt","cmp":"eq","value":{"daysAgo":1}}`:                   "rule.value",
		`{"op":"nand","rules":[]}`:                                                 "rule.op",
		deep:                                                                       "rule.rules.0.rules.0.rules.0.rules.0.rules.0",
		`{"field":"email","cmp":"eq","value":"x'); DROP TABLE contacts; --"}`:      "",
	} {
		r := e.post("/v1/segments/preview", key, json.RawMessage(`{"rule":`+rule+`}`))
		if path == "" {
			expect(t, r, 200)
			continue
		}
		requireDetail(t, r, path)
	}

	seg := expect(t, e.post("/v1/segments", key, map[string]any{"name": "Pro", "rule": map[string]any{
		"field": "properties.plan", "cmp": "eq", "value": "pro"}}), 201)
	id := seg.str("id")
	if seg.body["rule"].(map[string]any)["value"] != "pro" {
		t.Fatalf("segment: %s", seg.raw)
	}
	requireDetail(t, e.post("/v1/segments", key, map[string]any{"name": "No rule"}), "rule")
	requireDetail(t, e.post("/v1/segments", key, map[string]any{"rule": map[string]any{"field": "email", "cmp": "exists"}}), "name")
	p := expect(t, e.get("/v1/segments/"+id+"/preview?limit=1", key), 200)
	if p.body["count"] != 1.0 || len(p.body["sample"].([]any)) != 1 {
		t.Fatalf("saved preview: %s", p.raw)
	}
	requireDetail(t, e.get("/v1/segments/"+id+"/preview?limit=101", key), "limit")
	u := expect(t, e.patch("/v1/segments/"+id, key, map[string]any{"rule": map[string]any{"field": "properties.seats", "cmp": "lt", "value": 100}}), 200)
	if u.str("name") != "Pro" {
		t.Fatalf("patch: %s", u.raw)
	}
	if p := expect(t, e.get("/v1/segments/"+id+"/preview", key), 200); p.body["count"] != 2.0 {
		t.Fatalf("preview after patch: %s", p.raw)
	}
	requireDetail(t, e.patch("/v1/segments/"+id, key, map[string]any{"rule": map[string]any{"field": "nope", "cmp": "eq", "value": 1}}), "rule.field")

	// Tenancy: another organization sees none of it, and its rules reach none of these contacts.
	for _, r := range []resp{
		e.get("/v1/segments/"+id, otherKey),
		e.patch("/v1/segments/"+id, otherKey, map[string]any{"name": "X"}),
		e.del("/v1/segments/"+id, otherKey),
		e.get("/v1/segments/"+id+"/preview", otherKey),
	} {
		errorBody(t, r, 404, "", "")
	}
	if l := expect(t, e.get("/v1/segments", otherKey), 200); len(l.list) != 0 {
		t.Fatalf("other org's segments: %s", l.raw)
	}
	r := expect(t, e.post("/v1/segments/preview", otherKey, json.RawMessage(`{"rule":{"field":"topic.news","cmp":"exists"}}`)), 200)
	if r.body["count"] != 0.0 {
		t.Fatalf("a rule on another organization's topic key matched: %s", r.raw)
	}
	r = expect(t, e.post("/v1/segments/preview", otherKey, json.RawMessage(`{"rule":{"field":"email","cmp":"exists"}}`)), 200)
	if r.body["count"] != 1.0 {
		t.Fatalf("other org's preview: %s", r.raw)
	}

	// Scopes.
	_, readOnly := e.MustKey(a, []string{"segments:read"})
	_, writeOnly := e.MustKey(a, []string{"segments:write"})
	errorBody(t, e.post("/v1/segments", readOnly, map[string]any{"name": "x", "rule": map[string]any{"field": "email", "cmp": "exists"}}), 403, "insufficient_scope", "")
	errorBody(t, e.get("/v1/segments/"+id, writeOnly), 403, "insufficient_scope", "")
	errorBody(t, e.post("/v1/segments/preview", writeOnly, map[string]any{"rule": map[string]any{"field": "email", "cmp": "exists"}}), 403, "insufficient_scope", "")
	expect(t, e.get("/v1/segments", writeOnly), 200)
	expect(t, e.del("/v1/segments/"+id, key), 200)
	errorBody(t, e.get("/v1/segments/"+id, key), 404, "", "")

	checkOffsetList(t, e, "/v1/segments", key, otherKey, func(token string, _ int) string {
		return expect(t, e.post("/v1/segments", token, map[string]any{"name": "Page", "rule": map[string]any{"field": "email", "cmp": "exists"}}), 201).str("id")
	})
}

// randomRule writes a random rule, mostly within the language and sometimes outside it.
func randomRule(r *rand.Rand, depth int) any {
	if depth < 6 && r.IntN(3) == 0 {
		n := r.IntN(4)
		rules := make([]any, n)
		for i := range rules {
			rules[i] = randomRule(r, depth+1)
		}
		return map[string]any{"op": []string{"and", "or", "xor"}[r.IntN(3)], "rules": rules}
	}
	fields := []string{"email", "firstName", "lastName", "locale", "timezone", "source", "consentStatus", "bounced",
		"lastActiveAt", "lastSentAt", "createdAt", "properties.seats", "properties.plan", "properties.a-b_C",
		"topic.news", "topic.other", "nope", "properties.", "topic.Bad"}
	cmps := []string{"eq", "neq", "contains", "in", "gt", "gte", "lt", "lte", "exists", "like"}
	values := []any{nil, "x", "", "%_\\", "2026-01-01T00:00:00Z", "2026-01-01", "subscribed", "pending", 0, -3.5, 1e300,
		true, false, map[string]any{"daysAgo": r.IntN(40000)}, map[string]any{"daysAgo": "x"}, []any{}, []any{"a", 1},
		[]any{true}, map[string]any{"x": 1}, strings.Repeat("é", 1100), "'; SELECT pg_sleep(10); --"}
	c := map[string]any{"field": fields[r.IntN(len(fields))], "cmp": cmps[r.IntN(len(cmps))]}
	if r.IntN(5) != 0 {
		c["value"] = values[r.IntN(len(values))]
	}
	return c
}

// TestSegmentsRandomRulesNeverFail sends seeded random rules through the compiler, the SQL builder and
// PostgreSQL: each is either refused with a 400 or answered, never a 500.
func TestSegmentsRandomRulesNeverFail(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("owner-"+randomHex(t, 4)+"@example.test", "")
	_, key := e.MustKey(a, segmentScopes)
	expect(t, e.post("/v1/contacts/import", key, map[string]any{"csv": "email,seats,plan\na@x.test,12,pro\nb@x.test,many,\nc@x.test,-1.5,free\n"}), 200)
	expect(t, e.post("/v1/topics", key, map[string]any{"key": "news", "name": "News"}), 201)
	r := rand.New(rand.NewPCG(20261126, 1))
	answered, refused := 0, 0
	for i := range 400 {
		rule := randomRule(r, 1)
		res := e.post("/v1/segments/preview", key, map[string]any{"rule": rule})
		switch res.status {
		case 200:
			answered++
		case 400:
			refused++
		default:
			raw, _ := json.Marshal(rule)
			t.Fatalf("rule %d %s: %d %s", i, raw, res.status, res.raw)
		}
	}
	if answered < 40 || refused < 40 {
		t.Fatalf("%d answered, %d refused: the generator lost its balance", answered, refused)
	}
	t.Logf("%d answered, %d refused", answered, refused)
}
