package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBounceClassSpamBlockBouncesWithoutSuppressing: an SMTP-time 5xx that names a blocklist bounces the
// recipient and is listed and sent to webhooks as spam_block, but does not suppress the address: the next
// send to it is accepted. A user-unknown refusal beside it is bad_mailbox and suppresses.
func TestBounceClassSpamBlockBouncesWithoutSuppressing(t *testing.T) {
	t.Parallel()
	w, rcv := mustFeedbackWorld(t, "")
	w.mustEndpoint(t, "http://hooks.example:"+rcv.port()+"/bounced", "email.bounced")
	w.mx.setBlock("blocked@rcpt.example")
	w.mx.setReject("gone@rcpt.example")

	blocked := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "blocked@rcpt.example",
		"subject": "Blocked", "text": "x"}, nil), 202).str("id")
	gone := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "gone@rcpt.example",
		"subject": "Gone", "text": "x"}, nil), 202).str("id")
	w.waitStatus(t, blocked, "bounced", 30*time.Second)
	w.waitStatus(t, gone, "bounced", 30*time.Second)

	classes := map[string]any{}
	for _, b := range pageData(t, expect(t, w.get("/v1/bounces", w.key), 200)) {
		classes[fmt.Sprint(b["address"])] = b["class"]
		if b["type"] != "hard" {
			t.Errorf("bounce %v: want type hard", b)
		}
	}
	if classes["blocked@rcpt.example"] != "spam_block" || classes["gone@rcpt.example"] != "bad_mailbox" {
		t.Errorf("bounce classes %v, want spam_block for blocked@ and bad_mailbox for gone@", classes)
	}

	hookClasses := map[string]any{}
	for _, q := range rcv.waitFor(t, "/bounced", "email.bounced", 2, 30*time.Second) {
		data := hookData(t, q)
		hookClasses[fmt.Sprint(data["message_id"])] = data["bounce_class"]
	}
	if hookClasses[blocked] != "spam_block" || hookClasses[gone] != "bad_mailbox" {
		t.Errorf("email.bounced bounce_class by message %v, want %s spam_block and %s bad_mailbox", hookClasses, blocked, gone)
	}

	suppressed := map[string]bool{}
	for _, s := range expect(t, w.get("/v1/suppressions", w.key), 200).list {
		suppressed[strings.ToLower(fmt.Sprint(s.(map[string]any)["address"]))] = true
	}
	if suppressed["blocked@rcpt.example"] || !suppressed["gone@rcpt.example"] {
		t.Errorf("suppressed %v, want gone@rcpt.example only", suppressed)
	}
	expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "blocked@rcpt.example",
		"subject": "Blocked again", "text": "x"}, nil), 202)
	errorBody(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "gone@rcpt.example", "subject": "x", "text": "x"}, nil),
		400, "", "recipient suppressed: gone@rcpt.example")
}
