package inbound

import (
	"sort"
	"strings"

	"github.com/postmill/postmill/ports"
)

// compiled is one inbound domain's routes in the order SPEC §4.12 gives them, ready to match: exact routes by
// address, then patterns and catch-alls in precedence order. Disabled routes are left out.
type compiled struct {
	exact    map[string]ports.InboundRoute
	patterns []ports.InboundRoute
	catchAll *ports.InboundRoute
}

// literals is how many non-'*' characters a pattern has: the more, the more specific.
func literals(pattern string) int { return len(pattern) - strings.Count(pattern, "*") }

// typeRank orders match types: exact before pattern before catch_all.
func typeRank(t string) int {
	switch t {
	case ports.MatchExact:
		return 0
	case ports.MatchPattern:
		return 1
	default:
		return 2
	}
}

// precedes is SPEC §4.12's total order: match type, then (patterns) more literal characters, then lower
// priority, then older createdAt, then lower id.
func precedes(a, b ports.InboundRoute) bool {
	if ra, rb := typeRank(a.MatchType), typeRank(b.MatchType); ra != rb {
		return ra < rb
	}
	if a.MatchType == ports.MatchPattern {
		if la, lb := literals(a.MatchValue), literals(b.MatchValue); la != lb {
			return la > lb
		}
	}
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// compile sorts a domain's enabled routes once so that every message is matched without sorting again.
func compile(routes []ports.InboundRoute) *compiled {
	enabled := make([]ports.InboundRoute, 0, len(routes))
	for _, r := range routes {
		if r.Enabled {
			enabled = append(enabled, r)
		}
	}
	sort.SliceStable(enabled, func(i, j int) bool { return precedes(enabled[i], enabled[j]) })
	c := &compiled{exact: map[string]ports.InboundRoute{}}
	for _, r := range enabled {
		switch r.MatchType {
		case ports.MatchExact:
			if _, seen := c.exact[r.MatchValue]; !seen {
				c.exact[r.MatchValue] = r
			}
		case ports.MatchPattern:
			c.patterns = append(c.patterns, r)
		case ports.MatchCatchAll:
			if c.catchAll == nil {
				r := r
				c.catchAll = &r
			}
		}
	}
	return c
}

// match returns the route that takes mail for address (lower-cased), or nil.
func (c *compiled) match(address string) *ports.InboundRoute {
	if r, ok := c.exact[address]; ok {
		return &r
	}
	for i := range c.patterns {
		if globMatch(c.patterns[i].MatchValue, address) {
			r := c.patterns[i]
			return &r
		}
	}
	return c.catchAll
}

// globMatch reports whether s matches pattern, where '*' stands for any run of characters (possibly none)
// and every other byte for itself. It runs in O(len(pattern)·len(s)) at worst, without backtracking blow-up.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] != '*' && pattern[p] == s[i]:
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
