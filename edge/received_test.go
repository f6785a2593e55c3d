package edge_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// fakeReceived answers ListReceived with nothing and records the page each call asked for. The other
// InboundService methods are not called by these tests.
type fakeReceived struct {
	ports.InboundService
	mu    sync.Mutex
	pages [][2]int
}

func (f *fakeReceived) ListReceived(_ context.Context, _ string, limit, offset int) ([]ports.ReceivedEmail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pages = append(f.pages, [2]int{limit, offset})
	return nil, nil
}

func TestReceivedListPageBounds(t *testing.T) {
	t.Parallel()
	fake, fr := newFakeCore(), &fakeReceived{}
	core := fake.core()
	core.Inbound = fr
	s, err := edge.New(edge.Config{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()}, core)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	b := &testBundle{fake: fake, srv: srv, logs: &syncBuffer{}, reg: prometheus.NewRegistry()}

	for query, want := range map[string][2]int{"": {25, 0}, "?limit=": {25, 0}, "?limit=1": {1, 0}, "?limit=100&offset=7": {100, 7}} {
		r := mustStatus(t, b.do(t, "GET", "/v1/received-emails"+query, starKey, nil), 200)
		if r.body["limit"] != float64(want[0]) || r.body["offset"] != float64(want[1]) {
			t.Errorf("%q: %s, want limit %d offset %d", query, r.raw, want[0], want[1])
		}
	}
	// SPEC §8: limit 1-100, as on every other list; refused before the core is asked.
	for query, field := range map[string]string{
		"?limit=0":   "limit",
		"?limit=101": "limit",
		"?limit=-1":  "limit",
		"?limit=x":   "limit",
		"?offset=-1": "offset",
	} {
		r := b.do(t, "GET", "/v1/received-emails"+query, starKey, nil)
		if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Equal(got, []string{field}) {
			t.Errorf("%s: detail paths %v, want [%s]", query, got, field)
		}
	}
	fr.mu.Lock()
	defer fr.mu.Unlock()
	slices.SortFunc(fr.pages, func(x, y [2]int) int { return x[0] - y[0] })
	if !slices.Equal(fr.pages, [][2]int{{1, 0}, {25, 0}, {25, 0}, {100, 7}}) {
		t.Errorf("pages reaching the core: %v, want only the four valid requests'", fr.pages)
	}
}
