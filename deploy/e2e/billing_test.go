package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/deploy/app"
)

// TestBillingSubscribeChangesLimits is a customer moving between plans of the operator's catalogue: the plan
// and its limits change at once, for the very next send; an unknown plan is a 400 that changes nothing; the
// scopes of SPEC §5 hold; another organization is untouched and cannot be reached.
func TestBillingSubscribeChangesLimits(t *testing.T) {
	plans := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(plans, []byte(`[
		{"id": "free", "name": "Free", "monthlyLimit": 3000},
		{"id": "tiny", "name": "Tiny", "monthlyLimit": 1},
		{"id": "pro", "name": "Pro", "monthlyLimit": 100000, "warmupCap": 5000}
	]`), 0o600); err != nil {
		t.Fatal(err)
	}
	w := MustMailWorld(t, func(c *app.Config) { c.PlansFile = plans })
	_, read := w.MustKey(w.owner, []string{"billing:read"})
	_, write := w.MustKey(w.owner, []string{"billing:write"})
	mail := map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "x", "text": "x", "sandbox": true}

	sub := expect(t, w.get("/v1/billing/subscription", read), 200)
	plan := sub.body["plan"].(map[string]any)
	if plan["id"] != "free" || plan["name"] != "Free" || plan["monthlyLimit"] != float64(3000) || plan["warmupCap"] != nil || sub.body["checkoutUrl"] != nil {
		t.Fatalf("new organization's subscription: %s", sub.raw)
	}
	list := expect(t, w.get("/v1/billing/plans", read), 200)
	if len(list.list) != 3 {
		t.Fatalf("plans: %s", list.raw)
	}

	// Down to one email a month: the next send passes, the one after meets the allowance.
	r := expect(t, w.post("/v1/billing/subscribe", write, map[string]any{"plan": "tiny"}), 200)
	if p := r.body["plan"].(map[string]any); p["id"] != "tiny" || p["monthlyLimit"] != float64(1) {
		t.Fatalf("subscribe tiny: %s", r.raw)
	}
	time.Sleep(1100 * time.Millisecond) // the send path caches an organization for up to a second
	expect(t, w.send(t, mail, nil), 202)
	errorBody(t, w.send(t, mail, nil), 402, "plan_limit_exceeded", "Plan limit reached for emails_sent")

	// Up to pro: sending resumes, and the subscription shows the plan, its cap and the usage.
	r = expect(t, w.post("/v1/billing/subscribe", write, map[string]any{"plan": "pro"}), 200)
	time.Sleep(1100 * time.Millisecond)
	expect(t, w.send(t, mail, nil), 202)
	sub = expect(t, w.get("/v1/billing/subscription", read), 200)
	plan = sub.body["plan"].(map[string]any)
	if plan["id"] != "pro" || plan["monthlyLimit"] != float64(100000) || plan["warmupCap"] != float64(5000) {
		t.Fatalf("after subscribing to pro: %s", sub.raw)
	}
	if used := sub.body["usage"].(map[string]any)["emailsSent"]; used != float64(2) {
		t.Errorf("emailsSent = %v, want 2: %s", used, sub.raw)
	}
	// The organization shows the new limits too.
	org := expect(t, w.get("/v1/organization", w.owner.access), 200)
	if p := org.body["plan"].(map[string]any); p["monthlyLimit"] != float64(100000) {
		t.Errorf("organization plan after subscribing: %s", org.raw)
	}

	// An unknown plan, an empty one and a missing one are 400s that change nothing.
	bad := errorBody(t, w.post("/v1/billing/subscribe", write, map[string]any{"plan": "enterprise"}), 400, "", "Validation failed")
	details, _ := bad["details"].([]any)
	if len(details) != 1 || !strings.Contains(details[0].(map[string]any)["path"].(string), "plan") ||
		!strings.Contains(details[0].(map[string]any)["message"].(string), `unknown plan "enterprise"`) {
		t.Errorf("unknown plan details: %v", bad)
	}
	errorBody(t, w.post("/v1/billing/subscribe", write, map[string]any{"plan": ""}), 400, "", "")
	errorBody(t, w.post("/v1/billing/subscribe", write, map[string]any{}), 400, "", "")
	if p := expect(t, w.get("/v1/billing/subscription", read), 200).body["plan"].(map[string]any); p["id"] != "pro" {
		t.Errorf("a refused subscribe changed the plan to %v", p["id"])
	}

	// Scopes (SPEC §5): read does not write, write does not read, sessions are not keys.
	errorBody(t, w.post("/v1/billing/subscribe", read, map[string]any{"plan": "free"}), 403, "insufficient_scope", "")
	errorBody(t, w.get("/v1/billing/subscription", write), 403, "insufficient_scope", "")
	errorBody(t, w.get("/v1/billing/subscription", w.key), 403, "insufficient_scope", "")
	errorBody(t, w.post("/v1/billing/subscribe", w.owner.access, map[string]any{"plan": "free"}), 401, "", "")

	// Tenancy: another organization is on its own plan, and an organizationId in the body or query is
	// ignored (SPEC §5 rule 1).
	other := w.MustSignup("other@billing.example", "")
	_, otherRead := w.MustKey(other, []string{"billing:read"})
	_, otherWrite := w.MustKey(other, []string{"billing:write"})
	if p := expect(t, w.get("/v1/billing/subscription?organizationId="+w.owner.orgID, otherRead), 200).body["plan"].(map[string]any); p["id"] != "free" {
		t.Errorf("other organization sees plan %v", p["id"])
	}
	expect(t, w.post("/v1/billing/subscribe?organizationId="+w.owner.orgID, otherWrite,
		map[string]any{"plan": "tiny", "organizationId": w.owner.orgID}), 200)
	if p := expect(t, w.get("/v1/billing/subscription", read), 200).body["plan"].(map[string]any); p["id"] != "pro" || p["monthlyLimit"] != float64(100000) {
		t.Errorf("another organization's subscribe changed this one: %v", p)
	}
	if p := expect(t, w.get("/v1/billing/subscription", otherRead), 200).body["plan"].(map[string]any); p["id"] != "tiny" {
		t.Errorf("other organization's own subscribe: %v", p)
	}
}
