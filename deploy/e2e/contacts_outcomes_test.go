package e2e

import (
	"testing"
	"time"

	"github.com/postmill/postmill/deploy/app"
)

// TestContactsFollowDeliveryOutcomes sends to contacts at the mailbox simulator through the real platform
// and checks what the delivery, bounce and complaint events did to them: lastSentAt once a message left,
// bounced after a permanent bounce, and consent withdrawn (source complaint) after a complaint.
func TestContactsFollowDeliveryOutcomes(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, func(c *app.Config) {
		c.MTARelay = freeAddr(t)
		c.MTAAllowNets = nil
	})
	_, w.key = w.MustKey(w.owner, []string{"*"})
	ids := map[string]string{}
	for _, local := range []string{"delivered", "bounce", "complaint"} {
		c := expect(t, w.post("/v1/contacts", w.key, map[string]any{"email": local + "@" + simDomain}), 201)
		ids[local] = c.str("id")
	}
	for local, status := range map[string]string{"delivered": "delivered", "bounce": "bounced", "complaint": "complained"} {
		id := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": local + "@" + simDomain,
			"subject": "Outcome " + local, "text": "x"}, nil), 202).str("id")
		w.waitStatus(t, id, status, 30*time.Second)
	}
	get := func(local string) resp { return expect(t, w.get("/v1/contacts/"+ids[local], w.key), 200) }
	if c := get("delivered"); c.body["lastSentAt"] == nil || c.body["bounced"] != false || c.str("consentStatus") != "subscribed" {
		t.Errorf("delivered contact: %s", c.raw)
	}
	if c := get("bounce"); c.body["bounced"] != true {
		t.Errorf("bounced contact: %s", c.raw)
	}
	if c := get("complaint"); c.str("consentStatus") != "unsubscribed" || c.str("consentSource") != "complaint" || c.body["lastSentAt"] == nil {
		t.Errorf("complaining contact: %s", c.raw)
	}
	// A bounced or complaining contact is out of every segment of subscribed, deliverable contacts.
	p := expect(t, w.post("/v1/segments/preview", w.key, map[string]any{"rule": map[string]any{"op": "and", "rules": []any{
		map[string]any{"field": "bounced", "cmp": "eq", "value": false},
		map[string]any{"field": "consentStatus", "cmp": "eq", "value": "subscribed"}}}}), 200)
	if p.body["count"] != 1.0 {
		t.Errorf("deliverable contacts: %s", p.raw)
	}
}
