package inbound

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func rt(id, typ, value string, prio int, age int, enabled bool) ports.InboundRoute {
	return ports.InboundRoute{ID: id, MatchType: typ, MatchValue: value, Priority: prio, Enabled: enabled,
		CreatedAt: t0.Add(time.Duration(age) * time.Second), Action: ports.ActionStore}
}

// TestRoutePrecedence: SPEC §4.12's order, rule by rule.
func TestRoutePrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		routes []ports.InboundRoute
		addr   string
		want   string // route id, "" for none
	}{
		{"exact beats pattern and catch-all even at worse priority",
			[]ports.InboundRoute{rt("c", ports.MatchCatchAll, "", 0, 0, true), rt("p", ports.MatchPattern, "*@a.test", 0, 0, true), rt("e", ports.MatchExact, "x@a.test", 10000, 9, true)},
			"x@a.test", "e"},
		{"pattern beats catch-all", []ports.InboundRoute{rt("c", ports.MatchCatchAll, "", 0, 0, true), rt("p", ports.MatchPattern, "x*@a.test", 500, 5, true)},
			"xy@a.test", "p"},
		{"more literal pattern wins over lower priority", []ports.InboundRoute{rt("p1", ports.MatchPattern, "*@a.test", 0, 0, true), rt("p2", ports.MatchPattern, "sup*@a.test", 900, 1, true)},
			"support@a.test", "p2"},
		{"equal literals: lower priority", []ports.InboundRoute{rt("p1", ports.MatchPattern, "a*@a.test", 50, 0, true), rt("p2", ports.MatchPattern, "*b@a.test", 10, 1, true)},
			"ab@a.test", "p2"},
		{"equal priority: older", []ports.InboundRoute{rt("p2", ports.MatchPattern, "a*@a.test", 5, 2, true), rt("p1", ports.MatchPattern, "*b@a.test", 5, 1, true)},
			"ab@a.test", "p1"},
		{"same createdAt: lower id", []ports.InboundRoute{rt("b", ports.MatchCatchAll, "", 5, 1, true), rt("a", ports.MatchCatchAll, "", 5, 1, true)},
			"z@a.test", "a"},
		{"disabled never matches", []ports.InboundRoute{rt("e", ports.MatchExact, "x@a.test", 0, 0, false), rt("c", ports.MatchCatchAll, "", 1, 1, true)},
			"x@a.test", "c"},
		{"nothing matches", []ports.InboundRoute{rt("e", ports.MatchExact, "x@a.test", 0, 0, true), rt("p", ports.MatchPattern, "y*@a.test", 0, 0, true)},
			"z@a.test", ""},
		{"star matches empty", []ports.InboundRoute{rt("p", ports.MatchPattern, "x*@a.test", 0, 0, true)}, "x@a.test", "p"},
		{"pattern is over the full address", []ports.InboundRoute{rt("p", ports.MatchPattern, "x*", 0, 0, true)}, "xyz@b.test", "p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := compile(tt.routes).match(tt.addr)
			gotID := ""
			if got != nil {
				gotID = got.ID
			}
			if gotID != tt.want {
				t.Fatalf("match(%q) = %q, want %q", tt.addr, gotID, tt.want)
			}
		})
	}
}

// bruteForce is the reference: every enabled route that matches, then the minimum under precedes.
func bruteForce(routes []ports.InboundRoute, addr string) *ports.InboundRoute {
	var best *ports.InboundRoute
	for i := range routes {
		r := routes[i]
		if !r.Enabled {
			continue
		}
		ok := false
		switch r.MatchType {
		case ports.MatchExact:
			ok = r.MatchValue == addr
		case ports.MatchPattern:
			ok = naiveGlob(r.MatchValue, addr)
		case ports.MatchCatchAll:
			ok = true
		}
		if ok && (best == nil || precedes(r, *best)) {
			best = &r
		}
	}
	return best
}

// naiveGlob is the recursive definition of '*' matching.
func naiveGlob(p, s string) bool {
	if p == "" {
		return s == ""
	}
	if p[0] == '*' {
		for i := 0; i <= len(s); i++ {
			if naiveGlob(p[1:], s[i:]) {
				return true
			}
		}
		return false
	}
	return s != "" && p[0] == s[0] && naiveGlob(p[1:], s[1:])
}

// TestRouteRandomized: the compiled matcher agrees with the brute-force reference on random route sets.
func TestRouteRandomized(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	alpha := "ab*"
	word := func(n int, stars bool) string {
		b := make([]byte, n)
		for i := range b {
			if stars {
				b[i] = alpha[rng.IntN(3)]
			} else {
				b[i] = alpha[rng.IntN(2)]
			}
		}
		return string(b)
	}
	for iter := range 3000 {
		var routes []ports.InboundRoute
		for j := range 1 + rng.IntN(8) {
			typ := []string{ports.MatchExact, ports.MatchPattern, ports.MatchCatchAll}[rng.IntN(3)]
			v := ""
			switch typ {
			case ports.MatchExact:
				v = word(1+rng.IntN(3), false) + "@d.test"
			case ports.MatchPattern:
				v = word(1+rng.IntN(4), true) + "@d.test"
			}
			routes = append(routes, rt(fmt.Sprintf("r%02d", rng.IntN(20)+j*20), typ, v, rng.IntN(3), rng.IntN(3), rng.IntN(5) > 0))
		}
		c := compile(routes)
		for range 10 {
			addr := word(rng.IntN(4), false) + "@d.test"
			got, want := c.match(addr), bruteForce(routes, addr)
			if (got == nil) != (want == nil) || (got != nil && got.ID != want.ID) {
				t.Fatalf("iteration %d, %q: got %+v, want %+v (routes %+v)", iter, addr, got, want, routes)
			}
		}
	}
}

// TestCheckRouteDomain: a route whose match value cannot be an address at its own inbound domain is
// refused; a pattern whose domain part holds a * is left alone.
func TestCheckRouteDomain(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		matchType, value string
		ok               bool
	}{
		{ports.MatchExact, "x@in.acme.example", true},
		{ports.MatchExact, "x@in.evil.example", false},
		{ports.MatchExact, "x@sub.in.acme.example", false},
		{ports.MatchPattern, "support-*@in.acme.example", true},
		{ports.MatchPattern, "support-*@in.evil.example", false},
		{ports.MatchPattern, "*@*.example", true},
		{ports.MatchPattern, "*@*", true},
		{ports.MatchPattern, "*acme.example", true},
		{ports.MatchCatchAll, "", true},
	} {
		if msg := checkRouteDomain(tt.matchType, tt.value, "in.acme.example"); (msg == "") != tt.ok {
			t.Errorf("%s %q: %q, want ok=%v", tt.matchType, tt.value, msg, tt.ok)
		}
	}
}
