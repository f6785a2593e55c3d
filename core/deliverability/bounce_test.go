package deliverability

import (
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/ports"
)

var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// testBase is a fixed UUIDv7, so that tests can compare applications across calls.
var testBase = uuid.MustParse("0196886c-3c00-7abc-8def-0123456789ab")

func testRecipients(statuses ...ports.MessageStatus) []ports.Recipient {
	addrs := []string{"a@x.com", "B@X.com", "c@x.com"}
	out := make([]ports.Recipient, len(statuses))
	for i, st := range statuses {
		out[i] = ports.Recipient{ID: []string{"r1", "r2", "r3"}[i], Type: ports.RecipientTo, Address: addrs[i], Status: st}
	}
	return out
}

func part(final, action, status, diag string) ports.DSNRecipient {
	return ports.DSNRecipient{FinalRecipient: final, Action: action, Status: status, DiagnosticCode: diag, RemoteMTA: "mx.x.com"}
}

const (
	diag550 = "smtp; 550 5.1.1 <a@x.com>: Recipient address rejected"
	diag452 = "smtp; 452 4.2.2 Mailbox full"
)

func TestPartForRecipient(t *testing.T) {
	t.Parallel()
	hard := part("a@x.com", "failed", "5.1.1", diag550)
	soft := part("a@x.com", "delayed", "4.2.2", diag452)
	other := part("z@y.com", "failed", "5.1.1", diag550)
	tests := []struct {
		name    string
		address string
		parts   []ports.DSNRecipient
		want    ports.DSNRecipient
		wantOK  bool
	}{
		{"final recipient", "a@x.com", []ports.DSNRecipient{other, hard}, hard, true},
		{"letter case and rfc822 type", "A@X.COM", []ports.DSNRecipient{other, {FinalRecipient: "rfc822; <a@x.com>", Action: "failed"}},
			ports.DSNRecipient{FinalRecipient: "rfc822; <a@x.com>", Action: "failed"}, true},
		{"original recipient after forwarding", "a@x.com", []ports.DSNRecipient{other,
			{FinalRecipient: "a@forward.example", OriginalRecipient: "rfc822;a@x.com", Action: "failed"}},
			ports.DSNRecipient{FinalRecipient: "a@forward.example", OriginalRecipient: "rfc822;a@x.com", Action: "failed"}, true},
		{"hard wins over soft whatever the order", "a@x.com", []ports.DSNRecipient{soft, hard}, hard, true},
		{"first of equal severity", "a@x.com", []ports.DSNRecipient{hard, part("a@x.com", "failed", "5.2.1", "")}, hard, true},
		{"one part under another name", "a@x.com", []ports.DSNRecipient{other}, other, true},
		{"several parts none naming it", "a@x.com", []ports.DSNRecipient{other, part("q@y.com", "failed", "", "")}, ports.DSNRecipient{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := partForRecipient(tt.address, tt.parts)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("partForRecipient = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestDecideBounce(t *testing.T) {
	t.Parallel()
	type ev = evRow
	type bounce struct{ recipient, address, typ, status, action string }
	msgCall := func(parts ...ports.DSNRecipient) bounceCall {
		return bounceCall{orgID: "org", messageID: "msg", parts: parts, reportingMTA: "mta.x.com", now: testNow, ids: idSeq{base: testBase}}
	}
	rcptCall := func(id string, p ports.DSNRecipient) bounceCall {
		return bounceCall{orgID: "org", messageID: "msg", targetID: id, target: p, reportingMTA: "mta.x.com", now: testNow,
			ids: idSeq{base: testBase}}
	}
	tests := []struct {
		name         string
		call         bounceCall
		current      []ports.Recipient
		wantMatched  bool
		wantStatuses map[string]ports.MessageStatus
		wantEvents   []ev
		wantBounces  []bounce
		wantSuppress []string
	}{
		{
			name:         "async hard bounce after delivered",
			call:         msgCall(part("a@x.com", "failed", "5.1.1", diag550)),
			current:      testRecipients(ports.StatusDelivered, ports.StatusDelivered),
			wantMatched:  true,
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusBounced},
			wantEvents:   []ev{{ports.EventEmailBounced, "r1", str(diag550)}},
			wantBounces:  []bounce{{"r1", "a@x.com", ports.BounceHard, "5.1.1", "failed"}},
			wantSuppress: []string{"a@x.com"},
		},
		{
			name:         "original recipient matches without letter case; suppression lower-cased",
			call:         msgCall(ports.DSNRecipient{FinalRecipient: "b@forward.example", OriginalRecipient: "rfc822; b@x.COM", Action: "failed", Status: "5.1.1"}),
			current:      testRecipients(ports.StatusSent, ports.StatusSent),
			wantMatched:  true,
			wantStatuses: map[string]ports.MessageStatus{"r2": ports.StatusBounced},
			wantEvents:   []ev{{ports.EventEmailBounced, "r2", str("Status 5.1.1")}},
			wantBounces:  []bounce{{"r2", "B@X.com", ports.BounceHard, "5.1.1", "failed"}},
			wantSuppress: []string{"b@x.com"},
		},
		{
			name:        "no part names a recipient",
			call:        msgCall(part("z@y.com", "failed", "5.1.1", diag550)),
			current:     testRecipients(ports.StatusDelivered, ports.StatusDelivered),
			wantMatched: false,
		},
		{
			name:        "the same hard bounce again changes nothing",
			call:        msgCall(part("a@x.com", "failed", "5.1.1", diag550)),
			current:     testRecipients(ports.StatusBounced, ports.StatusDelivered),
			wantMatched: true,
		},
		{
			name:        "a cancelled recipient was never sent",
			call:        msgCall(part("a@x.com", "failed", "5.1.1", diag550)),
			current:     testRecipients(ports.StatusCancelled),
			wantMatched: true,
		},
		{
			name:         "hard bounce moves a failed recipient to bounced; an unreadable refusal suppresses nothing",
			call:         msgCall(part("a@x.com", "failed", "", "smtp; 554 no")),
			current:      testRecipients(ports.StatusFailed),
			wantMatched:  true,
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusBounced},
			wantEvents:   []ev{{ports.EventEmailBounced, "r1", str("smtp; 554 no")}},
			wantBounces:  []bounce{{"r1", "a@x.com", ports.BounceHard, "", "failed"}},
		},
		{
			name:        "soft bounce: record and delayed event only",
			call:        msgCall(part("a@x.com", "delayed", "4.2.2", diag452)),
			current:     testRecipients(ports.StatusDelivered, ports.StatusDelivered),
			wantMatched: true,
			wantEvents:  []ev{{ports.EventEmailDeliveryDelayed, "r1", str(diag452)}},
			wantBounces: []bounce{{"r1", "a@x.com", ports.BounceSoft, "4.2.2", "delayed"}},
		},
		{
			name:        "soft bounce after the recipient ended is dropped",
			call:        msgCall(part("a@x.com", "delayed", "4.2.2", diag452), part("b@x.com", "delayed", "4.2.2", diag452)),
			current:     testRecipients(ports.StatusFailed, ports.StatusBounced),
			wantMatched: true,
		},
		{
			name:         "hard wins over soft for one recipient",
			call:         msgCall(part("a@x.com", "delayed", "4.2.2", diag452), part("a@x.com", "failed", "5.1.1", diag550)),
			current:      testRecipients(ports.StatusSent),
			wantMatched:  true,
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusBounced},
			wantEvents:   []ev{{ports.EventEmailBounced, "r1", str(diag550)}},
			wantBounces:  []bounce{{"r1", "a@x.com", ports.BounceHard, "5.1.1", "failed"}},
			wantSuppress: []string{"a@x.com"},
		},
		{
			name:        "success parts match but change nothing",
			call:        msgCall(part("a@x.com", "relayed", "2.0.0", "")),
			current:     testRecipients(ports.StatusSent),
			wantMatched: true,
		},
		{
			name: "mixed report in recipient order, unknown part ignored",
			call: msgCall(part("c@x.com", "delayed", "", diag452), part("nobody@x.com", "failed", "5.1.1", ""),
				part("a@x.com", "", "", diag550)),
			current:      testRecipients(ports.StatusDelivered, ports.StatusDelivered, ports.StatusSent),
			wantMatched:  true,
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusBounced},
			wantEvents:   []ev{{ports.EventEmailBounced, "r1", str(diag550)}, {ports.EventEmailDeliveryDelayed, "r3", str(diag452)}},
			wantBounces: []bounce{{"r1", "a@x.com", ports.BounceHard, "5.1.1", "failed"},
				{"r3", "c@x.com", ports.BounceSoft, "4.2.2", "delayed"}},
			wantSuppress: []string{"a@x.com"},
		},
		{
			name:         "failed without any code: hard, no provider response, not suppressed",
			call:         msgCall(part("a@x.com", "failed", "", "")),
			current:      testRecipients(ports.StatusDelivered),
			wantMatched:  true,
			wantStatuses: map[string]ports.MessageStatus{"r1": ports.StatusBounced},
			wantEvents:   []ev{{ports.EventEmailBounced, "r1", nil}},
			wantBounces:  []bounce{{"r1", "a@x.com", ports.BounceHard, "", "failed"}},
		},
		{
			name:         "recipient token: the chosen part applies to that recipient",
			call:         rcptCall("r2", part("b@forward.example", "failed", "5.1.1", diag550)),
			current:      testRecipients(ports.StatusDelivered, ports.StatusDelivered),
			wantMatched:  true,
			wantStatuses: map[string]ports.MessageStatus{"r2": ports.StatusBounced},
			wantEvents:   []ev{{ports.EventEmailBounced, "r2", str(diag550)}},
			wantBounces:  []bounce{{"r2", "B@X.com", ports.BounceHard, "5.1.1", "failed"}},
			wantSuppress: []string{"b@x.com"},
		},
		{
			name:        "recipient token naming a recipient the message lacks",
			call:        rcptCall("r9", part("a@x.com", "failed", "5.1.1", diag550)),
			current:     testRecipients(ports.StatusDelivered),
			wantMatched: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app, matched := decideBounce(tt.call, tt.current)
			if matched != tt.wantMatched {
				t.Errorf("matched = %v, want %v", matched, tt.wantMatched)
			}
			if want := tt.wantStatuses; !maps.Equal(app.Recipients, want) && (len(want) > 0 || len(app.Recipients) > 0) {
				t.Errorf("statuses %v, want %v", app.Recipients, want)
			}
			for _, e := range app.Events {
				if e.OrganizationID != "org" || e.MessageID != "msg" || !e.OccurredAt.Equal(testNow) {
					t.Errorf("event %+v: want organization org, message msg, at %v", e, testNow)
				}
			}
			if events := evRows(app.Events); !reflect.DeepEqual(events, tt.wantEvents) {
				t.Errorf("events %v, want %v", events, tt.wantEvents)
			}
			var bounces []bounce
			for _, b := range app.Bounces {
				if b.OrganizationID != "org" || b.MessageID != "msg" || b.ReportingMTA != "mta.x.com" || !b.CreatedAt.Equal(testNow) {
					t.Errorf("bounce %+v: want organization, message, reporting MTA and time of the call", b)
				}
				bounces = append(bounces, bounce{b.RecipientID, b.Address, b.Type, b.Status, b.Action})
			}
			if !reflect.DeepEqual(bounces, tt.wantBounces) {
				t.Errorf("bounces %+v, want %+v", bounces, tt.wantBounces)
			}
			var suppressed []string
			for _, s := range app.Suppressions {
				if s.OrganizationID != "org" || s.Scope != ports.SuppressionScopeTenant || s.Reason != ports.SuppressionBounce {
					t.Errorf("suppression %+v: want a tenant suppression of org with reason bounce", s)
				}
				suppressed = append(suppressed, s.Address)
			}
			if !reflect.DeepEqual(suppressed, tt.wantSuppress) {
				t.Errorf("suppressed %v, want %v", suppressed, tt.wantSuppress)
			}
			if len(app.Complaints) > 0 {
				t.Errorf("a bounce recorded complaints: %+v", app.Complaints)
			}
			checkApplicationIDs(t, app)
			// decide may run again on a retried transaction: same input, same rows, same ids.
			again, matchedAgain := decideBounce(tt.call, tt.current)
			if !reflect.DeepEqual(app, again) || matched != matchedAgain {
				t.Errorf("a second call decided differently:\n%+v\n%+v", app, again)
			}
		})
	}
}

