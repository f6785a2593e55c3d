package sending

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

func TestPromote(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	scheduled := func(sandbox bool) ports.Message {
		return ports.Message{
			ID: "msg", OrganizationID: "org", Status: ports.StatusScheduled, Sandbox: sandbox,
			Recipients: []ports.Recipient{
				{ID: "r1", Type: "to", Address: "a@x.com", Status: ports.StatusScheduled},
				{ID: "r2", Type: "cc", Address: "b@y.com", Status: ports.StatusScheduled},
				{ID: "r3", Type: "bcc", Address: "c@X.com", Status: ports.StatusScheduled},
			},
		}
	}
	tests := []struct {
		name       string
		msg        ports.Message
		org        ports.Organization
		wantStatus ports.MessageStatus
		wantEvents []string // type:providerResponse
		wantJobs   []string // domain:ids
	}{
		{"active organization queues", scheduled(false), ports.Organization{ID: "org"}, ports.StatusQueued,
			[]string{"email.queued:"}, []string{"x.com:r1,r3", "y.com:r2"}},
		{"paused organization fails", scheduled(false), ports.Organization{ID: "org", Paused: true}, ports.StatusFailed,
			[]string{"email.failed:organization sending is paused"}, nil},
		{"paused wins over sandbox", scheduled(true), ports.Organization{ID: "org", Paused: true}, ports.StatusFailed,
			[]string{"email.failed:organization sending is paused"}, nil},
		{"sandbox is sent without a job", scheduled(true), ports.Organization{ID: "org"}, ports.StatusSent,
			[]string{"email.queued:", "email.sent:sandbox: not delivered"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, events, jobs := promote(now, tt.msg, tt.org, ports.Domain{}, seqIDs())
			if status != tt.wantStatus {
				t.Fatalf("status = %q, want %q", status, tt.wantStatus)
			}
			var gotEvents []string
			for _, e := range events {
				resp := ""
				if e.ProviderResponse != nil {
					resp = *e.ProviderResponse
				}
				gotEvents = append(gotEvents, e.Type+":"+resp)
				if e.ID == "" || e.OrganizationID != "org" || e.MessageID != "msg" || e.RecipientID != "" || e.OccurredAt.Before(now) {
					t.Errorf("event = %+v", e)
				}
			}
			if !slices.Equal(gotEvents, tt.wantEvents) {
				t.Fatalf("events = %v, want %v", gotEvents, tt.wantEvents)
			}
			var gotJobs []string
			for _, j := range jobs {
				gotJobs = append(gotJobs, j.Domain+":"+strings.Join(j.RecipientIDs, ","))
				if j.Attempt != 1 || !j.FirstQueuedAt.Equal(now) || j.NotBefore.After(now) || j.MessageID != "msg" || j.OrganizationID != "org" {
					t.Errorf("job = %+v", j)
				}
			}
			if !slices.Equal(gotJobs, tt.wantJobs) {
				t.Fatalf("jobs = %v, want %v", gotJobs, tt.wantJobs)
			}
		})
	}
}

func TestPromoteUsesTheOrganizationWhenTheMessageLacksIt(t *testing.T) {
	t.Parallel()
	msg := ports.Message{ID: "msg", Recipients: []ports.Recipient{{ID: "r1", Address: "a@x.com"}}}
	_, events, jobs := promote(time.Now(), msg, ports.Organization{ID: "org"}, ports.Domain{}, seqIDs())
	if events[0].OrganizationID != "org" || jobs[0].OrganizationID != "org" {
		t.Fatalf("events %+v, jobs %+v: want organization org", events, jobs)
	}
}

// TestPromoteSplitsTrackedMessages: a scheduled message from a tracking domain is delivered one recipient
// per job, like one sent at once, so every copy can name its recipient.
func TestPromoteSplitsTrackedMessages(t *testing.T) {
	t.Parallel()
	msg := ports.Message{ID: "msg", OrganizationID: "org", HTML: "<p>hi</p>", Recipients: []ports.Recipient{
		{ID: "r1", Address: "a@x.com"}, {ID: "r2", Address: "b@x.com"}}}
	_, _, grouped := promote(time.Now(), msg, ports.Organization{ID: "org"}, ports.Domain{}, seqIDs())
	_, _, split := promote(time.Now(), msg, ports.Organization{ID: "org"}, ports.Domain{ClickTracking: true}, seqIDs())
	if len(grouped) != 1 || len(split) != 2 || len(split[0].RecipientIDs) != 1 || split[1].RecipientIDs[0] != "r2" {
		t.Fatalf("untracked jobs %+v, tracked jobs %+v", grouped, split)
	}
	// Text-only mail has nothing to track: it stays one transaction per domain.
	msg.HTML = ""
	if _, _, text := promote(time.Now(), msg, ports.Organization{ID: "org"}, ports.Domain{ClickTracking: true}, seqIDs()); len(text) != 1 {
		t.Fatalf("text-only tracked jobs %+v, want one", text)
	}
}
