package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/deploy/app"
)

const simDomain = "simulator.postmill.test"

// TestSimulatorAddresses sends to each mailbox simulator address through the real platform and checks
// what a user building a webhook handler would see: the message's status and timeline, the bounce and
// complaint records, the suppressions, and the signed webhooks. Nothing but the simulator can take mail
// here: the relay is a closed port, no MX address is allow-listed, and the test DNS server knows nothing
// of simulator.postmill.test. The complaint goes back as an RFC 5965 report over SMTP to the platform's
// own MX listener.
func TestSimulatorAddresses(t *testing.T) {
	t.Parallel()
	rcv := MustReceiver(t)
	w := MustMailWorld(t, func(c *app.Config) {
		c.MTARelay = freeAddr(t)
		c.MTAAllowNets = nil
		c.MTAMaxAge = 3 * time.Second // MustMailWorld's retry base is 200 ms: delay@ fails within seconds
		c.WebhookAllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.WebhookSchedule = []time.Duration{300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}
	})
	w.dns.SetA("hooks.example", netip.MustParseAddr("127.0.0.1"))
	_, w.key = w.MustKey(w.owner, []string{"*"})
	_, secret := w.mustEndpoint(t, "http://hooks.example:"+rcv.port()+"/sim", "email.sent", "email.delivered",
		"email.delivery_delayed", "email.bounced", "email.complained", "email.failed")

	send := func(to string) string {
		t.Helper()
		return expect(t, w.send(t, map[string]any{"from": "Ada <ada@" + senderDomain + ">", "to": to,
			"subject": "Simulated " + to, "text": "x"}, nil), 202).str("id")
	}
	ids := map[string]string{}
	for _, local := range []string{"delivered", "bounce", "soft-bounce", "complaint", "delay"} {
		ids[local] = send(local + "@" + simDomain)
	}

	t.Run("delivered", func(t *testing.T) {
		m := w.waitStatus(t, ids["delivered"], "delivered", 30*time.Second)
		assertTimeline(t, m, "sent", "delivered")
		if r, _ := eventResponse(m, "delivered"); r != "250 2.0.0 Ok: delivered to the Postmill simulator" {
			t.Errorf("delivered providerResponse %q", r)
		}
		simHooks(t, rcv, secret, ids["delivered"], map[string]int{"email.sent": 1, "email.delivered": 1})
	})

	t.Run("bounce", func(t *testing.T) {
		id := ids["bounce"]
		m := w.waitStatus(t, id, "bounced", 30*time.Second)
		assertTimeline(t, m, "bounced")
		const reply = "550 5.1.1 Mailbox does not exist (simulated hard bounce)"
		if r, _ := eventResponse(m, "bounced"); r != reply {
			t.Errorf("bounced providerResponse %q", r)
		}
		var found bool
		for _, b := range pageData(t, expect(t, w.get("/v1/bounces", w.key), 200)) {
			if b["messageId"] == id {
				found = true
				if b["type"] != "hard" || b["status"] != "5.1.1" || b["address"] != "bounce@"+simDomain {
					t.Errorf("bounce record %v", b)
				}
			}
		}
		if !found {
			t.Error("no bounce record for the message")
		}
		assertSuppressed(t, w, "bounce@"+simDomain, "bounce")
		hooks := simHooks(t, rcv, secret, id, map[string]int{"email.bounced": 1, "email.sent": 0, "email.delivered": 0})
		if d := hookData(t, hooks["email.bounced"][0]); d["provider_response"] != reply {
			t.Errorf("email.bounced data %v", d)
		}
		// A plus tag is a fresh address with the same behaviour.
		again := send("bounce+again@" + simDomain)
		w.waitStatus(t, again, "bounced", 30*time.Second)
		assertSuppressed(t, w, "bounce+again@"+simDomain, "bounce")
	})

	t.Run("soft-bounce", func(t *testing.T) {
		m := w.waitStatus(t, ids["soft-bounce"], "delivered", 30*time.Second)
		tl := assertTimeline(t, m, "delivery_delayed", "delivery_delayed", "sent", "delivered")
		if n := count(tl, "delivery_delayed"); n != 2 {
			t.Errorf("timeline %v: %d deferrals, want 2", tl, n)
		}
		for _, e := range m.body["events"].([]any) {
			ev := e.(map[string]any)
			if r := fmt.Sprint(ev["providerResponse"]); ev["type"] == "delivery_delayed" && !strings.HasPrefix(r, "450 4.2.2 Mailbox full") {
				t.Errorf("delivery_delayed providerResponse %q (timeline %v)", r, tl)
			}
		}
		simHooks(t, rcv, secret, ids["soft-bounce"], map[string]int{"email.delivery_delayed": 2, "email.sent": 1, "email.delivered": 1})
		// Each 450 is a soft bounce in /v1/bounces, with its class, and suppresses nothing.
		var soft int
		for _, b := range pageData(t, expect(t, w.get("/v1/bounces", w.key), 200)) {
			if b["messageId"] != ids["soft-bounce"] {
				continue
			}
			soft++
			if b["type"] != "soft" || b["class"] != "mailbox_full" || b["status"] != "4.2.2" || b["action"] != "delayed" {
				t.Errorf("soft bounce record %v", b)
			}
		}
		if soft != 2 {
			t.Errorf("%d soft bounce records for two 450 replies, want 2", soft)
		}
	})

	t.Run("complaint", func(t *testing.T) {
		id := ids["complaint"]
		m := w.waitStatus(t, id, "complained", 30*time.Second)
		assertTimeline(t, m, "sent", "delivered", "complained")
		rcpt := w.recipientID(t, id, "complaint@"+simDomain)
		complaints := pageData(t, expect(t, w.get("/v1/complaints", w.key), 200))
		if len(complaints) != 1 {
			t.Fatalf("complaints: %v", complaints)
		}
		for k, want := range map[string]any{"messageId": id, "recipientId": rcpt, "address": "complaint@" + simDomain,
			"feedbackType": "abuse", "userAgent": "Postmill-Simulator/1", "reportedDomain": senderDomain, "sourceIp": "127.0.0.1"} {
			if complaints[0][k] != want {
				t.Errorf("complaint %s = %v, want %v", k, complaints[0][k], want)
			}
		}
		assertSuppressed(t, w, "complaint@"+simDomain, "complaint")
		hooks := simHooks(t, rcv, secret, id, map[string]int{"email.sent": 1, "email.delivered": 1, "email.complained": 1})
		if d := hookData(t, hooks["email.complained"][0]); d["recipient_id"] != rcpt {
			t.Errorf("email.complained data %v, want recipient %s", d, rcpt)
		}
	})

	t.Run("delay", func(t *testing.T) {
		m := w.waitStatus(t, ids["delay"], "failed", 30*time.Second)
		tl := assertTimeline(t, m, "delivery_delayed", "failed")
		if r, _ := eventResponse(m, "failed"); !strings.HasPrefix(r, "451 4.7.1 Greylisted") {
			t.Errorf("failed providerResponse %q", r)
		}
		if contains(tl, "sent") || contains(tl, "delivered") {
			t.Errorf("timeline %v", tl)
		}
		simHooks(t, rcv, secret, ids["delay"], map[string]int{"email.delivery_delayed": count(tl, "delivery_delayed"),
			"email.failed": 1, "email.delivered": 0})
	})

	// The simulator's addresses are recipients only: the sender still needs a verified domain of its own.
	b := errorBody(t, w.send(t, map[string]any{"from": "delivered@" + simDomain, "to": "delivered@" + simDomain,
		"subject": "x", "text": "x"}, nil), 400, "", "")
	if !strings.Contains(fmt.Sprint(b["message"]), simDomain) {
		t.Errorf("sending from the simulator's domain: %v", b)
	}
}

