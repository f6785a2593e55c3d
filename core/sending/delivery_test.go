package sending

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

func TestApplyReport(t *testing.T) {
	t.Parallel()
	queuedAt := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	policy := retryPolicy{base: time.Minute, cap: 2 * time.Hour, maxAge: 72 * time.Hour}
	recipients := func(statuses ...ports.MessageStatus) []ports.Recipient {
		addrs := []string{"A@X.com", "b@x.com", "c@y.com"}
		out := make([]ports.Recipient, len(statuses))
		for i, st := range statuses {
			out[i] = ports.Recipient{ID: []string{"r1", "r2", "r3"}[i], Type: ports.RecipientTo, Address: addrs[i], Status: st}
		}
		return out
	}
	job := func(attempt int, ids ...string) ports.DeliveryJob {
		return ports.DeliveryJob{ID: "job", OrganizationID: "org", MessageID: "msg", Domain: "x.com", RecipientIDs: ids,
			Attempt: attempt, FirstQueuedAt: queuedAt, NotBefore: queuedAt}
	}
	outcome := func(id string, kind ports.DeliveryOutcomeKind, resp string) ports.RecipientOutcome {
		return ports.RecipientOutcome{RecipientID: id, Kind: kind, Response: resp}
	}
	const (
		ok250 = "250 2.0.0 Ok: queued as 1234"
		try4  = "451 4.7.1 Try again later"
		no550 = "550 5.1.1 No such user"
	)
	type ev struct{ typ, recipient, resp string }
	tests := []struct {
		name          string
		report        ports.DeliveryReport
		current       []ports.Recipient
		wantStatuses  map[string]ports.MessageStatus
		wantMessage   ports.MessageStatus
		wantEvents    []ev
		wantSuppress  []string
		wantRetry     []string // recipient ids; nil for no retry
		wantAttempt   int
		wantNotBefore time.Duration // after the report time
	}{
		{
			name: "all delivered",
			report: ports.DeliveryReport{Job: job(1, "r1", "r2"), Handed: true, At: queuedAt.Add(time.Second),
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeDelivered, ok250), outcome("r2", ports.OutcomeDelivered, ok250)}},
			current:      recipients(ports.StatusQueued, ports.StatusQueued),
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusDelivered, "r2": ports.StatusDelivered},
			wantMessage:  ports.StatusDelivered,
			wantEvents: []ev{{ports.EventEmailSent, "r1", ""}, {ports.EventEmailSent, "r2", ""},
				{ports.EventEmailDelivered, "r1", ok250}, {ports.EventEmailDelivered, "r2", ok250}},
		},
		{
			name: "one of two domains delivered: message stays queued",
			report: ports.DeliveryReport{Job: job(1, "r1", "r2"), Handed: true, At: queuedAt,
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeDelivered, ok250), outcome("r2", ports.OutcomeDelivered, ok250)}},
			current:      recipients(ports.StatusQueued, ports.StatusQueued, ports.StatusQueued),
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusDelivered, "r2": ports.StatusDelivered},
			wantMessage:  ports.StatusQueued,
			wantEvents: []ev{{ports.EventEmailSent, "r1", ""}, {ports.EventEmailSent, "r2", ""},
				{ports.EventEmailDelivered, "r1", ok250}, {ports.EventEmailDelivered, "r2", ok250}},
		},
		{
			name: "last domain delivered completes the message",
			report: ports.DeliveryReport{Job: job(1, "r3"), Handed: true, At: queuedAt,
				Recipients: []ports.RecipientOutcome{outcome("r3", ports.OutcomeDelivered, ok250)}},
			current:      recipients(ports.StatusDelivered, ports.StatusBounced, ports.StatusQueued),
			wantStatuses: map[string]ports.MessageStatus{"r3": ports.StatusDelivered},
			wantMessage:  ports.StatusDelivered,
			wantEvents:   []ev{{ports.EventEmailSent, "r3", ""}, {ports.EventEmailDelivered, "r3", ok250}},
		},
		{
			name: "deferred: delayed and retried after RetryBase",
			report: ports.DeliveryReport{Job: job(1, "r1", "r2"), At: queuedAt.Add(time.Second),
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeDeferred, try4), outcome("r2", ports.OutcomeDeferred, "dial tcp: connection refused")}},
			current:       recipients(ports.StatusQueued, ports.StatusQueued),
			wantStatuses:  map[string]ports.MessageStatus{"r1": ports.StatusDeliveryDelayed, "r2": ports.StatusDeliveryDelayed},
			wantMessage:   ports.StatusDeliveryDelayed,
			wantEvents:    []ev{{ports.EventEmailDeliveryDelayed, "r1", try4}, {ports.EventEmailDeliveryDelayed, "r2", "dial tcp: connection refused"}},
			wantRetry:     []string{"r1", "r2"},
			wantAttempt:   2,
			wantNotBefore: time.Minute,
		},
		{
			name: "fourth attempt deferred waits 8 minutes",
			report: ports.DeliveryReport{Job: job(4, "r1"), At: queuedAt.Add(time.Hour),
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeDeferred, try4)}},
			current:       recipients(ports.StatusDeliveryDelayed),
			wantStatuses:  map[string]ports.MessageStatus{"r1": ports.StatusDeliveryDelayed},
			wantMessage:   ports.StatusDeliveryDelayed,
			wantEvents:    []ev{{ports.EventEmailDeliveryDelayed, "r1", try4}},
			wantRetry:     []string{"r1"},
			wantAttempt:   5,
			wantNotBefore: 8 * time.Minute,
		},
		{
			name: "deferred past the maximum age fails",
			report: ports.DeliveryReport{Job: job(40, "r1"), At: queuedAt.Add(72 * time.Hour),
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeDeferred, try4)}},
			current:      recipients(ports.StatusDeliveryDelayed),
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusFailed},
			wantMessage:  ports.StatusFailed,
			wantEvents:   []ev{{ports.EventEmailFailed, "r1", try4}},
		},
		{
			name: "deferred just before the maximum age retries",
			report: ports.DeliveryReport{Job: job(40, "r1"), At: queuedAt.Add(72*time.Hour - time.Second),
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeDeferred, try4)}},
			current:       recipients(ports.StatusDeliveryDelayed),
			wantStatuses:  map[string]ports.MessageStatus{"r1": ports.StatusDeliveryDelayed},
			wantMessage:   ports.StatusDeliveryDelayed,
			wantEvents:    []ev{{ports.EventEmailDeliveryDelayed, "r1", try4}},
			wantRetry:     []string{"r1"},
			wantAttempt:   41,
			wantNotBefore: 2 * time.Hour,
		},
		{
			name: "bounced: suppressed for the tenant, lower-cased",
			report: ports.DeliveryReport{Job: job(1, "r1"), Handed: true, At: queuedAt,
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeBounced, no550)}},
			current:      recipients(ports.StatusQueued),
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusBounced},
			wantMessage:  ports.StatusBounced,
			wantEvents:   []ev{{ports.EventEmailBounced, "r1", no550}},
			wantSuppress: []string{"a@x.com"},
		},
		{
			name: "mixed outcomes in one transaction",
			report: ports.DeliveryReport{Job: job(1, "r1", "r2", "r3"), Handed: true, At: queuedAt,
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeBounced, no550), outcome("r2", ports.OutcomeDelivered, ok250), outcome("r3", ports.OutcomeDeferred, try4)}},
			current:      recipients(ports.StatusQueued, ports.StatusQueued, ports.StatusQueued),
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusBounced, "r2": ports.StatusDelivered, "r3": ports.StatusDeliveryDelayed},
			wantMessage:  ports.StatusDeliveryDelayed,
			wantEvents: []ev{{ports.EventEmailSent, "r2", ""}, {ports.EventEmailBounced, "r1", no550},
				{ports.EventEmailDelivered, "r2", ok250}, {ports.EventEmailDeliveryDelayed, "r3", try4}},
			wantSuppress:  []string{"a@x.com"},
			wantRetry:     []string{"r3"},
			wantAttempt:   2,
			wantNotBefore: time.Minute,
		},
		{
			name: "failed (no route)",
			report: ports.DeliveryReport{Job: job(1, "r1"), At: queuedAt,
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeFailed, "null MX")}},
			current:      recipients(ports.StatusQueued, ports.StatusDelivered),
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusFailed},
			wantMessage:  ports.StatusDelivered,
			wantEvents:   []ev{{ports.EventEmailFailed, "r1", "null MX"}},
		},
		{
			name: "recipient left out of the report is deferred",
			report: ports.DeliveryReport{Job: job(1, "r1", "r2"), At: queuedAt,
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeDelivered, ok250)}},
			current:      recipients(ports.StatusQueued, ports.StatusQueued),
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusDelivered, "r2": ports.StatusDeliveryDelayed},
			wantMessage:  ports.StatusDeliveryDelayed,
			wantEvents: []ev{{ports.EventEmailSent, "r1", ""}, {ports.EventEmailDelivered, "r1", ok250},
				{ports.EventEmailDeliveryDelayed, "r2", msgNoOutcome}},
			wantRetry:     []string{"r2"},
			wantAttempt:   2,
			wantNotBefore: time.Minute,
		},
		{
			name: "settled recipients are never moved back",
			report: ports.DeliveryReport{Job: job(1, "r1", "r2"), At: queuedAt,
				Recipients: []ports.RecipientOutcome{outcome("r1", ports.OutcomeDeferred, try4), outcome("r2", ports.OutcomeDelivered, ok250)}},
			current:      recipients(ports.StatusDelivered, ports.StatusBounced),
			wantStatuses: map[string]ports.MessageStatus{},
			wantMessage:  ports.StatusDelivered,
		},
		{
			name: "outcomes outside the job, unknown or repeated are ignored",
			report: ports.DeliveryReport{Job: job(1, "r1"), At: queuedAt,
				Recipients: []ports.RecipientOutcome{outcome("r2", ports.OutcomeBounced, no550), outcome("ghost", ports.OutcomeBounced, no550),
					outcome("r1", ports.OutcomeDelivered, ok250), outcome("r1", ports.OutcomeBounced, no550)}},
			current:      recipients(ports.StatusQueued, ports.StatusQueued),
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusDelivered},
			wantMessage:  ports.StatusQueued,
			wantEvents:   []ev{{ports.EventEmailSent, "r1", ""}, {ports.EventEmailDelivered, "r1", ok250}},
		},
		{
			name: "unknown outcome kind is deferred",
			report: ports.DeliveryReport{Job: job(2, "r1"), At: queuedAt.Add(time.Minute),
				Recipients: []ports.RecipientOutcome{outcome("r1", "mystery", "")}},
			current:       recipients(ports.StatusDeliveryDelayed),
			wantStatuses:  map[string]ports.MessageStatus{"r1": ports.StatusDeliveryDelayed},
			wantMessage:   ports.StatusDeliveryDelayed,
			wantEvents:    []ev{{ports.EventEmailDeliveryDelayed, "r1", ""}},
			wantRetry:     []string{"r1"},
			wantAttempt:   3,
			wantNotBefore: 2 * time.Minute,
		},
		{
			name: "unknown outcome kind past the maximum age fails",
			report: ports.DeliveryReport{Job: job(40, "r1"), At: queuedAt.Add(73 * time.Hour),
				Recipients: []ports.RecipientOutcome{outcome("r1", "mystery", "?")}},
			current:      recipients(ports.StatusDeliveryDelayed),
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusFailed},
			wantMessage:  ports.StatusFailed,
			wantEvents:   []ev{{ports.EventEmailFailed, "r1", "?"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app := applyReport(tt.report, tt.current, policy, seqIDs())
			if app.JobID != "job" || app.OrganizationID != "org" || app.MessageID != "msg" {
				t.Errorf("application ids = %q %q %q", app.JobID, app.OrganizationID, app.MessageID)
			}
			if !maps.Equal(app.Recipients, tt.wantStatuses) {
				t.Errorf("recipients = %v, want %v", app.Recipients, tt.wantStatuses)
			}
			// The store derives the message status under its lock; here the same rule runs over the
			// recipients as they will be once the application is written.
			if app.MessageStatus != "" {
				t.Errorf("message status %q decided outside the store's lock", app.MessageStatus)
			}
			statuses := make([]ports.MessageStatus, len(tt.current))
			for i, rc := range tt.current {
				statuses[i] = rc.Status
				if st, ok := app.Recipients[rc.ID]; ok {
					statuses[i] = st
				}
			}
			if got := ports.DeriveMessageStatus(statuses); got != tt.wantMessage {
				t.Errorf("message status = %q, want %q", got, tt.wantMessage)
			}
			var events []ev
			for _, e := range app.Events {
				resp := ""
				if e.ProviderResponse != nil {
					resp = *e.ProviderResponse
					if resp == "" {
						t.Errorf("event %s has an empty, non-nil providerResponse", e.Type)
					}
				}
				events = append(events, ev{e.Type, e.RecipientID, resp})
				if e.ID == "" || e.OrganizationID != "org" || e.MessageID != "msg" || e.OccurredAt.Before(tt.report.At) {
					t.Errorf("event = %+v", e)
				}
			}
			if !slices.Equal(events, tt.wantEvents) {
				t.Errorf("events = %v, want %v", events, tt.wantEvents)
			}
			for i := 1; i < len(app.Events); i++ {
				if app.Events[i].OccurredAt.Before(app.Events[i-1].OccurredAt) {
					t.Errorf("event %d occurs before event %d", i, i-1)
				}
			}
			for _, sent := range app.Events {
				for _, later := range app.Events {
					if sent.Type == ports.EventEmailSent && later.Type != ports.EventEmailSent && !later.OccurredAt.After(sent.OccurredAt) {
						t.Errorf("%s does not sort after sent by time", later.Type)
					}
				}
			}
			var suppressed []string
			for _, s := range app.Suppressions {
				suppressed = append(suppressed, s.Address)
				if s.OrganizationID != "org" || s.Scope != ports.SuppressionScopeTenant || s.Reason != ports.SuppressionBounce || s.ID == "" {
					t.Errorf("suppression = %+v", s)
				}
			}
			if !slices.Equal(suppressed, tt.wantSuppress) {
				t.Errorf("suppressions = %v, want %v", suppressed, tt.wantSuppress)
			}
			if tt.wantRetry == nil {
				if app.Retry != nil {
					t.Fatalf("retry = %+v, want none", app.Retry)
				}
				return
			}
			r := app.Retry
			if r == nil {
				t.Fatalf("no retry, want %v", tt.wantRetry)
			}
			if !slices.Equal(r.RecipientIDs, tt.wantRetry) || r.Attempt != tt.wantAttempt || !r.NotBefore.Equal(tt.report.At.Add(tt.wantNotBefore)) {
				t.Errorf("retry = ids %v attempt %d notBefore +%s; want %v, %d, +%s", r.RecipientIDs, r.Attempt,
					r.NotBefore.Sub(tt.report.At), tt.wantRetry, tt.wantAttempt, tt.wantNotBefore)
			}
			if r.ID == "" || r.ID == "job" || r.Domain != "x.com" || r.MessageID != "msg" || r.OrganizationID != "org" || !r.FirstQueuedAt.Equal(queuedAt) {
				t.Errorf("retry = %+v", r)
			}
		})
	}
}

