package deliverability

import (
	"testing"

	"github.com/postmill/postmill/ports"
)

// TestDecideBounceClasses: a DSN's class goes on its bounce record and its event, and only a hard bounce of
// a class that says the address will never work suppresses it. A 5xx spam or policy block bounces the
// recipient and leaves the address sendable.
func TestDecideBounceClasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		part         ports.DSNRecipient
		wantClass    string
		wantEvent    string
		wantStatus   ports.MessageStatus
		wantSuppress bool
	}{
		{"user unknown", part("a@x.com", "failed", "5.1.1", diag550), ports.BounceClassBadMailbox, ports.EventEmailBounced, ports.StatusBounced, true},
		{"no such domain", part("a@x.com", "failed", "5.1.2", "smtp; 550 5.1.2 Host unknown"), ports.BounceClassBadDomain, ports.EventEmailBounced, ports.StatusBounced, true},
		{"disabled mailbox", part("a@x.com", "failed", "5.2.1", "smtp; 550 5.2.1 The email account that you tried to reach is disabled."),
			ports.BounceClassInactiveMailbox, ports.EventEmailBounced, ports.StatusBounced, true},
		{"blocklisted: bounced, not suppressed", part("a@x.com", "failed", "5.7.1", "smtp; 554 5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org"),
			ports.BounceClassSpamBlock, ports.EventEmailBounced, ports.StatusBounced, false},
		{"policy: bounced, not suppressed", part("a@x.com", "failed", "5.7.9", "smtp; 554 5.7.9 Message not accepted for policy reasons."),
			ports.BounceClassPolicyBlock, ports.EventEmailBounced, ports.StatusBounced, false},
		{"DMARC: bounced, not suppressed", part("a@x.com", "failed", "5.7.26", "smtp; 550 5.7.26 Unauthenticated email is not accepted due to domain's DMARC policy"),
			ports.BounceClassAuthentication, ports.EventEmailBounced, ports.StatusBounced, false},
		{"a permanent full mailbox is not suppressed", part("a@x.com", "failed", "5.2.2", "smtp; 552 5.2.2 Mailbox full"),
			ports.BounceClassMailboxFull, ports.EventEmailBounced, ports.StatusBounced, false},
		{"a generic Status gives way to the diagnostic's code", part("a@x.com", "failed", "5.0.0", "X-Postfix; host mx.x.com said: 550 5.1.1 <a@x.com>: User unknown"),
			ports.BounceClassBadMailbox, ports.EventEmailBounced, ports.StatusBounced, true},
		{"words decide when no code tells", part("a@x.com", "failed", "", "smtp; 550 No Such User Here"),
			ports.BounceClassBadMailbox, ports.EventEmailBounced, ports.StatusBounced, true},
		{"soft: classified, never suppressed", part("a@x.com", "delayed", "4.2.2", diag452), ports.BounceClassMailboxFull, ports.EventEmailDeliveryDelayed, "", false},
		{"soft user unknown is not suppressed", part("a@x.com", "delayed", "4.1.1", "smtp; 450 4.1.1 <a@x.com>: Recipient address rejected: User unknown"),
			ports.BounceClassBadMailbox, ports.EventEmailDeliveryDelayed, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := bounceCall{orgID: "org", messageID: "msg", parts: []ports.DSNRecipient{tt.part}, now: testNow, ids: idSeq{base: testBase}}
			app, _ := decideBounce(c, testRecipients(ports.StatusDelivered))
			if len(app.Bounces) != 1 || len(app.Events) != 1 {
				t.Fatalf("bounces %+v events %+v, want one of each", app.Bounces, app.Events)
			}
			if b := app.Bounces[0]; b.Class != tt.wantClass {
				t.Errorf("bounce class %q, want %q", b.Class, tt.wantClass)
			}
			if e := app.Events[0]; e.Type != tt.wantEvent || e.BounceClass != tt.wantClass {
				t.Errorf("event %s class %q, want %s class %q", e.Type, e.BounceClass, tt.wantEvent, tt.wantClass)
			}
			if got := app.Recipients["r1"]; got != tt.wantStatus {
				t.Errorf("recipient status %q, want %q", got, tt.wantStatus)
			}
			if got := len(app.Suppressions) == 1; got != tt.wantSuppress || len(app.Suppressions) > 1 {
				t.Errorf("suppressions %+v, want suppressed %v", app.Suppressions, tt.wantSuppress)
			}
		})
	}
}

// TestClassifyRecorded: a bounce recorded before classes existed gets the class of its status and
// diagnostic code when listed; a recorded class is kept.
func TestClassifyRecorded(t *testing.T) {
	t.Parallel()
	bounces := []ports.Bounce{
		{Status: "5.1.1", DiagnosticCode: "smtp; 550 5.1.1 user unknown"},
		{DiagnosticCode: "smtp; 554 5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org"},
		{Status: "4.2.2", Class: ports.BounceClassRateLimited},
		{},
	}
	classifyRecorded(bounces)
	want := []string{ports.BounceClassBadMailbox, ports.BounceClassSpamBlock, ports.BounceClassRateLimited, ports.BounceClassUnknown}
	for i, b := range bounces {
		if b.Class != want[i] {
			t.Errorf("bounce %d class %q, want %q", i, b.Class, want[i])
		}
	}
}
