package e2e

import (
	"testing"
	"time"

	"github.com/postmill/postmill/deploy/app"
)

func pauseBody(text string) map[string]any {
	return map[string]any{"from": "news@" + senderDomain, "to": "someone@rcpt.example", "subject": "Change", "text": text}
}

// TestLimitsAndPauseTakeEffectOnTheNextSend: the send path keeps an organization it read for a while, but
// an admin's change reaches the very next send: an allowance lifted to unlimited lets it through (no more
// 402), a pause refuses it (403) and a resume lets it through again.
func TestLimitsAndPauseTakeEffectOnTheNextSend(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, func(c *app.Config) { c.DefaultMonthly = 1 })
	root := w.MustSignup("root@admin.example", "")
	limits := "/v1/admin/organizations/" + w.owner.orgID + "/limits"

	expect(t, w.send(t, pauseBody("first"), nil), 202)
	errorBody(t, w.send(t, pauseBody("over the allowance"), nil), 402, "plan_limit_exceeded", "")
	expect(t, w.do(req{method: "PUT", path: limits, token: root.access, body: map[string]any{"monthlyLimit": 0, "warmupCap": 0}}), 200)
	expect(t, w.send(t, pauseBody("unlimited now"), nil), 202)

	expect(t, w.post("/v1/admin/organizations/"+w.owner.orgID+"/pause", root.access, nil), 200)
	errorBody(t, w.send(t, pauseBody("paused now"), nil), 403, "org_suspended", "organization sending is paused")
	expect(t, w.post("/v1/admin/organizations/"+w.owner.orgID+"/resume", root.access, nil), 200)
	expect(t, w.send(t, pauseBody("resumed now"), nil), 202)

	expect(t, w.do(req{method: "PUT", path: limits, token: root.access, body: map[string]any{"monthlyLimit": 1, "warmupCap": 0}}), 200)
	errorBody(t, w.send(t, pauseBody("limited again"), nil), 402, "plan_limit_exceeded", "")
}

// TestPauseSeenByAnotherProcess: two processes run the core over one database, each keeping the
// organizations it read for an hour. A pause made through one is seen by the other's next sends within
// moments, because the database announces the change; so are a resume and a new plan.
func TestPauseSeenByAnotherProcess(t *testing.T) {
	t.Parallel()
	var first app.Config
	w := MustMailWorld(t, func(c *app.Config) {
		c.LookupCacheTTL = time.Hour // only the announcement can make the other process forget
		first = *c
	})
	other := first
	other.DataDir = t.TempDir() // each MTA keeps its own journal
	e2 := MustStart(t, other, "all")
	root := w.MustSignup("root@admin.example", "")
	sendVia := func(e *env, text string) resp {
		return e.do(req{method: "POST", path: "/v1/emails", token: w.key, body: pauseBody(text)})
	}
	// until polls the other process until its send answers status.
	until := func(status int, what string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			r := sendVia(e2, what)
			if r.status == status {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the other process still answers %d: %s", what, r.status, r.raw)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	expect(t, sendVia(e2, "cached as active"), 202)
	expect(t, w.post("/v1/admin/organizations/"+w.owner.orgID+"/pause", root.access, nil), 200)
	until(403, "after the pause")
	expect(t, w.post("/v1/admin/organizations/"+w.owner.orgID+"/resume", root.access, nil), 200)
	until(202, "after the resume")

	// A plan change travels the same way: a one-email allowance, long used up, refuses the next send.
	expect(t, w.do(req{method: "PUT", path: "/v1/admin/organizations/" + w.owner.orgID + "/limits", token: root.access,
		body: map[string]any{"monthlyLimit": 1, "warmupCap": 0}}), 200)
	until(402, "after the new plan")
}