func TestJobRecipients(t *testing.T) {
	t.Parallel()
	msg := ports.Message{Recipients: []ports.Recipient{
		{ID: "r1", Status: ports.StatusQueued},
		{ID: "r2", Status: ports.StatusDeliveryDelayed},
		{ID: "r3", Status: ports.StatusDelivered},
		{ID: "r4", Status: ports.StatusBounced},
		{ID: "r5", Status: ports.StatusQueued},
		{ID: "r6", Status: ports.StatusSent},
	}}
	job := ports.DeliveryJob{RecipientIDs: []string{"r2", "r1", "r3", "r4", "r6", "gone"}}
	var ids []string
	for _, r := range jobRecipients(job, msg) {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{"r1", "r2"}) {
		t.Fatalf("job recipients = %v, want the job's pending ones in message order", ids)
	}
}

func TestBuildOutbound(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	msg := ports.Message{
		ID: testMessageID, OrganizationID: "org", From: "Acme <News@Acme.Example>", ReplyTo: "help@acme.example",
		Subject: "S", HTML: "<p>H</p>", Text: "T", Headers: map[string]string{"X-A": "1"}, CreatedAt: created,
		Metadata: []byte(`{"secret":"never sent"}`),
		Recipients: []ports.Recipient{
			{ID: testRecipientID, Type: ports.RecipientTo, Address: "a@x.com", Status: ports.StatusQueued},
			{ID: "0192f0c1-7a3b-7c00-8000-00000000000b", Type: ports.RecipientCc, Address: "b@y.com", Status: ports.StatusQueued},
			{ID: "0192f0c1-7a3b-7c00-8000-00000000000c", Type: ports.RecipientBcc, Address: "c@x.com", Status: ports.StatusQueued},
			{ID: "0192f0c1-7a3b-7c00-8000-00000000000d", Type: ports.RecipientTo, Address: "d@z.com", Status: ports.StatusDelivered},
		},
		Attachments: []ports.StoredAttachment{{ID: "a1", Key: "att/org/m/a1"}},
	}
	domain := ports.Domain{ID: "dom", Name: "acme.example", DKIMSelector: "pmabcdefghij"}
	key := []byte("pkcs8")

	t.Run("several recipients", func(t *testing.T) {
		t.Parallel()
		job := ports.DeliveryJob{ID: "job", Domain: "x.com", RecipientIDs: []string{testRecipientID, "0192f0c1-7a3b-7c00-8000-00000000000c"}}
		out := buildOutbound(job, msg, domain, jobRecipients(job, msg), key, verpTestKey)
		if !slices.Equal(out.To, []string{"a@x.com", "d@z.com"}) || !slices.Equal(out.Cc, []string{"b@y.com"}) {
			t.Errorf("To %v, Cc %v: want every to and cc of the message, no bcc", out.To, out.Cc)
		}
		if len(out.Recipients) != 2 || out.Recipients[0].Address != "a@x.com" || out.Recipients[1].Address != "c@x.com" {
			t.Errorf("envelope recipients = %+v, want the job's a and c (bcc)", out.Recipients)
		}
		if out.MessageIDHeader != testMessageID+"@acme.example" {
			t.Errorf("Message-ID = %q", out.MessageIDHeader)
		}
		local, host, _ := strings.Cut(out.ReturnPath, "@")
		if host != "bounce.acme.example" {
			t.Errorf("return path %q, want host bounce.acme.example", out.ReturnPath)
		}
		if kind, id, ok := DecodeVERP(verpTestKey, local); !ok || kind != VERPMessage || id != testMessageID {
			t.Errorf("return path decodes to %q %q %v, want the message", kind, id, ok)
		}
		if out.DKIMDomain != "acme.example" || out.DKIMSelector != "pmabcdefghij" || string(out.DKIMPrivateKey) != "pkcs8" {
			t.Errorf("DKIM = %q %q %q", out.DKIMDomain, out.DKIMSelector, out.DKIMPrivateKey)
		}
		if out.From != msg.From || out.ReplyTo != msg.ReplyTo || out.Subject != "S" || out.HTML != msg.HTML || out.Text != "T" ||
			out.Headers["X-A"] != "1" || len(out.Attachments) != 1 || !out.CreatedAt.Equal(created) ||
			out.MessageID != testMessageID || out.OrganizationID != "org" || out.Job.ID != "job" {
			t.Errorf("outbound = %+v", out)
		}
	})
	t.Run("one recipient", func(t *testing.T) {
		t.Parallel()
		job := ports.DeliveryJob{ID: "job", Domain: "x.com", RecipientIDs: []string{testRecipientID}}
		out := buildOutbound(job, msg, domain, jobRecipients(job, msg), key, verpTestKey)
		local, _, _ := strings.Cut(out.ReturnPath, "@")
		if kind, id, ok := DecodeVERP(verpTestKey, local); !ok || kind != VERPRecipient || id != testRecipientID {
			t.Errorf("return path decodes to %q %q %v, want the recipient", kind, id, ok)
		}
	})
}

