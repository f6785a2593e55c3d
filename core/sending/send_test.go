package sending

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// seqIDs returns a deterministic id generator: id-1, id-2, ...
func seqIDs() func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("id-%d", n)
	}
}

func TestDedupeRecipients(t *testing.T) {
	t.Parallel()
	type rc struct{ typ, addr string }
	tests := []struct {
		name        string
		to, cc, bcc []string
		want        []rc
	}{
		{"one", []string{"a@x.com"}, nil, nil, []rc{{"to", "a@x.com"}}},
		{"all types in order", []string{"a@x.com"}, []string{"b@x.com"}, []string{"c@y.com"},
			[]rc{{"to", "a@x.com"}, {"cc", "b@x.com"}, {"bcc", "c@y.com"}}},
		{"repeat within to", []string{"a@x.com", "b@x.com", "a@x.com"}, nil, nil,
			[]rc{{"to", "a@x.com"}, {"to", "b@x.com"}}},
		{"to wins over cc and bcc", []string{"a@x.com"}, []string{"a@x.com"}, []string{"a@x.com"},
			[]rc{{"to", "a@x.com"}}},
		{"cc wins over bcc", nil, []string{"b@x.com"}, []string{"b@x.com", "c@x.com"},
			[]rc{{"cc", "b@x.com"}, {"bcc", "c@x.com"}}},
		{"case-insensitive, first spelling kept", []string{"Alice@Example.com"}, []string{"alice@example.COM"}, nil,
			[]rc{{"to", "Alice@Example.com"}}},
		{"nothing", nil, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []rc
			for _, r := range dedupeRecipients(tt.to, tt.cc, tt.bcc) {
				got = append(got, rc{r.Type, r.Address})
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGroupJobs(t *testing.T) {
	t.Parallel()
	r := func(id, addr string) ports.Recipient { return ports.Recipient{ID: id, Address: addr} }
	many := make([]ports.Recipient, 0, 250)
	for i := range 250 {
		many = append(many, r(fmt.Sprintf("m%d", i), fmt.Sprintf("u%d@big.example", i)))
	}
	many = append(many[:120:120], append([]ports.Recipient{r("s", "s@small.example")}, many[120:]...)...)
	tests := []struct {
		name       string
		recipients []ports.Recipient
		want       []string // "domain:count:first id"
	}{
		{"none", nil, nil},
		{"one", []ports.Recipient{r("1", "a@x.com")}, []string{"x.com:1:1"}},
		{"same domain together", []ports.Recipient{r("1", "a@x.com"), r("2", "b@y.com"), r("3", "c@x.com")},
			[]string{"x.com:2:1", "y.com:1:2"}},
		{"domain case folded", []ports.Recipient{r("1", "a@X.com"), r("2", "b@x.COM")}, []string{"x.com:2:1"}},
		{"subdomains are other domains", []ports.Recipient{r("1", "a@x.com"), r("2", "b@mail.x.com")},
			[]string{"x.com:1:1", "mail.x.com:1:2"}},
		{"over 100 split", many, []string{"big.example:100:m0", "big.example:100:m100", "small.example:1:s", "big.example:50:m200"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			total := 0
			for _, g := range groupJobs(tt.recipients) {
				got = append(got, fmt.Sprintf("%s:%d:%s", g.Domain, len(g.RecipientIDs), g.RecipientIDs[0]))
				total += len(g.RecipientIDs)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("groups = %v, want %v", got, tt.want)
			}
			if total != len(tt.recipients) {
				t.Fatalf("%d recipients in groups, want %d", total, len(tt.recipients))
			}
		})
	}
}

func TestGroupJobsKeepsRecipientsOfADomain(t *testing.T) {
	t.Parallel()
	recipients := []ports.Recipient{
		{ID: "1", Address: "a@x.com"}, {ID: "2", Address: "b@y.com"}, {ID: "3", Address: "c@x.com"}, {ID: "4", Address: "d@y.com"},
	}
	groups := groupJobs(recipients)
	if len(groups) != 2 || !slices.Equal(groups[0].RecipientIDs, []string{"1", "3"}) || !slices.Equal(groups[1].RecipientIDs, []string{"2", "4"}) {
		t.Fatalf("groups = %+v", groups)
	}
}

func TestAcceptMessage(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 31, 23, 59, 59, 0, time.UTC)
	future := now.Add(time.Hour)
	past := now.Add(-time.Hour)
	base := func() acceptance {
		return acceptance{
			messageID: "msg", orgID: "org", domainID: "dom", now: now,
			req: ports.SendRequest{From: "news@acme.example", Subject: "S", Text: "T", IdempotencyKey: "k",
				Tags: map[string]string{"a": "b"}},
			recipients: []ports.Recipient{
				{ID: "r1", Type: "to", Address: "a@x.com"}, {ID: "r2", Type: "cc", Address: "b@y.com"}, {ID: "r3", Type: "bcc", Address: "c@x.com"},
			},
			plan: ports.Plan{MonthlyLimit: 3000, WarmupCap: 100},
		}
	}
	tests := []struct {
		name          string
		mut           func(*acceptance)
		wantStatus    ports.MessageStatus
		wantEvents    []string
		wantJobs      []string // domain:ids
		wantScheduled bool
	}{
		{"immediate", func(a *acceptance) {}, ports.StatusQueued, []string{ports.EventEmailQueued}, []string{"x.com:r1,r3", "y.com:r2"}, false},
		{"scheduled in the future", func(a *acceptance) { a.req.ScheduledAt = &future }, ports.StatusScheduled, []string{ports.EventEmailScheduled}, nil, true},
		{"scheduled in the past sends now", func(a *acceptance) { a.req.ScheduledAt = &past }, ports.StatusQueued, []string{ports.EventEmailQueued}, []string{"x.com:r1,r3", "y.com:r2"}, false},
		{"scheduled now sends now", func(a *acceptance) { a.req.ScheduledAt = &now }, ports.StatusQueued, []string{ports.EventEmailQueued}, []string{"x.com:r1,r3", "y.com:r2"}, false},
		{"sandbox", func(a *acceptance) { a.req.Sandbox = true }, ports.StatusSent, []string{ports.EventEmailQueued, ports.EventEmailSent}, nil, false},
		{"scheduled sandbox waits for the scheduler", func(a *acceptance) { a.req.Sandbox = true; a.req.ScheduledAt = &future }, ports.StatusScheduled, []string{ports.EventEmailScheduled}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := base()
			tt.mut(&a)
			nm := acceptMessage(a, seqIDs())
			m := nm.Message
			if m.Status != tt.wantStatus {
				t.Fatalf("status = %q, want %q", m.Status, tt.wantStatus)
			}
			for _, r := range m.Recipients {
				if r.Status != tt.wantStatus {
					t.Errorf("recipient %s status = %q, want %q", r.ID, r.Status, tt.wantStatus)
				}
			}
			if (m.ScheduledAt != nil) != tt.wantScheduled {
				t.Errorf("ScheduledAt = %v, want set %v", m.ScheduledAt, tt.wantScheduled)
			}
			var events []string
			for i, e := range nm.Events {
				events = append(events, e.Type)
				if e.MessageID != "msg" || e.OrganizationID != "org" || e.ID == "" || e.RecipientID != "" {
					t.Errorf("event %d = %+v", i, e)
				}
				if i > 0 && !e.OccurredAt.After(nm.Events[i-1].OccurredAt) {
					t.Errorf("event %d does not sort after the previous one by time", i)
				}
			}
			if !slices.Equal(events, tt.wantEvents) {
				t.Fatalf("events = %v, want %v", events, tt.wantEvents)
			}
			if a.req.Sandbox && tt.wantStatus == ports.StatusSent {
				if p := nm.Events[1].ProviderResponse; p == nil || *p != "sandbox: not delivered" {
					t.Errorf("sandbox sent providerResponse = %v", p)
				}
			}
			var jobs []string
			for _, j := range nm.Outbox {
				jobs = append(jobs, j.Domain+":"+strings.Join(j.RecipientIDs, ","))
				if j.Attempt != 1 || !j.FirstQueuedAt.Equal(now) || j.NotBefore.After(now) || j.MessageID != "msg" || j.OrganizationID != "org" || j.ID == "" {
					t.Errorf("job = %+v", j)
				}
			}
			if !slices.Equal(jobs, tt.wantJobs) {
				t.Fatalf("jobs = %v, want %v", jobs, tt.wantJobs)
			}
			// Every accepted send is metered per recipient in the request's UTC day, scheduled and sandbox too.
			if u := nm.Usage; u.Units != 3 || len(u.Limits) != 2 || u.Limits[0].Max != a.plan.MonthlyLimit ||
				u.Limits[1].Max != a.plan.WarmupCap || !u.Limits[1].Period.Equal(time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("usage = %+v, plan %+v", u, a.plan)
			}
			if m.ID != "msg" || m.OrganizationID != "org" || m.DomainID != "dom" || m.IdempotencyKey != "k" || m.Tags["a"] != "b" || !m.CreatedAt.Equal(now) {
				t.Errorf("message = %+v", m)
			}
		})
	}
}

func TestUTCDay(t *testing.T) {
	t.Parallel()
	// 23:30 at UTC-5 is already the next day in UTC: the warm-up cap counts UTC days.
	got := utcDay(time.Date(2026, 1, 31, 23, 30, 0, 0, time.FixedZone("EST", -5*3600)))
	if want := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("utcDay = %v, want %v", got, want)
	}
}

func TestAttachmentKey(t *testing.T) {
	t.Parallel()
	if got := attachmentKey("o", "m", "a"); got != "att/o/m/a" {
		t.Fatalf("attachmentKey = %q", got)
	}
}

func TestNormaliseListQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		q         ports.ListEmailsQuery
		wantLimit int
		wantPaths []string
	}{
		{"default limit", ports.ListEmailsQuery{}, 25, nil},
		{"1", ports.ListEmailsQuery{Limit: 1}, 1, nil},
		{"100", ports.ListEmailsQuery{Limit: 100}, 100, nil},
		{"101", ports.ListEmailsQuery{Limit: 101}, 101, []string{"limit"}},
		{"negative", ports.ListEmailsQuery{Limit: -1}, -1, []string{"limit"}},
		{"status filter", ports.ListEmailsQuery{Status: ports.StatusCancelled}, 25, nil},
		{"unknown status", ports.ListEmailsQuery{Status: "canceled"}, 25, []string{"status"}},
		{"both wrong", ports.ListEmailsQuery{Limit: 500, Status: "x"}, 500, []string{"limit", "status"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, violations := normaliseListQuery(tt.q)
			var paths []string
			for _, v := range violations {
				paths = append(paths, v.Path)
			}
			if q.Limit != tt.wantLimit || !slices.Equal(paths, tt.wantPaths) {
				t.Fatalf("limit %d, paths %v; want %d, %v", q.Limit, paths, tt.wantLimit, tt.wantPaths)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		testMessageID:               true,
		"":                          false,
		"42":                        false,
		"{" + testMessageID + "}":   false,
		"urn:uuid:" + testMessageID: false,
	} {
		if got := validID(id); got != want {
			t.Errorf("validID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestOrgPausedError(t *testing.T) {
	t.Parallel()
	e := orgPausedError()
	if e.Code != ports.CodePermissionDenied || e.Reason != "org_suspended" || e.Message != "organization sending is paused" {
		t.Fatalf("orgPausedError = %+v", e)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"zero value uses defaults", Config{}, false},
		{"custom", Config{RetryBase: time.Second, RetryCap: time.Minute, MaxAge: time.Hour, RelayBatch: 10, SchedulerBatch: 10}, false},
		{"cache disabled", Config{LookupCacheTTL: -1}, false},
		{"negative base", Config{RetryBase: -time.Second}, true},
		{"base above cap", Config{RetryBase: 3 * time.Hour}, true},
		{"max age below base", Config{MaxAge: 30 * time.Second}, true},
		{"negative interval", Config{RelayInterval: -time.Second}, true},
		{"negative batch", Config{RelayBatch: -1}, true},
		{"huge batch", Config{SchedulerBatch: 1_000_000}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults()
	want := Config{RetryBase: time.Minute, RetryCap: 2 * time.Hour, MaxAge: 72 * time.Hour, RelayInterval: 100 * time.Millisecond,
		RelayBatch: 500, SchedulerInterval: time.Second, SchedulerBatch: 200, LookupCacheTTL: time.Second,
		HoldRecheckInterval: 30 * time.Second, HoldReleaseBatch: 1000}
	if c != want {
		t.Fatalf("defaults = %+v, want %+v", c, want)
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Fatal("New accepted no stores")
	}
	if _, err := New(Config{RelayBatch: -1}, Deps{}); err == nil {
		t.Fatal("New accepted an invalid config")
	}
}
