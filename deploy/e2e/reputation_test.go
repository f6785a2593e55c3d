package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/deploy/app"
)

// TestReputationAndAutomaticProtection sends real mail to an MX sink, records a spam complaint against it
// and watches the platform react: GET /v1/reputation shows the domain's day with its rates and an at-risk
// status, automatic protection pauses the organization's broadcasts and says so on GET /v1/organization,
// transactional sending keeps going, and an admin lifts the pause. The window's bounds, and tenancy on
// every route, are checked too.
func TestReputationAndAutomaticProtection(t *testing.T) {
	w := MustMailWorld(t, func(c *app.Config) {
		c.Reputation.MinVolume, c.Reputation.Interval = 3, 200*time.Millisecond
	})
	var ids []string
	for range 3 {
		r := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "News", "text": "x"}, nil), 202)
		ids = append(ids, r.str("id"))
	}
	for _, id := range ids {
		w.waitStatus(t, id, "delivered", 30*time.Second)
	}
	rep := expect(t, w.get("/v1/reputation?days=7", w.owner.access), 200)
	domains, _ := rep.body["domains"].([]any)
	if len(domains) != 1 {
		t.Fatalf("reputation before the complaint: %s", rep.raw)
	}
	d := domains[0].(map[string]any)
	total := d["total"].(map[string]any)
	if d["domain"] != senderDomain || d["status"] != "good" || total["sent"] != float64(3) || total["delivered"] != float64(3) || total["complained"] != float64(0) {
		t.Fatalf("reputation before the complaint: %s", rep.raw)
	}
	if th := rep.body["thresholds"].(map[string]any); th["complaintAtRisk"] != 0.003 || th["complaintWarning"] != 0.001 {
		t.Errorf("thresholds: %v", th)
	}

	// A recipient reports the first message as spam (the row the inbound tier's ARF parser writes).
	if _, err := w.app.Store().Pool().Exec(context.Background(), `INSERT INTO complaints
		(id, organization_id, message_id, recipient_id, address, feedback_type, created_at)
		SELECT gen_random_uuid(), organization_id, id, gen_random_uuid(), 'a@rcpt.example', 'abuse', now() FROM messages WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	var org resp
	for {
		org = expect(t, w.get("/v1/organization", w.owner.access), 200)
		if org.body["broadcastsPaused"] == true || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if org.body["broadcastsPaused"] != true || !strings.Contains(org.str("broadcastsPausedReason"), "complaint rate 33.33%") || org.str("broadcastsPausedAt") == "" {
		t.Fatalf("automatic protection did not pause broadcasts: %s", org.raw)
	}
	rep = expect(t, w.get("/v1/reputation?days=1", w.owner.access), 200)
	d = rep.body["domains"].([]any)[0].(map[string]any)
	if d["status"] != "at_risk" || d["total"].(map[string]any)["complained"] != float64(1) {
		t.Errorf("reputation after the complaint: %s", rep.raw)
	}
	if p := rep.body["protection"].(map[string]any); p["broadcastsPaused"] != true {
		t.Errorf("reputation's protection: %v", p)
	}
	days := d["days"].([]any)
	if len(days) != 1 || days[0].(map[string]any)["date"] != time.Now().UTC().Format(time.DateOnly) {
		t.Errorf("days: %v", days)
	}
	// Transactional sending keeps going.
	expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "Receipt", "text": "x"}, nil), 202)

	// The window of SPEC §8.
	for _, q := range []string{"0", "91", "-1", "abc"} {
		errorBody(t, w.get("/v1/reputation?days="+q, w.owner.access), 400, "", "")
	}
	expect(t, w.get("/v1/reputation?days=90", w.owner.access), 200)
	// Sessions only: an API key is refused.
	errorBody(t, w.get("/v1/reputation", w.key), 401, "", "")

	// Tenancy: another organization sees none of it, and is not paused.
	other := w.MustSignup("other@reputation.example", "")
	orep := expect(t, w.get("/v1/reputation?days=90", other.access), 200)
	if ds, _ := orep.body["domains"].([]any); len(ds) != 0 || orep.body["protection"].(map[string]any)["broadcastsPaused"] != false {
		t.Errorf("another organization's reputation: %s", orep.raw)
	}
	if o := expect(t, w.get("/v1/organization", other.access), 200); o.body["broadcastsPaused"] != false {
		t.Errorf("another organization was paused: %s", o.raw)
	}

	// The admin view: the organization with its volume, rates and status, and the queue per destination.
	errorBody(t, w.get("/v1/admin/platform", w.owner.access), 403, "", "")
	root := w.MustSignup("root@admin.example", "")
	view := expect(t, w.get("/v1/admin/platform", root.access), 200)
	var mine map[string]any
	for _, o := range view.body["organizations"].([]any) {
		if o.(map[string]any)["id"] == w.owner.orgID {
			mine = o.(map[string]any)
		}
	}
	if mine == nil || mine["sent"].(float64) < 3 || mine["complained"] != float64(1) || mine["status"] != "at_risk" ||
		mine["protection"].(map[string]any)["broadcastsPaused"] != true || view.body["windowSeconds"] != float64(86400) {
		t.Errorf("admin view of the organization: %v (%s)", mine, view.raw)
	}
	if _, ok := view.body["queues"].([]any); !ok {
		t.Errorf("admin view without queues: %s", view.raw)
	}

	// The admin route: a member may not lift the pause; an admin may.
	resume := "/v1/admin/organizations/" + w.owner.orgID + "/broadcasts/resume"
	errorBody(t, w.post(resume, w.owner.access, nil), 403, "", "")
	if r := expect(t, w.post(resume, root.access, nil), 200); r.body["broadcastsPaused"] != false {
		t.Errorf("resume: %s", r.raw)
	}
	errorBody(t, w.post("/v1/admin/organizations/0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d17/broadcasts/resume", root.access, nil), 404, "", "")
}