// count is how many times s occurs in list.
func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// assertTimeline checks that the message's timeline holds want in that order (other events may come
// between, such as queued first) and that want's last event is the timeline's last; it returns the
// timeline.
func assertTimeline(t *testing.T, m resp, want ...string) []string {
	t.Helper()
	tl := timeline(m)
	i := 0
	for _, typ := range tl {
		if i < len(want) && typ == want[i] {
			i++
		}
	}
	if i < len(want) || tl[len(tl)-1] != want[len(want)-1] {
		t.Errorf("timeline %v, want %v in order, ending the timeline", tl, want)
	}
	return tl
}

// assertSuppressed checks that the organization suppresses address with reason and that a send to it is
// refused.
func assertSuppressed(t *testing.T, w *mailWorld, address, reason string) {
	t.Helper()
	found := false
	for _, s := range expect(t, w.get("/v1/suppressions", w.key), 200).list {
		sp := s.(map[string]any)
		if sp["address"] == address {
			found = true
			if sp["reason"] != reason {
				t.Errorf("suppression of %s: reason %v, want %s", address, sp["reason"], reason)
			}
		}
	}
	if !found {
		t.Errorf("%s is not suppressed", address)
	}
	errorBody(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": address, "subject": "Again", "text": "x"}, nil),
		400, "", "recipient suppressed: "+address)
}

