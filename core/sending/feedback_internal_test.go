package sending

import (
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

func TestEnhancedStatus(t *testing.T) {
	t.Parallel()
	for reply, want := range map[string]string{
		"550 5.1.1 <a@b>: Recipient address rejected": "5.1.1",
		"554 5.7.1 Service unavailable":               "5.7.1",
		"550 no such user":                            "5.0.0",
		"452 4.2.2 mailbox full":                      "4.2.2",
		"550 rejected by 10.5.1.2":                    "5.0.0",
		"connection refused":                          "",
		"":                                            "",
	} {
		if got := enhancedStatus(reply); got != want {
			t.Errorf("enhancedStatus(%q) = %q, want %q", reply, got, want)
		}
	}
}

// TestApplyReport_BounceRecord checks that an SMTP-time 5xx writes a bounce record for the bounce list
// beside the status, event and suppression.
func TestApplyReport_BounceRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	job := ports.DeliveryJob{ID: "j1", OrganizationID: "o1", MessageID: "m1", Domain: "example.com", RecipientIDs: []string{"r1", "r2"}, Attempt: 1, FirstQueuedAt: at}
	current := []ports.Recipient{
		{ID: "r1", Address: "Gone@Example.com", Status: ports.StatusQueued},
		{ID: "r2", Address: "ok@example.com", Status: ports.StatusQueued},
	}
	r := ports.DeliveryReport{Job: job, Handed: true, At: at, Recipients: []ports.RecipientOutcome{
		{RecipientID: "r1", Kind: ports.OutcomeBounced, Response: "550 5.1.1 user unknown"},
		{RecipientID: "r2", Kind: ports.OutcomeDelivered, Response: "250 ok"},
	}}
	app := applyReport(r, current, retryPolicy{base: time.Minute, cap: time.Hour, maxAge: 72 * time.Hour}, seqIDs())
	if len(app.Bounces) != 1 {
		t.Fatalf("bounces = %+v, want one", app.Bounces)
	}
	b := app.Bounces[0]
	if b.RecipientID != "r1" || b.Address != "Gone@Example.com" || b.Type != ports.BounceHard || b.Status != "5.1.1" ||
		b.DiagnosticCode != "smtp; 550 5.1.1 user unknown" || b.MessageID != "m1" || b.OrganizationID != "o1" {
		t.Fatalf("bounce = %+v", b)
	}
}

func TestNewJobsPerRecipient(t *testing.T) {
	t.Parallel()
	rs := []ports.Recipient{{ID: "a", Address: "a@x.com"}, {ID: "b", Address: "b@X.com"}, {ID: "c", Address: "c@y.com"}}
	jobs := newJobsPerRecipient("o", "m", rs, time.Unix(0, 0), seqIDs())
	if len(jobs) != 3 {
		t.Fatalf("%d jobs, want one per recipient", len(jobs))
	}
	for i, j := range jobs {
		if len(j.RecipientIDs) != 1 || j.RecipientIDs[0] != rs[i].ID || j.Domain != addressDomain(rs[i].Address) {
			t.Fatalf("job %d = %+v", i, j)
		}
	}
	if grouped := newJobs("o", "m", rs, time.Unix(0, 0), seqIDs()); len(grouped) != 2 {
		t.Fatalf("untracked jobs = %d, want one per domain", len(grouped))
	}
}
