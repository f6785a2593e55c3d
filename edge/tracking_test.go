package edge_test

import (
	"bytes"
	"context"
	"errors"
	"image/gif"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/postmill/postmill/ports"
)

// Tokens the fake tracking service knows.
const (
	openTok        = "b3Blbi10b2tlbg"
	clickTok       = "Y2xpY2stdG9rZW4"
	goneTok        = "Z29uZS10b2tlbg"
	brokenTok      = "YnJva2VuLXRva2Vu"
	clickTarget    = "https://shop.example.com/item/7?utm_source=mail&x=%2F"
	clickTargetLog = "shop.example.com"
)

// fakeTracking answers Open and Click from fixed tokens and records every call.
type fakeTracking struct {
	mu    sync.Mutex
	calls []string // "open <token>" or "click <token>"
}

func (f *fakeTracking) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeTracking) callsSnapshot() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeTracking) answer(token string) error {
	switch token {
	case openTok, clickTok:
		return nil
	case goneTok:
		return ports.NotFound("message not found")
	case brokenTok:
		return errors.New("pg: connection reset talking to db-3.internal")
	}
	return ports.Errorf(ports.CodeInvalidArgument, "invalid tracking token")
}

func (f *fakeTracking) Open(_ context.Context, token string) error {
	f.record("open " + token)
	if token == clickTok {
		return ports.Errorf(ports.CodeInvalidArgument, "invalid tracking token")
	}
	return f.answer(token)
}

func (f *fakeTracking) Click(_ context.Context, token string) (string, error) {
	f.record("click " + token)
	if token == openTok {
		return "", ports.Errorf(ports.CodeInvalidArgument, "invalid tracking token")
	}
	if err := f.answer(token); err != nil {
		return "", err
	}
	return clickTarget, nil
}

// trackingBundle is an edge whose core has a fakeTracking.
type trackingBundle struct {
	*testBundle
	tracking *fakeTracking
}

// MustStartTrackingEdge serves an edge whose core answers tracking tokens from a fakeTracking.
func MustStartTrackingEdge(tb testing.TB) trackingBundle {
	tb.Helper()
	ft := &fakeTracking{}
	fake := newFakeCore()
	fake.tracking = ft
	return trackingBundle{testBundle: MustStartEdge(tb, fake, nil), tracking: ft}
}

// get sends method path with the Host a mail client would use and does not follow redirects.
func (b trackingBundle) get(tb testing.TB, method, path string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Host = "track.customer-domain.test"
	client := *b.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := client.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return res, body
}

// mustPixel checks that res is the transparent 1x1 GIF, uncacheable.
func mustPixel(tb testing.TB, res *http.Response, body []byte, head bool) {
	tb.Helper()
	if res.StatusCode != http.StatusOK {
		tb.Fatalf("status %d, want 200: %s", res.StatusCode, body)
	}
	h := res.Header
	if h.Get("Content-Type") != "image/gif" || h.Get("Content-Length") != "43" ||
		h.Get("Cache-Control") != "no-store, no-cache, must-revalidate, private" || h.Get("Pragma") != "no-cache" {
		tb.Errorf("pixel headers: %v", h)
	}
	if head {
		if len(body) != 0 {
			tb.Errorf("HEAD answered a body of %d bytes", len(body))
		}
		return
	}
	if len(body) != 43 {
		tb.Fatalf("pixel is %d bytes, want 43", len(body))
	}
	img, err := gif.Decode(bytes.NewReader(body))
	if err != nil {
		tb.Fatalf("pixel is not a GIF: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1 || b.Dy() != 1 {
		tb.Errorf("pixel is %dx%d", b.Dx(), b.Dy())
	}
	if _, _, _, a := img.At(0, 0).RGBA(); a != 0 {
		tb.Errorf("pixel alpha %d, want transparent", a)
	}
}

func TestTrackingOpenPixel(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A", 513)
	tests := []struct {
		name      string
		method    string
		path      string
		wantCalls []string
	}{
		{"valid token is recorded", "GET", "/t/o/" + openTok, []string{"open " + openTok}},
		{"a token Postmill did not make still gets the pixel", "GET", "/t/o/bm90LW91cnM", []string{"open bm90LW91cnM"}},
		{"a click token at the pixel still gets the pixel", "GET", "/t/o/" + clickTok, []string{"open " + clickTok}},
		{"a message that is gone still gets the pixel", "GET", "/t/o/" + goneTok, []string{"open " + goneTok}},
		{"a failing core still answers the pixel", "GET", "/t/o/" + brokenTok, []string{"open " + brokenTok}},
		{"HEAD answers the pixel's headers and records nothing", "HEAD", "/t/o/" + openTok, nil},
		{"an over-long token never reaches the core", "GET", "/t/o/" + long, nil},
		{"no token", "GET", "/t/o/", nil},
		{"a mangled path with extra segments", "GET", "/t/o/" + openTok + "/x", []string{"open " + openTok + "/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := MustStartTrackingEdge(t)
			res, body := b.get(t, tt.method, tt.path)
			mustPixel(t, res, body, tt.method == "HEAD")
			if got := b.tracking.callsSnapshot(); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("core calls %q, want %q", got, tt.wantCalls)
			}
		})
	}
}

