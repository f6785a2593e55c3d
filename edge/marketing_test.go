package edge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// fakeMarketing stands in for the contact, topic, segment and public preference services: it records the
// organization of each call and answers fixed values, so the tests exercise the edge alone.
type fakeMarketing struct {
	mu   sync.Mutex
	orgs []string
	// pages are the limit and offset of every topic or segment list that reached the service.
	pages [][2]int
}

var mkTime = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func (f *fakeMarketing) note(org string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orgs = append(f.orgs, org)
}

func (f *fakeMarketing) notePage(org string, limit, offset int) {
	f.note(org)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pages = append(f.pages, [2]int{limit, offset})
}

func mkContact() ports.Contact {
	return ports.Contact{ID: "0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d17", Email: "=ada@example.com", FirstName: "+Ada",
		Properties: map[string]any{"plan": "@pro"}, ConsentStatus: "subscribed", CreatedAt: mkTime, UpdatedAt: mkTime}
}

func (f *fakeMarketing) CreateContact(_ context.Context, org string, _ ports.ContactInput) (ports.Contact, error) {
	f.note(org)
	return mkContact(), nil
}
func (f *fakeMarketing) GetContact(_ context.Context, org, _ string) (ports.Contact, error) {
	f.note(org)
	return mkContact(), nil
}
func (f *fakeMarketing) UpdateContact(_ context.Context, org, _ string, _ ports.ContactInput) (ports.Contact, error) {
	f.note(org)
	return mkContact(), nil
}
func (f *fakeMarketing) DeleteContact(_ context.Context, org, _ string) error {
	f.note(org)
	return nil
}
func (f *fakeMarketing) ListContacts(_ context.Context, org string, q ports.ContactQuery) (ports.ContactList, error) {
	f.note(org)
	return ports.ContactList{Data: []ports.Contact{mkContact()}, Total: 7, Limit: q.Limit, Offset: q.Offset}, nil
}
func (f *fakeMarketing) ImportContacts(_ context.Context, org string, _ ports.ImportRequest) (ports.ImportResult, error) {
	f.note(org)
	return ports.ImportResult{Created: 1}, nil
}

// ExportContactsPage answers 2,500 contacts in pages, so the export crosses page boundaries.
func (f *fakeMarketing) ExportContactsPage(_ context.Context, org, after string, limit int) ([]ports.Contact, error) {
	f.note(org)
	start := 0
	if after != "" {
		fmt.Sscanf(after[len(after)-6:], "%d", &start)
	}
	var out []ports.Contact
	for i := start + 1; i <= min(start+limit, 2500); i++ {
		c := mkContact()
		c.ID = fmt.Sprintf("0196f3c2-8a41-7d3e-9c55-2f1b6a%06d", i)
		out = append(out, c)
	}
	return out, nil
}
func (f *fakeMarketing) ContactPreferences(_ context.Context, org, _ string) (ports.Preferences, error) {
	f.note(org)
	return ports.Preferences{ConsentStatus: "subscribed"}, nil
}
func (f *fakeMarketing) UpdateContactPreferences(_ context.Context, org, _ string, _ ports.PreferenceUpdate) (ports.Preferences, error) {
	f.note(org)
	return ports.Preferences{ConsentStatus: "subscribed"}, nil
}
func (f *fakeMarketing) PublicPreferences(context.Context, string) (ports.Preferences, error) {
	return ports.Preferences{}, ports.Errorf(ports.CodeInvalidArgument, "invalid token")
}
func (f *fakeMarketing) UpdatePublicPreferences(context.Context, string, ports.PreferenceUpdate) (ports.Preferences, error) {
	return ports.Preferences{}, ports.Errorf(ports.CodeInvalidArgument, "invalid token")
}
func (f *fakeMarketing) GetConfirmation(context.Context, string) (ports.PublicConfirmation, error) {
	return ports.PublicConfirmation{}, ports.Errorf(ports.CodeInvalidArgument, "invalid token")
}
func (f *fakeMarketing) ConfirmTopic(context.Context, string, string) (ports.PublicConfirmation, error) {
	return ports.PublicConfirmation{}, ports.Errorf(ports.CodeInvalidArgument, "invalid token")
}
func (f *fakeMarketing) CreateTopic(_ context.Context, org string, _ ports.TopicInput) (ports.Topic, error) {
	f.note(org)
	return ports.Topic{ID: "0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d18", Key: "news", Name: "News", CreatedAt: mkTime, UpdatedAt: mkTime}, nil
}
func (f *fakeMarketing) GetTopic(ctx context.Context, org, _ string) (ports.Topic, error) {
	return f.CreateTopic(ctx, org, ports.TopicInput{})
}
func (f *fakeMarketing) ListTopics(_ context.Context, org string, limit, offset int) ([]ports.Topic, error) {
	f.notePage(org, limit, offset)
	return nil, nil
}
func (f *fakeMarketing) UpdateTopic(ctx context.Context, org, _ string, _ ports.TopicInput) (ports.Topic, error) {
	return f.CreateTopic(ctx, org, ports.TopicInput{})
}
func (f *fakeMarketing) DeleteTopic(_ context.Context, org, _ string) error { f.note(org); return nil }
func (f *fakeMarketing) SubscribeTopic(_ context.Context, org, _ string, _ ports.SubscriptionRequest) (ports.SubscriptionResult, error) {
	f.note(org)
	return ports.SubscriptionResult{Subscription: ports.TopicSubscription{Status: "pending"}, ConfirmToken: "tok"}, nil
}
func (f *fakeMarketing) UnsubscribeTopic(ctx context.Context, org, id string, r ports.SubscriptionRequest) (ports.SubscriptionResult, error) {
	return f.SubscribeTopic(ctx, org, id, r)
}
func (f *fakeMarketing) CreateSegment(_ context.Context, org string, in ports.SegmentInput) (ports.Segment, error) {
	f.note(org)
	return ports.Segment{ID: "0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d19", Name: "Pro", Rule: json.RawMessage(`{"field":"email","cmp":"exists"}`)}, nil
}
func (f *fakeMarketing) GetSegment(ctx context.Context, org, _ string) (ports.Segment, error) {
	return f.CreateSegment(ctx, org, ports.SegmentInput{})
}
func (f *fakeMarketing) ListSegments(_ context.Context, org string, limit, offset int) ([]ports.Segment, error) {
	f.notePage(org, limit, offset)
	return nil, nil
}
func (f *fakeMarketing) UpdateSegment(ctx context.Context, org, _ string, in ports.SegmentInput) (ports.Segment, error) {
	return f.CreateSegment(ctx, org, in)
}
func (f *fakeMarketing) DeleteSegment(_ context.Context, org, _ string) error {
	f.note(org)
	return nil
}
func (f *fakeMarketing) PreviewRule(_ context.Context, org string, _ json.RawMessage, _ int) (ports.SegmentPreview, error) {
	f.note(org)
	return ports.SegmentPreview{Count: 3}, nil
}
func (f *fakeMarketing) PreviewSegment(_ context.Context, org, _ string, _ int) (ports.SegmentPreview, error) {
	f.note(org)
	return ports.SegmentPreview{Count: 3}, nil
}

