package sending

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// This file drives Service.Send over in-memory fakes of its ports and proves SPEC §4.2's order of checks:
// an idempotent replay before anything else, then the From domain, the organization, suppressions, the
// template, the attachment scan and last the metering, with each refusal keeping every later step from
// running. The PostgreSQL tests prove the stores; here only the order and what reaches each port matter.
//
// Every fake appends the step it served to one journal. A fake embeds its port, so a method the send path
// is not expected to call panics instead of passing silently.

// sendWorld is a Service over fakes sharing one journal.
type sendWorld struct {
	svc *Service

	mu      sync.Mutex
	journal []string

	replays    map[string]string // idempotency key → message id of an earlier send
	domains    map[string]ports.Domain
	org        ports.Organization
	suppressed map[string]bool
	templates  map[string]ports.RenderedTemplate
	infected   map[string]bool // attachment filenames the scanner rejects
	meters     map[string]int64
	inserted   []ports.NewMessage
	blobs      map[string]bool
	// racedKey, when set, is a key whose first use another send wins between the replay check and the
	// insert: the store then answers with that send's message.
	racedKey string
}

const (
	orderOrgID  = "0193d6d0-0000-7000-8000-000000000001"
	orderDomain = "acme.example"
)

var orderNow = time.Date(2026, 5, 20, 10, 0, 0, 0, time.UTC)

