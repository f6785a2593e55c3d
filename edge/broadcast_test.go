package edge_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// fakeBroadcasts records what the broadcast routes hand the core.
type fakeBroadcasts struct {
	mu      sync.Mutex
	patches []ports.BroadcastPatch
	orgs    []string
	pages   [][2]int // limit and offset of every list that reached the service
}

var testBroadcast = ports.Broadcast{
	ID: "0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d19", Name: "N", Subject: "S", From: "news@acme.test", Text: "t",
	TopicID: "0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d18", Status: ports.BroadcastDraft,
	CreatedAt: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC),
}

func (f *fakeBroadcasts) note(org string) {
	f.mu.Lock()
	f.orgs = append(f.orgs, org)
	f.mu.Unlock()
}

func (f *fakeBroadcasts) CreateBroadcast(_ context.Context, org string, _ ports.NewBroadcast) (ports.Broadcast, error) {
	f.note(org)
	return testBroadcast, nil
}
func (f *fakeBroadcasts) ListBroadcasts(_ context.Context, org string, limit, offset int) ([]ports.Broadcast, error) {
	f.note(org)
	f.mu.Lock()
	f.pages = append(f.pages, [2]int{limit, offset})
	f.mu.Unlock()
	return []ports.Broadcast{testBroadcast}, nil
}
func (f *fakeBroadcasts) GetBroadcast(_ context.Context, org, _ string) (ports.Broadcast, error) {
	f.note(org)
	return testBroadcast, nil
}
func (f *fakeBroadcasts) UpdateBroadcast(_ context.Context, org, _ string, p ports.BroadcastPatch) (ports.Broadcast, error) {
	f.note(org)
	f.mu.Lock()
	f.patches = append(f.patches, p)
	f.mu.Unlock()
	return testBroadcast, nil
}
func (f *fakeBroadcasts) DeleteBroadcast(_ context.Context, org, _ string) error {
	f.note(org)
	return nil
}
func (f *fakeBroadcasts) SendBroadcast(_ context.Context, org, _ string) (ports.Broadcast, error) {
	f.note(org)
	b := testBroadcast
	b.Status = ports.BroadcastSending
	return b, nil
}
func (f *fakeBroadcasts) ScheduleBroadcast(_ context.Context, org, _ string, at time.Time) (ports.Broadcast, error) {
	f.note(org)
	b := testBroadcast
	b.Status, b.ScheduledAt = ports.BroadcastScheduled, &at
	return b, nil
}
func (f *fakeBroadcasts) CancelBroadcast(_ context.Context, org, _ string) (ports.Broadcast, error) {
	f.note(org)
	return ports.Broadcast{}, ports.Errorf(ports.CodeFailedPrecondition, "only a scheduled broadcast can be canceled")
}
func (f *fakeBroadcasts) BroadcastStats(_ context.Context, org, _ string) (ports.BroadcastStats, error) {
	f.note(org)
	return ports.BroadcastStats{Recipients: 3, Delivered: 2}, nil
}
func (f *fakeBroadcasts) BroadcastRecipients(_ context.Context, org, _ string, limit, offset int) ([]ports.BroadcastRecipient, int64, error) {
	f.note(org)
	return []ports.BroadcastRecipient{{ContactID: testBroadcast.TopicID, Email: "a@b.test", Status: "suppressed"}}, 7, nil
}

func (f *fakeBroadcasts) PreviewUnsubscribe(_ context.Context, token string) (ports.UnsubscribeView, error) {
	if token != "good" {
		return ports.UnsubscribeView{}, ports.Errorf(ports.CodeInvalidArgument, "invalid token")
	}
	return ports.UnsubscribeView{MaskedEmail: "a•••@b.test", TopicName: "<News>"}, nil
}
func (f *fakeBroadcasts) Unsubscribe(ctx context.Context, token string) (ports.UnsubscribeView, error) {
	return f.PreviewUnsubscribe(ctx, token)
}

// startBroadcastEdge serves the fake core with broadcasts added.
func startBroadcastEdge(t *testing.T) (*testBundle, *fakeBroadcasts) {
	t.Helper()
	fake, fb := newFakeCore(), &fakeBroadcasts{}
	core := fake.core()
	core.Broadcasts, core.Unsubscribe = fb, fb
	s, err := edge.New(edge.Config{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()}, core)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &testBundle{fake: fake, srv: srv, logs: &syncBuffer{}, reg: prometheus.NewRegistry()}, fb
}