func TestSettledAndDeliverableAreDisjoint(t *testing.T) {
	t.Parallel()
	all := []ports.MessageStatus{ports.StatusQueued, ports.StatusScheduled, ports.StatusSent, ports.StatusDelivered,
		ports.StatusDeliveryDelayed, ports.StatusBounced, ports.StatusComplained, ports.StatusOpened, ports.StatusClicked,
		ports.StatusFailed, ports.StatusCancelled}
	for _, st := range all {
		if settled(st) && deliverable(st) {
			t.Errorf("%s is both settled and deliverable", st)
		}
	}
	if deliverable(ports.StatusSent) || settled(ports.StatusSent) {
		t.Error("sent must be neither re-delivered nor final")
	}
}

func TestDateOfScheduledMessageIsItsScheduledTime(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	later := created.Add(3 * time.Hour)
	earlier := created.Add(-time.Minute)
	for _, c := range []struct {
		scheduled *time.Time
		want      time.Time
	}{
		{nil, created},
		{&later, later},
		{&earlier, created},
	} {
		if got := dateOf(ports.Message{CreatedAt: created, ScheduledAt: c.scheduled}); !got.Equal(c.want) {
			t.Errorf("dateOf(scheduled %v) = %v, want %v", c.scheduled, got, c.want)
		}
	}
}