func newSendWorld(tb testing.TB) *sendWorld {
	tb.Helper()
	w := &sendWorld{
		replays: map[string]string{},
		domains: map[string]ports.Domain{
			orderDomain:       {ID: "dom-1", OrganizationID: orderOrgID, Name: orderDomain, Status: ports.DomainVerified},
			"pending.example": {ID: "dom-2", OrganizationID: orderOrgID, Name: "pending.example", Status: ports.DomainPending},
		},
		org:        ports.Organization{ID: orderOrgID, Plan: ports.Plan{MonthlyLimit: 1000, WarmupCap: 100}},
		suppressed: map[string]bool{},
		templates:  map[string]ports.RenderedTemplate{},
		infected:   map[string]bool{},
		meters:     map[string]int64{},
		blobs:      map[string]bool{},
	}
	kr, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		tb.Fatal(err)
	}
	w.svc, err = New(Config{LookupCacheTTL: -1}, Deps{
		Messages:      fakeMessages{w: w},
		Domains:       fakeDomains{w: w},
		Organizations: fakeOrganizations{w: w},
		Outbox:        fakeOutbox{},
		Delivery:      fakeDelivery{},
		Queue:         fakeQueue{},
		Blobs:         fakeBlobs{w: w},
		Scanner:       fakeScanner{w: w},
		Templates:     fakeTemplates{w: w},
		Keyring:       kr,
		Clock:         fixedClock{orderNow},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

func (w *sendWorld) log(step string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.journal = append(w.journal, step)
}

// steps returns the journal so far and starts a new one.
func (w *sendWorld) steps() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.journal
	w.journal = nil
	return j
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

type fakeMessages struct {
	ports.MessageStore
	w *sendWorld
}

func (f fakeMessages) MessageByIdempotencyKey(_ context.Context, orgID, key string) (string, ports.MessageStatus, error) {
	f.w.log("idempotency")
	if id, ok := f.w.replays[key]; ok && orgID == orderOrgID {
		return id, ports.StatusQueued, nil
	}
	return "", "", ports.NotFound("message not found")
}

func (f fakeMessages) SuppressedAmong(_ context.Context, _ string, addresses []string) (map[string]bool, error) {
	f.w.log("suppressions")
	out := map[string]bool{}
	for _, a := range addresses {
		if f.w.suppressed[a] {
			out[a] = true
		}
	}
	return out, nil
}

// InsertMessage meters as the store port promises: the units go onto every limit's meter or onto none, and
// the first limit they would pass is named.
func (f fakeMessages) InsertMessage(_ context.Context, nm ports.NewMessage) (ports.Inserted, error) {
	f.w.log("meter")
	w := f.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if key := nm.Message.IdempotencyKey; key != "" && key == w.racedKey {
		return ports.Inserted{ID: "raced-message", Status: ports.StatusQueued, Existing: true}, nil
	}
	meter := func(l ports.UsageLimit) string { return l.Metric + "@" + l.Period.Format(time.DateOnly) }
	for _, l := range nm.Usage.Limits {
		if w.meters[meter(l)] > l.Max-nm.Usage.Units {
			return ports.Inserted{OverLimit: &l}, nil
		}
	}
	for _, l := range nm.Usage.Limits {
		w.meters[meter(l)] += nm.Usage.Units
	}
	w.inserted = append(w.inserted, nm)
	return ports.Inserted{ID: nm.Message.ID, Status: nm.Message.Status}, nil
}

type fakeDomains struct {
	ports.DomainStore
	w *sendWorld
}

func (f fakeDomains) DomainByName(_ context.Context, orgID, name string) (ports.Domain, error) {
	f.w.log("domain")
	d, ok := f.w.domains[name]
	if !ok || orgID != d.OrganizationID {
		return ports.Domain{}, ports.NotFound("domain not found")
	}
	return d, nil
}

type fakeOrganizations struct {
	ports.OrganizationStore
	w *sendWorld
}

func (f fakeOrganizations) Organization(_ context.Context, orgID string) (ports.Organization, error) {
	f.w.log("organization")
	if orgID != f.w.org.ID {
		return ports.Organization{}, ports.NotFound("organization not found")
	}
	return f.w.org, nil
}

type fakeTemplates struct{ w *sendWorld }

func (f fakeTemplates) RenderTemplate(_ context.Context, _, templateID string, _ map[string]any) (ports.RenderedTemplate, error) {
	f.w.log("template")
	r, ok := f.w.templates[templateID]
	if !ok {
		return ports.RenderedTemplate{}, ports.MissingReference(ports.TemplatesConstraint)
	}
	return r, nil
}

type fakeScanner struct{ w *sendWorld }

func (f fakeScanner) Scan(_ context.Context, filename, _ string, _ []byte) (ports.ScanVerdict, error) {
	f.w.log("scan")
	if f.w.infected[filename] {
		return ports.ScanVerdict{Signature: "Eicar-Test-Signature"}, nil
	}
	return ports.ScanVerdict{Clean: true}, nil
}

type fakeBlobs struct {
	ports.BlobStore
	w *sendWorld
}

func (f fakeBlobs) Put(_ context.Context, key string, _ []byte, _ string) error {
	f.w.log("blob put")
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.w.blobs[key] = true
	return nil
}

func (f fakeBlobs) Delete(_ context.Context, key string) error {
	f.w.log("blob delete")
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	delete(f.w.blobs, key)
	return nil
}

// The delivery side's ports: Send never calls them.
type (
	fakeOutbox   struct{ ports.Outbox }
	fakeDelivery struct{ ports.DeliveryStore }
	fakeQueue    struct{ ports.Queue }
)

// orderRequest is a send that passes every check of the default world: two recipients (one repeated in
// cc, so two units), a template and an attachment.
func orderRequest() ports.SendRequest {
	return ports.SendRequest{
		From:        "News <news@" + orderDomain + ">",
		To:          []string{"ada@example.org", "bob@example.net"},
		Cc:          []string{"ADA@example.org"},
		Subject:     "Hello",
		Template:    &ports.TemplateRef{ID: "0193d6d0-0000-7000-8000-0000000000aa", Variables: map[string]any{"name": "Ada"}},
		Attachments: []ports.Attachment{{Filename: "report.pdf", ContentType: "application/pdf", Content: []byte("%PDF-1.7")}},
	}
}

// The full path, in SPEC §4.2's order.
var fullPath = []string{"domain", "organization", "suppressions", "template", "scan", "blob put", "meter"}

func TestSend_OrderOfChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name      string
		setup     func(*sendWorld, *ports.SendRequest)
		wantSteps []string
		wantCode  ports.Code
		wantMsg   string // part of the error's message
	}{
		{
			name:      "a new send runs every check, metering last",
			setup:     func(*sendWorld, *ports.SendRequest) {},
			wantSteps: fullPath,
		},
		{
			name:      "with an idempotency key the replay check comes first",
			setup:     func(_ *sendWorld, r *ports.SendRequest) { r.IdempotencyKey = "order-1" },
			wantSteps: append([]string{"idempotency"}, fullPath...),
		},
		{
			name: "an unknown From domain stops the send before the organization is read",
			setup: func(_ *sendWorld, r *ports.SendRequest) {
				r.From = "news@unknown.example"
			},
			wantSteps: []string{"domain"},
			wantCode:  ports.CodeInvalidArgument,
			wantMsg:   "domain unknown.example not found for this org",
		},
		{
			name:      "an unverified From domain stops the send before the organization is read",
			setup:     func(_ *sendWorld, r *ports.SendRequest) { r.From = "news@pending.example" },
			wantSteps: []string{"domain"},
			wantCode:  ports.CodeInvalidArgument,
			wantMsg:   "domain pending.example is not verified",
		},
		{
			name:      "a paused organization stops the send before suppressions",
			setup:     func(w *sendWorld, _ *ports.SendRequest) { w.org.Paused = true },
			wantSteps: []string{"domain", "organization"},
			wantCode:  ports.CodePermissionDenied,
			wantMsg:   "organization sending is paused",
		},
		{
			name: "a suppressed recipient never reaches the template, the scanner or the meter",
			setup: func(w *sendWorld, _ *ports.SendRequest) {
				w.suppressed["bob@example.net"] = true
			},
			wantSteps: []string{"domain", "organization", "suppressions"},
			wantCode:  ports.CodeInvalidArgument,
			wantMsg:   "recipient suppressed: bob@example.net",
		},
		{
			name: "an unknown template stops the send before the scan",
			setup: func(w *sendWorld, _ *ports.SendRequest) {
				clear(w.templates)
			},
			wantSteps: []string{"domain", "organization", "suppressions", "template"},
			wantCode:  ports.CodeInvalidArgument,
			wantMsg:   "Referenced resource does not exist",
		},
		{
			name: "an infected attachment stops the send before anything is stored or metered",
			setup: func(w *sendWorld, _ *ports.SendRequest) {
				w.infected["report.pdf"] = true
			},
			wantSteps: []string{"domain", "organization", "suppressions", "template", "scan"},
			wantCode:  ports.CodeInvalidArgument,
			wantMsg:   "attachment report.pdf rejected: Eicar-Test-Signature",
		},
		{
			name: "over the monthly allowance the send is refused after every other check, its blobs removed",
			setup: func(w *sendWorld, _ *ports.SendRequest) {
				w.org.Plan.MonthlyLimit = 1 // two units wanted
			},
			wantSteps: append(slices.Clone(fullPath), "blob delete"),
			wantCode:  ports.CodePaymentRequired,
			wantMsg:   "Plan limit reached for emails_sent",
		},
		{
			name: "over the warm-up cap the send is refused after every other check, its blobs removed",
			setup: func(w *sendWorld, _ *ports.SendRequest) {
				w.org.Plan.WarmupCap = 1
			},
			wantSteps: append(slices.Clone(fullPath), "blob delete"),
			wantCode:  ports.CodeResourceExhausted,
			wantMsg:   "warm-up daily send cap reached",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newSendWorld(t)
			w.templates["0193d6d0-0000-7000-8000-0000000000aa"] = ports.RenderedTemplate{Subject: "Hi Ada", HTML: "<p>Hi Ada</p>"}
			req := orderRequest()
			tt.setup(w, &req)
			res, err := w.svc.Send(ctx, orderOrgID, req)
			if got := w.steps(); !slices.Equal(got, tt.wantSteps) {
				t.Fatalf("steps = %v, want %v", got, tt.wantSteps)
			}
			if tt.wantCode == "" {
				if err != nil || res.ID == "" || res.Status != ports.StatusQueued || res.Deduped {
					t.Fatalf("Send = %+v, %v; want a queued message", res, err)
				}
				if len(w.inserted) != 1 {
					t.Fatalf("%d messages stored, want 1", len(w.inserted))
				}
				return
			}
			if got := ports.ErrorCode(err); got != tt.wantCode {
				t.Fatalf("error = %v (%s), want %s", err, got, tt.wantCode)
			}
			if e, _ := ports.AsError(err); !strings.Contains(e.Describe(), tt.wantMsg) && !strings.Contains(e.Message, tt.wantMsg) {
				t.Fatalf("error %q does not say %q", e.Describe(), tt.wantMsg)
			}
			if len(w.inserted) != 0 || len(w.blobs) != 0 {
				t.Fatalf("a refused send left %d messages and %d blobs", len(w.inserted), len(w.blobs))
			}
			for k, v := range w.meters {
				if v != 0 {
					t.Fatalf("a refused send metered %d on %s", v, k)
				}
			}
		})
	}
}

