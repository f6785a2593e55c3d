package sending

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// TestApplyReportClassifiesReplies: an SMTP-time refusal carries its reply's class on its event and bounce
// record, and only a class that says the address will never work suppresses it; a 5xx spam block still
// bounces the recipient.
func TestApplyReportClassifiesReplies(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	const (
		unknown  = "550 5.1.1 <a@x.com>: Recipient address rejected: User unknown in local recipient table"
		spam     = "550 5.7.1 Service unavailable; Client host [192.0.2.10] blocked using zen.spamhaus.org"
		disabled = "550-5.2.1 The email account that you tried to reach is disabled. - gsmtp"
		throttle = "421 4.7.28 Our system has detected an unusual rate of unsolicited mail originating from your IP address"
		ok       = "250 2.0.0 Ok: queued as 1234"
	)
	ids := []string{"r1", "r2", "r3", "r4", "r5", "r6"}
	current := make([]ports.Recipient, len(ids))
	for i, id := range ids {
		current[i] = ports.Recipient{ID: id, Type: ports.RecipientTo, Address: "R" + id + "@X.com", Status: ports.StatusQueued}
	}
	report := ports.DeliveryReport{
		Job: ports.DeliveryJob{ID: "job", OrganizationID: "org", MessageID: "msg", Domain: "x.com", RecipientIDs: ids,
			Attempt: 1, FirstQueuedAt: at, NotBefore: at},
		Handed: true, At: at,
		Recipients: []ports.RecipientOutcome{
			{RecipientID: "r1", Kind: ports.OutcomeBounced, Response: unknown},
			{RecipientID: "r2", Kind: ports.OutcomeBounced, Response: spam},
			{RecipientID: "r3", Kind: ports.OutcomeBounced, Response: disabled},
			{RecipientID: "r4", Kind: ports.OutcomeDeferred, Response: throttle},
			{RecipientID: "r5", Kind: ports.OutcomeDelivered, Response: ok},
			{RecipientID: "r6", Kind: ports.OutcomeDeferred, Response: "4.4.1 connection failed: dial tcp 192.0.2.1:25: connect: connection refused"},
		},
	}
	app := applyReport(report, current, retryPolicy{base: time.Minute, cap: time.Hour, maxAge: 72 * time.Hour}, seqIDs())

	wantStatus := map[string]ports.MessageStatus{"r1": ports.StatusBounced, "r2": ports.StatusBounced,
		"r3": ports.StatusBounced, "r4": ports.StatusDeliveryDelayed, "r5": ports.StatusDelivered,
		"r6": ports.StatusDeliveryDelayed}
	if !maps.Equal(app.Recipients, wantStatus) {
		t.Errorf("recipients = %v, want %v", app.Recipients, wantStatus)
	}
	wantEventClass := map[string]string{
		ports.EventEmailBounced + " r1":         ports.BounceClassBadMailbox,
		ports.EventEmailBounced + " r2":         ports.BounceClassSpamBlock,
		ports.EventEmailBounced + " r3":         ports.BounceClassInactiveMailbox,
		ports.EventEmailDeliveryDelayed + " r4": ports.BounceClassRateLimited,
		ports.EventEmailSent + " r5":            "",
		ports.EventEmailDelivered + " r5":       "",
		ports.EventEmailDeliveryDelayed + " r6": ports.BounceClassRouting,
	}
	gotEventClass := map[string]string{}
	for _, e := range app.Events {
		gotEventClass[e.Type+" "+e.RecipientID] = e.BounceClass
	}
	if !maps.Equal(gotEventClass, wantEventClass) {
		t.Errorf("event classes = %v, want %v", gotEventClass, wantEventClass)
	}
	// The server's 421 is a soft bounce record too; the connection that failed (r6) is not.
	wantBounce := map[string]string{"r1": ports.BounceClassBadMailbox, "r2": ports.BounceClassSpamBlock,
		"r3": ports.BounceClassInactiveMailbox, "r4": ports.BounceClassRateLimited}
	gotBounce := map[string]string{}
	for _, b := range app.Bounces {
		gotBounce[b.RecipientID] = b.Class
		want, action := ports.BounceHard, "failed"
		if b.RecipientID == "r4" {
			want, action = ports.BounceSoft, "delayed"
		}
		if b.Type != want || b.Action != action || !strings.HasPrefix(b.DiagnosticCode, "smtp; ") {
			t.Errorf("bounce %s: type %q action %q diagnostic %q, want %s %s", b.RecipientID, b.Type, b.Action, b.DiagnosticCode, want, action)
		}
		if b.RecipientID == "r4" && b.Status != "4.7.28" {
			t.Errorf("soft bounce status %q, want 4.7.28", b.Status)
		}
	}
	if !maps.Equal(gotBounce, wantBounce) {
		t.Errorf("bounce classes = %v, want %v", gotBounce, wantBounce)
	}
	var suppressed []string
	for _, s := range app.Suppressions {
		suppressed = append(suppressed, s.Address)
	}
	if len(suppressed) != 2 || suppressed[0] != "rr1@x.com" || suppressed[1] != "rr3@x.com" {
		t.Errorf("suppressed %v, want [rr1@x.com rr3@x.com]: a spam block must not suppress", suppressed)
	}
}