// TestDecideBounceKeepsDSNFields checks that a bounce record carries what the report said.
func TestDecideBounceKeepsDSNFields(t *testing.T) {
	t.Parallel()
	p := ports.DSNRecipient{FinalRecipient: "a@x.com", Action: "Failed", Status: "5.7.1", DiagnosticCode: " smtp; 550 5.7.1 spam ",
		RemoteMTA: "dns; mx1.x.com"}
	c := bounceCall{orgID: "org", messageID: "msg", parts: []ports.DSNRecipient{p}, reportingMTA: "dns; mta.postmill.local",
		now: testNow, ids: idSeq{base: testBase}}
	app, _ := decideBounce(c, testRecipients(ports.StatusDelivered))
	if len(app.Bounces) != 1 {
		t.Fatalf("bounces %+v, want one", app.Bounces)
	}
	b := app.Bounces[0]
	want := ports.Bounce{ID: b.ID, OrganizationID: "org", MessageID: "msg", RecipientID: "r1", Address: "a@x.com", Type: ports.BounceHard,
		Class: ports.BounceClassSpamBlock, Status: "5.7.1", Action: "failed", DiagnosticCode: " smtp; 550 5.7.1 spam ", RemoteMTA: "dns; mx1.x.com",
		ReportingMTA: "dns; mta.postmill.local", CreatedAt: testNow}
	if b != want {
		t.Errorf("bounce\n%+v, want\n%+v", b, want)
	}
	if r := app.Events[0].ProviderResponse; r == nil || *r != "smtp; 550 5.7.1 spam" {
		t.Errorf("provider response %v, want the trimmed diagnostic", r)
	}
}