// TestSend_ReplayTouchesNothingElse: a used idempotency key answers with the original message even when
// every later check would refuse the send now, and no other port is asked anything.
func TestSend_ReplayTouchesNothingElse(t *testing.T) {
	t.Parallel()
	w := newSendWorld(t)
	w.replays["order-1"] = "0193d6d0-0000-7000-8000-0000000000ff"
	w.org.Paused = true
	w.org.Plan = ports.Plan{MonthlyLimit: 1, WarmupCap: 1}
	w.suppressed["ada@example.org"] = true
	w.infected["report.pdf"] = true
	req := orderRequest()
	req.IdempotencyKey = "order-1"
	req.From = "news@pending.example"

	res, err := w.svc.Send(context.Background(), orderOrgID, req)
	if err != nil || res.ID != "0193d6d0-0000-7000-8000-0000000000ff" || !res.Deduped || res.Status != ports.StatusQueued {
		t.Fatalf("Send = %+v, %v; want the original message, deduped", res, err)
	}
	if got := w.steps(); !slices.Equal(got, []string{"idempotency"}) {
		t.Fatalf("steps = %v, want only the replay check", got)
	}
}

// TestSend_ReplayRacingTheInsert: when another send wins the key between the replay check and the insert,
// the store answers with that send's message; the send is deduped and its attachments are removed again.
func TestSend_ReplayRacingTheInsert(t *testing.T) {
	t.Parallel()
	w := newSendWorld(t)
	w.templates["0193d6d0-0000-7000-8000-0000000000aa"] = ports.RenderedTemplate{Subject: "Hi", Text: "Hi"}
	w.racedKey = "order-1"
	req := orderRequest()
	req.IdempotencyKey = "order-1"
	res, err := w.svc.Send(context.Background(), orderOrgID, req)
	if err != nil || res.ID != "raced-message" || !res.Deduped {
		t.Fatalf("Send = %+v, %v; want the winner's message, deduped", res, err)
	}
	want := append(append([]string{"idempotency"}, fullPath...), "blob delete")
	if got := w.steps(); !slices.Equal(got, want) {
		t.Fatalf("steps = %v, want %v", got, want)
	}
	if len(w.blobs) != 0 {
		t.Fatalf("%d blobs left behind", len(w.blobs))
	}
}

