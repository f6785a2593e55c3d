package e2e

import (
	"testing"
)

// TestSuppressionsAPI walks SPEC §4.5's suppression routes: create with defaults, an address and a bare
// domain, the send path refusing both, delete, scope rules, global suppressions through the admin routes,
// and tenancy.
func TestSuppressionsAPI(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	_, key := w.MustKey(w.owner, []string{"emails:send", "suppressions:read", "suppressions:write"})
	_, readOnly := w.MustKey(w.owner, []string{"suppressions:read"})
	send := func(to string) resp {
		return w.do(req{method: "POST", path: "/v1/emails", token: key, body: map[string]any{
			"from": "ada@" + senderDomain, "to": to, "subject": "x", "text": "x", "sandbox": true}})
	}

	s := expect(t, w.post("/v1/suppressions", key, map[string]any{"address": "Blocked@Rcpt.Example"}), 201)
	if s.str("address") != "blocked@rcpt.example" || s.str("scope") != "tenant" || s.str("reason") != "manual" || s.str("id") == "" {
		t.Fatalf("created suppression: %s", s.raw)
	}
	again := expect(t, w.post("/v1/suppressions", key, map[string]any{"address": "blocked@rcpt.example"}), 201)
	if again.str("id") != s.str("id") {
		t.Errorf("creating the same suppression twice made a second row: %s", again.raw)
	}
	d := expect(t, w.post("/v1/suppressions", key, map[string]any{"address": "walled.example", "scope": "domain", "reason": "invalid"}), 201)
	errorBody(t, send("blocked@rcpt.example"), 400, "", "recipient suppressed: blocked@rcpt.example")
	errorBody(t, send("anyone@walled.example"), 400, "", "recipient suppressed: anyone@walled.example")
	expect(t, send("free@rcpt.example"), 202)

	// Scope rules and validation.
	errorBody(t, w.post("/v1/suppressions", key, map[string]any{"address": "walled.example", "scope": "recipient"}), 400, "", "Validation failed")
	errorBody(t, w.post("/v1/suppressions", key, map[string]any{"address": "a@b.example", "scope": "domain"}), 400, "", "Validation failed")
	errorBody(t, w.post("/v1/suppressions", key, map[string]any{"address": "a@b.example", "scope": "planet"}), 400, "", "Validation failed")
	errorBody(t, w.post("/v1/suppressions", key, map[string]any{"address": ""}), 400, "", "Validation failed")
	expect(t, w.post("/v1/suppressions", key, map[string]any{"address": "a@b.example", "scope": "global"}), 403)
	expect(t, w.post("/v1/suppressions", readOnly, map[string]any{"address": "a@b.example"}), 403)

	list := expect(t, w.get("/v1/suppressions", readOnly), 200)
	if len(list.list) != 2 {
		t.Fatalf("list: %s", list.raw)
	}

	// Tenancy: another organization neither sees nor deletes them, and may still send to the address.
	other := w.MustSignup("other@"+randomHex(t, 4)+".example", "")
	_, otherKey := w.MustKey(other, []string{"suppressions:read", "suppressions:write"})
	if l := expect(t, w.get("/v1/suppressions", otherKey), 200); len(l.list) != 0 {
		t.Fatalf("other org lists %s", l.raw)
	}
	if r := expect(t, w.del("/v1/suppressions/"+s.str("id"), otherKey), 200); r.body["deleted"] != false {
		t.Fatalf("other org deleted: %s", r.raw)
	}

	if r := expect(t, w.del("/v1/suppressions/"+d.str("id"), key), 200); r.body["deleted"] != true {
		t.Fatalf("delete: %s", r.raw)
	}
	if r := expect(t, w.del("/v1/suppressions/"+d.str("id"), key), 200); r.body["deleted"] != false {
		t.Fatalf("second delete: %s", r.raw)
	}
	// An id that is not a UUID is refused before the handler, as on every other {id} route.
	requireDetail(t, w.del("/v1/suppressions/abc", key), "id")
	expect(t, send("anyone@walled.example"), 202)

	// Global suppressions belong to platform admins and apply to every organization.
	root := w.MustSignup("root@admin.example", "")
	expect(t, w.post("/v1/admin/suppressions", w.owner.access, map[string]any{"address": "trap@rcpt.example"}), 403)
	g := expect(t, w.post("/v1/admin/suppressions", root.access, map[string]any{"address": "trap@rcpt.example", "reason": "invalid"}), 201)
	if g.str("scope") != "global" {
		t.Fatalf("admin suppression: %s", g.raw)
	}
	errorBody(t, send("trap@rcpt.example"), 400, "", "recipient suppressed: trap@rcpt.example")
	if l := expect(t, w.get("/v1/suppressions", key), 200); len(l.list) != 1 {
		t.Errorf("tenant list shows global rows: %s", l.raw)
	}
	if r := expect(t, w.del("/v1/admin/suppressions/"+g.str("id"), root.access), 200); r.body["deleted"] != true {
		t.Fatalf("admin delete: %s", r.raw)
	}
	expect(t, send("trap@rcpt.example"), 202)
}
