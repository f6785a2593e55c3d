package app

import (
	"fmt"
	"slices"
	"strings"
)

// The tiers a process can run (ARCHITECTURE.md "Tiers"). TargetAll runs every one in one process.
const (
	TargetAll       = "all"
	TargetEdge      = "edge"
	TargetCore      = "core"
	TargetMTA       = "mta"
	TargetInbound   = "inbound"
	TargetAnalytics = "analytics"
)

var tiers = []string{TargetEdge, TargetCore, TargetMTA, TargetInbound, TargetAnalytics}

// Targets is the set of tiers one process runs.
type Targets []string

// ParseTargets reads --target: "all" or a comma list of tiers.
func ParseTargets(s string) (Targets, error) {
	var out Targets
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(strings.ToLower(t))
		switch {
		case t == "":
			continue
		case t == TargetAll:
			return Targets(slices.Clone(tiers)), nil
		case slices.Contains(tiers, t):
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		default:
			return nil, fmt.Errorf("unknown target %q (want all or a comma list of %s)", t, strings.Join(tiers, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no target given")
	}
	return out, nil
}

// Has reports whether the process runs tier t.
func (ts Targets) Has(t string) bool { return slices.Contains(ts, t) }