// TestSend_MetersWhatTheCoreDecided: the store is asked to meter one unit per distinct recipient under the
// plan's allowance and warm-up cap of the request's UTC month and day, scheduled and sandbox sends alike,
// and the allowance runs out across sends.
func TestSend_MetersWhatTheCoreDecided(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newSendWorld(t)
	w.org.Plan = ports.Plan{MonthlyLimit: 5}
	later := orderNow.Add(time.Hour)
	for i, mut := range []func(*ports.SendRequest){
		func(*ports.SendRequest) {},
		func(r *ports.SendRequest) { r.Sandbox = true },
		func(r *ports.SendRequest) { r.ScheduledAt = &later },
	} {
		req := ports.SendRequest{From: "news@" + orderDomain, To: []string{"a@example.org"}, Cc: []string{"A@example.org"}, Bcc: []string{fmt.Sprintf("b%d@example.org", i)}, Subject: "S", Text: "T"}
		mut(&req)
		if _, err := w.svc.Send(ctx, orderOrgID, req); i < 2 && err != nil {
			t.Fatalf("send %d: %v", i, err)
		} else if i == 2 && ports.ErrorCode(err) != ports.CodePaymentRequired {
			// 2 + 2 units used; the third send's two units would make 6 of 5.
			t.Fatalf("send %d = %v, want plan_limit_exceeded", i, err)
		}
	}
	if len(w.inserted) != 2 {
		t.Fatalf("%d sends stored, want 2", len(w.inserted))
	}
	u := w.inserted[1].Usage
	want := ports.Usage{Units: 2, Limits: []ports.UsageLimit{
		{Metric: ports.MetricEmailsSent, Period: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), Max: 5},
		{Metric: ports.MetricEmailsSentDaily, Period: time.Date(2026, 5, 20, 0, 0, 0, 0, time.UTC), Max: ports.NoLimit},
	}}
	if u.Units != want.Units || len(u.Limits) != 2 || u.Limits[0] != want.Limits[0] || u.Limits[1] != want.Limits[1] {
		t.Fatalf("usage of the sandbox send = %+v, want %+v", u, want)
	}
	if w.meters[ports.MetricEmailsSent+"@2026-05-01"] != 4 {
		t.Fatalf("meters = %v, want 4 units this month", w.meters)
	}
}

// A template's rendered parts have a send's own bounds: a subject over 998 characters or a body over 5 MiB
// is a 400 at template.variables, and nothing is written.
func TestSend_RenderedTemplateWithinTheSendBounds(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]ports.RenderedTemplate{
		"subject": {Subject: strings.Repeat("s", ports.MaxSubjectChars+1), Text: "t"},
		"html":    {Subject: "s", HTML: strings.Repeat("h", ports.MaxBodyPartBytes+1)},
		"text":    {Subject: "s", Text: strings.Repeat("t", ports.MaxBodyPartBytes+1)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newSendWorld(t)
			w.templates["0193d6d0-0000-7000-8000-0000000000aa"] = r
			_, err := w.svc.Send(context.Background(), orderOrgID, orderRequest())
			pe, ok := ports.AsError(err)
			if !ok || pe.Code != ports.CodeInvalidArgument || len(pe.Details) != 1 || pe.Details[0].Path != "template.variables" ||
				!strings.Contains(pe.Details[0].Message, "the rendered "+name+" must be at most") {
				t.Fatalf("Send = %v, want a 400 at template.variables for the rendered %s", err, name)
			}
			for _, step := range w.steps() {
				if strings.Contains(step, "insert") {
					t.Fatalf("steps %v: something was written", w.steps())
				}
			}
		})
	}
}