func TestDecideBounceIDsDifferPerReport(t *testing.T) {
	t.Parallel()
	current := testRecipients(ports.StatusDelivered)
	c := bounceCall{orgID: "org", messageID: "msg", parts: []ports.DSNRecipient{part("a@x.com", "failed", "5.1.1", "")},
		now: testNow, ids: newIDSeq()}
	first, _ := decideBounce(c, current)
	c.ids = newIDSeq()
	second, _ := decideBounce(c, current)
	if first.Events[0].ID == second.Events[0].ID || first.Bounces[0].ID == second.Bounces[0].ID {
		t.Error("two reports produced the same ids")
	}
}

// checkApplicationIDs asserts that every row of an application has its own UUIDv7.
func checkApplicationIDs(tb testing.TB, app ports.FeedbackApplication) {
	tb.Helper()
	seen := map[string]bool{}
	check := func(id string) {
		mustUUIDv7(tb, id)
		if seen[id] {
			tb.Errorf("id %s used twice", id)
		}
		seen[id] = true
	}
	for _, b := range app.Bounces {
		check(b.ID)
	}
	for _, c := range app.Complaints {
		check(c.ID)
	}
	for _, e := range app.Events {
		check(e.ID)
	}
	for _, s := range app.Suppressions {
		check(s.ID)
	}
}

// evRow is what the tables assert of an event.
type evRow struct {
	typ, recipient string
	resp           *string
}

func (e evRow) String() string {
	resp := "<nil>"
	if e.resp != nil {
		resp = strconv.Quote(*e.resp)
	}
	return fmt.Sprintf("{%s %s %s}", e.typ, e.recipient, resp)
}

func evRows(events []ports.Event) []evRow {
	var out []evRow
	for _, e := range events {
		out = append(out, evRow{e.Type, e.RecipientID, e.ProviderResponse})
	}
	return out
}

func str(s string) *string { return &s }