// TestBroadcastOpenAPI holds the broadcast routes to the rules TestOpenAPIDocumentsEveryBody and
// TestOpenAPIDescribesEveryField apply to the routes of the default fake core: every field described,
// every body with examples the route accepts.
func TestBroadcastOpenAPI(t *testing.T) {
	t.Parallel()
	b, _ := startBroadcastEdge(t)
	doc := mustOpenAPI(t, b)
	ops := 0
	doc.eachOperation(func(method, path string, op openAPIOperation) {
		if !strings.HasPrefix(path, "/v1/broadcasts") {
			return
		}
		ops++
		for _, p := range op.Parameters {
			if strings.TrimSpace(p.Description) == "" {
				t.Errorf("%s %s parameter %s has no description", method, path, p.Name)
			}
		}
		if op.RequestBody == nil {
			return
		}
		examples := op.RequestBody.Content["application/json"].values()
		if len(examples) == 0 {
			t.Errorf("%s %s has no body example", method, path)
		}
		target := strings.ReplaceAll(path, "{id}", testBroadcast.ID)
		for i, ex := range examples {
			if r := b.do(t, method, target, credentialFor(op), ex); r.status >= 400 {
				t.Errorf("%s %s: example %d refused: %d %s", method, path, i, r.status, r.raw)
			}
		}
	})
	if ops != 10 {
		t.Errorf("%d broadcast operations documented, want 10", ops)
	}
	for name, s := range doc.Components.Schemas {
		if !strings.Contains(strings.ToLower(name), "broadcast") {
			continue
		}
		for prop, p := range s.Properties {
			if strings.TrimSpace(p.Description) == "" {
				t.Errorf("%s.%s has no description", name, prop)
			}
		}
	}
}

func TestBroadcastRoutes_ShapesScopesAndNull(t *testing.T) {
	t.Parallel()
	b, fb := startBroadcastEdge(t)
	id := testBroadcast.ID
	r := mustStatus(t, b.do(t, "POST", "/v1/broadcasts/"+id+"/send", starKey, nil), 200)
	if r.body["status"] != "sending" || r.body["html"] != nil {
		t.Errorf("send: %s", r.raw)
	}
	r = mustStatus(t, b.do(t, "POST", "/v1/broadcasts/"+id+"/schedule", starKey, map[string]any{"scheduledAt": "2026-12-01T10:00:00+01:00"}), 200)
	if string(r.raw) != `{"scheduledAt":"2026-12-01T09:00:00Z"}`+"\n" {
		t.Errorf("schedule: %s", r.raw)
	}
	mustStatus(t, b.do(t, "POST", "/v1/broadcasts/"+id+"/cancel", starKey, nil), 409)
	// An explicit null clears, an absent key does not.
	mustStatus(t, b.do(t, "PATCH", "/v1/broadcasts/"+id, starKey, `{"segmentId":null,"name":"x"}`), 200)
	if p := fb.patches[len(fb.patches)-1]; !p.ClearSegment || p.ClearTopic || p.ClearScheduledAt || *p.Name != "x" {
		t.Errorf("patch = %+v", p)
	}
	env := mustStatus(t, b.do(t, "GET", "/v1/broadcasts/"+id+"/recipients?envelope=1&limit=5&offset=2", starKey, nil), 200)
	if env.body["total"] != 7.0 || env.body["limit"] != 5.0 || env.body["offset"] != 2.0 {
		t.Errorf("envelope: %s", env.raw)
	}
	bare := mustStatus(t, b.do(t, "GET", "/v1/broadcasts/"+id+"/recipients", starKey, nil), 200)
	if len(bare.list) != 1 {
		t.Errorf("bare: %s", bare.raw)
	}
	mustStatus(t, b.do(t, "GET", "/v1/broadcasts/"+id+"/recipients?limit=201", starKey, nil), 400)
	mustStatus(t, b.do(t, "GET", "/v1/broadcasts/not-a-uuid", starKey, nil), 400)
	mustStatus(t, b.do(t, "GET", "/v1/broadcasts", "", nil), 401)
}

func TestUnsubscribePage(t *testing.T) {
	t.Parallel()
	b, _ := startBroadcastEdge(t)
	page := b.do(t, "GET", "/p/u/good", "", nil)
	html := string(page.raw)
	if page.status != 200 || !strings.Contains(html, "&lt;News&gt;") || strings.Contains(html, "<News>") ||
		!strings.Contains(html, `<form method="post"`) || strings.Contains(html, "<script") || strings.Contains(html, "style=") {
		t.Fatalf("page %d: %s", page.status, html)
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "style-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	css := b.do(t, "GET", "/p/assets/unsubscribe.css", "", nil)
	if css.status != 200 || !strings.HasPrefix(css.header.Get("Content-Type"), "text/css") || !strings.Contains(string(css.raw), "focus-visible") {
		t.Errorf("stylesheet %d %s", css.status, css.header.Get("Content-Type"))
	}
	done := b.do(t, "POST", "/p/u/good", "", "List-Unsubscribe=One-Click", "Content-Type", "application/x-www-form-urlencoded")
	if done.status != 200 || !strings.Contains(string(done.raw), "You are unsubscribed") {
		t.Errorf("post %d: %s", done.status, done.raw)
	}
	js := b.do(t, "POST", "/p/u/good", "", nil, "Accept", "application/json")
	var v map[string]any
	if js.status != 200 || json.Unmarshal(js.raw, &v) != nil || v["unsubscribed"] != true {
		t.Errorf("json %d: %s", js.status, js.raw)
	}
	bad := b.do(t, "GET", "/p/u/bad", "", nil)
	if bad.status != http.StatusBadRequest || !strings.Contains(string(bad.raw), "not valid") {
		t.Errorf("bad %d: %s", bad.status, bad.raw)
	}
	long := b.do(t, "GET", "/p/u/"+strings.Repeat("a", 600), "", nil, "Accept", "application/json")
	if long.status != 400 || long.body["message"] != "invalid token" {
		t.Errorf("long %d: %s", long.status, long.raw)
	}
}
