package deliverability

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

func TestFeedbackType(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", "abuse"},
		{"abuse", "abuse"},
		{" Abuse ", "abuse"},
		{"fraud", "fraud"},
		{"virus", "virus"},
		{"other", "other"},
		{"opt-out", "other"},
		{"not-spam", ""},
		{"Not-Spam", ""},
		{"auth-failure", ""},
	}
	for _, tt := range tests {
		if got := feedbackType(tt.in); got != tt.want {
			t.Errorf("feedbackType(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDecideComplaint(t *testing.T) {
	t.Parallel()
	arrived := time.Date(2026, 4, 30, 8, 0, 0, 0, time.UTC)
	rcptCall := func(id string) complaintCall {
		return complaintCall{orgID: "org", messageID: "msg", targetID: id, feedbackType: "abuse", userAgent: "FBL/1.0",
			reportedDomain: "x.com", sourceIP: "192.0.2.7", arrivalDate: &arrived, now: testNow, ids: idSeq{base: testBase}}
	}
	msgCall := func(rcptTo ...string) complaintCall {
		c := rcptCall("")
		c.rcptTo = rcptTo
		return c
	}
	tests := []struct {
		name         string
		call         complaintCall
		current      []ports.Recipient
		wantMatched  bool
		wantStatuses map[string]ports.MessageStatus
		wantTargets  []string // recipients with a complaint, an event and a suppression
	}{
		{"recipient token, delivered", rcptCall("r2"), testRecipients(ports.StatusDelivered, ports.StatusDelivered), true,
			map[string]ports.MessageStatus{"r2": ports.StatusComplained}, []string{"r2"}},
		{"opened moves on to complained", rcptCall("r1"), testRecipients(ports.StatusOpened), true,
			map[string]ports.MessageStatus{"r1": ports.StatusComplained}, []string{"r1"}},
		{"clicked moves on to complained", rcptCall("r1"), testRecipients(ports.StatusClicked), true,
			map[string]ports.MessageStatus{"r1": ports.StatusComplained}, []string{"r1"}},
		{"sent moves on to complained", rcptCall("r1"), testRecipients(ports.StatusSent), true,
			map[string]ports.MessageStatus{"r1": ports.StatusComplained}, []string{"r1"}},
		{"already complained: nothing", rcptCall("r1"), testRecipients(ports.StatusComplained), true, nil, nil},
		{"bounced keeps its status, complaint still recorded", rcptCall("r1"), testRecipients(ports.StatusBounced), true,
			nil, []string{"r1"}},
		{"queued keeps its status, complaint still recorded", rcptCall("r1"), testRecipients(ports.StatusQueued), true,
			nil, []string{"r1"}},
		{"recipient token naming a recipient the message lacks", rcptCall("r9"), testRecipients(ports.StatusDelivered), false,
			nil, nil},
		{"message token: Original-Rcpt-To without letter case", msgCall("b@x.com"),
			testRecipients(ports.StatusDelivered, ports.StatusDelivered, ports.StatusDelivered), true,
			map[string]ports.MessageStatus{"r2": ports.StatusComplained}, []string{"r2"}},
		{"message token: a report naming several recipients names none", msgCall("c@x.com", "nobody@x.com", "a@x.com"),
			testRecipients(ports.StatusDelivered, ports.StatusDelivered, ports.StatusDelivered), false,
			map[string]ports.MessageStatus{}, nil},
		{"message token: redacted address, one recipient", msgCall("xxxxxxx@x.com"), testRecipients(ports.StatusDelivered), true,
			map[string]ports.MessageStatus{"r1": ports.StatusComplained}, []string{"r1"}},
		{"message token: no address, one recipient", msgCall(), testRecipients(ports.StatusDelivered), true,
			map[string]ports.MessageStatus{"r1": ports.StatusComplained}, []string{"r1"}},
		{"message token: no match among several", msgCall("nobody@x.com"), testRecipients(ports.StatusDelivered, ports.StatusDelivered),
			false, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app, matched := decideComplaint(tt.call, tt.current)
			if matched != tt.wantMatched {
				t.Errorf("matched = %v, want %v", matched, tt.wantMatched)
			}
			if !maps.Equal(app.Recipients, tt.wantStatuses) && (len(app.Recipients) > 0 || len(tt.wantStatuses) > 0) {
				t.Errorf("statuses %v, want %v", app.Recipients, tt.wantStatuses)
			}
			var complained, evented, suppressed []string
			for _, c := range app.Complaints {
				want := ports.Complaint{ID: c.ID, OrganizationID: "org", MessageID: "msg", RecipientID: c.RecipientID,
					Address: addressOf(tt.current, c.RecipientID), FeedbackType: "abuse", UserAgent: "FBL/1.0",
					ReportedDomain: "x.com", SourceIP: "192.0.2.7", ArrivalDate: c.ArrivalDate, CreatedAt: testNow}
				if c != want || c.ArrivalDate == nil || !c.ArrivalDate.Equal(arrived) || c.ArrivalDate == tt.call.arrivalDate {
					t.Errorf("complaint %+v, want %+v with its own copy of the arrival date", c, want)
				}
				complained = append(complained, c.RecipientID)
			}
			for _, e := range app.Events {
				if e.Type != ports.EventEmailComplained || e.OrganizationID != "org" || e.MessageID != "msg" ||
					!e.OccurredAt.Equal(testNow) || e.ProviderResponse != nil {
					t.Errorf("event %+v: want email.complained of org/msg at the call's time", e)
				}
				evented = append(evented, e.RecipientID)
			}
			for _, s := range app.Suppressions {
				if s.OrganizationID != "org" || s.Scope != ports.SuppressionScopeTenant || s.Reason != ports.SuppressionComplaint {
					t.Errorf("suppression %+v: want a tenant suppression of org with reason complaint", s)
				}
				for _, rc := range tt.current {
					if s.Address == strings.ToLower(rc.Address) {
						suppressed = append(suppressed, rc.ID)
					}
				}
			}
			for what, got := range map[string][]string{"complaints": complained, "events": evented, "suppressions": suppressed} {
				if !reflect.DeepEqual(got, tt.wantTargets) {
					t.Errorf("%s for %v, want %v", what, got, tt.wantTargets)
				}
			}
			if len(app.Bounces) > 0 {
				t.Errorf("a complaint recorded bounces: %+v", app.Bounces)
			}
			checkApplicationIDs(t, app)
			again, matchedAgain := decideComplaint(tt.call, tt.current)
			if !reflect.DeepEqual(app, again) || matched != matchedAgain {
				t.Errorf("a second call decided differently:\n%+v\n%+v", app, again)
			}
		})
	}
}

func addressOf(current []ports.Recipient, id string) string {
	for _, rc := range current {
		if rc.ID == id {
			return rc.Address
		}
	}
	return ""
}
