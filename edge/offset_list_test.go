package edge_test

import (
	"slices"
	"testing"
)

// TestOffsetListsPageBounds: GET /v1/topics, /v1/segments and /v1/broadcasts take limit (1-100, default
// 25) and offset (from 0) as GET /v1/contacts does, answer a bare array, and refuse a bound outside them
// with the 400 of SPEC §7 before the core is asked.
func TestOffsetListsPageBounds(t *testing.T) {
	t.Parallel()
	mb, mk := startMarketingEdge(t)
	bb, fb := startBroadcastEdge(t)
	routes := []struct {
		path  string
		b     *testBundle
		pages func() [][2]int
	}{
		{"/v1/topics", mb, func() [][2]int { mk.mu.Lock(); defer mk.mu.Unlock(); return slices.Clone(mk.pages) }},
		{"/v1/segments", mb, func() [][2]int { mk.mu.Lock(); defer mk.mu.Unlock(); return slices.Clone(mk.pages) }},
		{"/v1/broadcasts", bb, func() [][2]int { fb.mu.Lock(); defer fb.mu.Unlock(); return slices.Clone(fb.pages) }},
	}
	for _, rt := range routes {
		before := len(rt.pages())
		for _, q := range []string{"", "?limit=", "?limit=1", "?limit=100&offset=7", "?offset=3"} {
			r := mustStatus(t, rt.b.do(t, "GET", rt.path+q, starKey, nil), 200)
			if len(r.raw) == 0 || r.raw[0] != '[' {
				t.Errorf("GET %s%s: %s, want a bare array", rt.path, q, r.raw)
			}
		}
		for query, field := range map[string]string{
			"?limit=0":   "limit",
			"?limit=101": "limit",
			"?limit=-1":  "limit",
			"?limit=abc": "limit",
			"?offset=-1": "offset",
			"?offset=x":  "offset",
		} {
			r := rt.b.do(t, "GET", rt.path+query, starKey, nil)
			if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Equal(got, []string{field}) {
				t.Errorf("GET %s%s: detail paths %v, want [%s]", rt.path, query, got, field)
			}
		}
		got := rt.pages()[before:]
		if want := [][2]int{{25, 0}, {25, 0}, {1, 0}, {100, 7}, {25, 3}}; !slices.Equal(got, want) {
			t.Errorf("GET %s: pages reaching the core %v, want %v", rt.path, got, want)
		}
	}
}