func TestTrackingOpenLogs(t *testing.T) {
	t.Parallel()
	b := MustStartTrackingEdge(t)
	res, _ := b.get(t, "GET", "/t/o/"+brokenTok)
	id := res.Header.Get("X-Request-Id")
	var internal, access bool
	for _, l := range b.logs.lines(t) {
		if l["msg"] == "internal error" && l["request_id"] == id && strings.Contains(l["error"].(string), "db-3") {
			internal = true
		}
		if l["msg"] == "request" && l["route"] == "/t/o/{token...}" && l["status"] == float64(200) {
			access = true
		}
	}
	if !internal || !access {
		t.Errorf("internal error logged %v, access log by route %v: %s", internal, access, b.logs.String())
	}
	if strings.Contains(b.logs.String(), brokenTok) {
		t.Errorf("a token reached the logs: %s", b.logs.String())
	}
}

func TestTrackingClick(t *testing.T) {
	t.Parallel()
	b := MustStartTrackingEdge(t)
	res, body := b.get(t, "GET", "/t/c/"+clickTok)
	if res.StatusCode != http.StatusFound {
		t.Fatalf("status %d, want 302: %s", res.StatusCode, body)
	}
	if got := res.Header.Get("Location"); got != clickTarget {
		t.Errorf("Location %q, want %q", got, clickTarget)
	}
	if got := res.Header.Get("Cache-Control"); !strings.Contains(got, "no-store") {
		t.Errorf("Cache-Control %q", got)
	}
	if got := b.tracking.callsSnapshot(); !slices.Equal(got, []string{"click " + clickTok}) {
		t.Errorf("core calls %q", got)
	}
	if strings.Contains(b.logs.String(), clickTok) || strings.Contains(b.logs.String(), clickTargetLog) {
		t.Errorf("the token or the target reached the logs: %s", b.logs.String())
	}
}

func TestTrackingClickRefused(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A", 513)
	tests := []struct {
		name      string
		method    string
		path      string
		status    int
		message   string
		wantCalls []string
	}{
		{"a token Postmill did not make", "GET", "/t/c/bm90LW91cnM", 404, "Link not found", []string{"click bm90LW91cnM"}},
		{"an open token at the click route", "GET", "/t/c/" + openTok, 404, "Link not found", []string{"click " + openTok}},
		{"a message or link that is gone", "GET", "/t/c/" + goneTok, 404, "Link not found", []string{"click " + goneTok}},
		{"an over-long token never reaches the core", "GET", "/t/c/" + long, 404, "Link not found", nil},
		{"a failing core", "GET", "/t/c/" + brokenTok, 500, "Internal Server Error", []string{"click " + brokenTok}},
		{"extra segments match no route", "GET", "/t/c/" + clickTok + "/https://evil.test", 404, "", nil},
		{"no token", "GET", "/t/c/", 404, "", nil},
		{"a POST is no click", "POST", "/t/c/" + clickTok, 404, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := MustStartTrackingEdge(t)
			r := b.do(t, tt.method, tt.path, "", nil)
			mustError(t, r, tt.status, "", tt.message)
			if loc := r.header.Get("Location"); loc != "" {
				t.Errorf("refused click redirects to %q", loc)
			}
			if strings.Contains(string(r.raw), "db-3") {
				t.Errorf("the cause leaked: %s", r.raw)
			}
			if got := b.tracking.callsSnapshot(); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("core calls %q, want %q", got, tt.wantCalls)
			}
		})
	}
}

func TestTrackingClickHEADRecordsNothing(t *testing.T) {
	t.Parallel()
	b := MustStartTrackingEdge(t)
	res, body := b.get(t, "HEAD", "/t/c/"+clickTok)
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET" {
		t.Fatalf("HEAD: status %d, Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
	if res.Header.Get("Location") != "" || len(body) != 0 {
		t.Errorf("HEAD answered Location %q and %d body bytes", res.Header.Get("Location"), len(body))
	}
	if got := b.tracking.callsSnapshot(); len(got) != 0 {
		t.Errorf("HEAD reached the core: %q", got)
	}
}

func TestTrackingRoutesStayOutOfOpenAPI(t *testing.T) {
	t.Parallel()
	b := MustStartTrackingEdge(t)
	r := mustStatus(t, b.do(t, "GET", "/v1/openapi.json", "", nil), 200)
	if !strings.Contains(string(r.raw), `"/v1/`) {
		t.Fatalf("not the OpenAPI document: %.200s", r.raw)
	}
	if strings.Contains(string(r.raw), `"/t/`) {
		t.Errorf("the OpenAPI document lists tracking routes")
	}
}