// startMarketingEdge serves an edge whose core has the marketing services.
func startMarketingEdge(t *testing.T) (*testBundle, *fakeMarketing) {
	t.Helper()
	fake, mk := newFakeCore(), &fakeMarketing{}
	core := fake.core()
	core.Contacts, core.Topics, core.Segments, core.Preferences = mk, mk, mk, mk
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	s, err := edge.New(edge.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registerer: reg}, core)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &testBundle{fake: fake, srv: srv, logs: logs, reg: reg}, mk
}

func marketingPath(path string) bool {
	for _, p := range []string{"/v1/contacts", "/v1/topics", "/v1/segments"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// TestMarketingOpenAPI checks the marketing routes' part of the OpenAPI document: every property and
// parameter described, every request body with examples the route accepts.
func TestMarketingOpenAPI(t *testing.T) {
	t.Parallel()
	b, _ := startMarketingEdge(t)
	doc := mustOpenAPI(t, b)
	var missing []string
	for name, s := range doc.Components.Schemas {
		for prop, p := range s.Properties {
			if strings.TrimSpace(p.Description) == "" {
				missing = append(missing, name+"."+prop)
			}
		}
	}
	ops := 0
	doc.eachOperation(func(method, path string, op openAPIOperation) {
		if !marketingPath(path) {
			return
		}
		ops++
		for _, p := range op.Parameters {
			if strings.TrimSpace(p.Description) == "" {
				missing = append(missing, fmt.Sprintf("%s %s parameter %s", method, path, p.Name))
			}
		}
		if op.RequestBody == nil {
			return
		}
		examples := op.RequestBody.Content["application/json"].values()
		if len(examples) == 0 {
			t.Errorf("%s %s: no request example", method, path)
		}
		target := strings.ReplaceAll(path, "{id}", "0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d19")
		for i, ex := range examples {
			if r := b.do(t, method, target, starKey, ex); r.status >= 400 {
				t.Errorf("%s %s: example %d refused: %d %s", method, path, i, r.status, r.raw)
			}
		}
	})
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s has no description", m)
	}
	if ops != 23 {
		t.Errorf("%d marketing operations documented, want 23", ops)
	}
}

// TestMarketingRoutesUseTheKeysOrganization checks that the organization of every call is the key's, and
// that the scopes of SPEC §5 guard the routes.
func TestMarketingRoutesUseTheKeysOrganization(t *testing.T) {
	t.Parallel()
	b, mk := startMarketingEdge(t)
	r := b.do(t, "GET", "/v1/contacts?envelope=1&organizationId=other", starKey, nil)
	mustStatus(t, r, 200)
	if r.body["total"] != 7.0 {
		t.Fatalf("envelope: %s", r.raw)
	}
	mk.mu.Lock()
	orgs := append([]string(nil), mk.orgs...)
	mk.mu.Unlock()
	for _, o := range orgs {
		if o == "other" || o == "" {
			t.Fatalf("the organization came from the request: %v", orgs)
		}
	}
	mustStatus(t, b.do(t, "GET", "/v1/contacts/not-a-uuid", starKey, nil), 400)
	mustStatus(t, b.do(t, "GET", "/v1/contacts", "", nil), 401)
}

// TestContactExportStreamsNeutralisedCSV reads an export of several pages and checks the columns and the
// neutralised cells.
func TestContactExportStreamsNeutralisedCSV(t *testing.T) {
	t.Parallel()
	b, _ := startMarketingEdge(t)
	req, _ := http.NewRequest("GET", b.srv.URL+"/v1/contacts/export", nil)
	req.Header.Set("Authorization", "Bearer "+starKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv") || len(lines) != 2501 {
		t.Fatalf("export: %d %v, %d lines", res.StatusCode, res.Header, len(lines))
	}
	if lines[0] != "email,first_name,last_name,locale,timezone,source,consent_status,consent_at,bounced,properties" ||
		!strings.HasPrefix(lines[1], "'=ada@example.com,'+Ada,") || !strings.Contains(lines[1], `"{""plan"":""@pro""}"`) {
		t.Fatalf("rows: %q %q", lines[0], lines[1])
	}
}