// simHooks waits until the webhooks about message id reached the receiver in the counts of want (a count
// of 0: none at all), checks each one's signature with secret as docs/webhooks.md describes, and returns
// them by event type.
func simHooks(t *testing.T, rcv *receiver, secret, id string, want map[string]int) map[string][]hookRequest {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string][]hookRequest{}
		for _, q := range rcv.waitFor(t, "/sim", "", 0, time.Second) {
			if hookData(t, q)["message_id"] == id {
				typ := q.header.Get("X-Service-Event")
				got[typ] = append(got[typ], q)
			}
		}
		done := true
		for typ, n := range want {
			if len(got[typ]) < n || (n == 0 && len(got[typ]) > 0) {
				done = false
			}
		}
		if done {
			// Let a webhook that should not come have its chance to arrive.
			time.Sleep(300 * time.Millisecond)
			for _, q := range rcv.waitFor(t, "/sim", "", 0, time.Second) {
				if typ := q.header.Get("X-Service-Event"); hookData(t, q)["message_id"] == id && want[typ] == 0 {
					if _, listed := want[typ]; listed {
						t.Errorf("unexpected %s webhook: %s", typ, q.body)
					}
				}
			}
			for typ, qs := range got {
				for _, q := range qs {
					if err := verifySignature(secret, q, time.Now()); err != nil {
						t.Errorf("%s webhook: %v", typ, err)
					}
				}
			}
			return got
		}
		if time.Now().After(deadline) {
			counts := map[string]int{}
			for typ, qs := range got {
				counts[typ] = len(qs)
			}
			t.Fatalf("webhooks about %s: %v, want %v", id, counts, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// verifySignature is docs/webhooks.md's check of x-service-signature: v1 = hex(HMAC-SHA256(secret,
// "<t>.<event id>.<raw body>")), t within 300 seconds, and the event id header equal to the body's id.
func verifySignature(secret string, q hookRequest, now time.Time) error {
	var ts int64
	var sigs []string
	for _, part := range strings.Split(q.header.Get("X-Service-Signature"), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts, _ = strconv.ParseInt(v, 10, 64)
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == 0 || len(sigs) == 0 {
		return errors.New("malformed signature header")
	}
	if d := now.Unix() - ts; d > 300 || d < -300 {
		return fmt.Errorf("timestamp %d is %d s from now", ts, d)
	}
	var body struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(q.body, &body); err != nil || body.ID != q.header.Get("X-Service-Event-Id") {
		return fmt.Errorf("event id header %q, body id %q (%v)", q.header.Get("X-Service-Event-Id"), body.ID, err)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10) + "." + body.ID + "."))
	mac.Write(q.body)
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, mac.Sum(nil)) {
			return nil
		}
	}
	return errors.New("signature mismatch")
}
