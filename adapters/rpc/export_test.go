package rpc

import (
	"maps"
	"slices"
	"sync"
)

// TierAny is a tier only this package's tests have: it may call every procedure, so that the round-trip
// tests reach every method of every service through one client. It is added to the allow-list when the
// test binary starts; no build of Postmill knows it, so no credential can name it there.
const TierAny Tier = "any"

func init() {
	tiers = append(tiers, TierAny)
	rows := allowList
	allowList = sync.OnceValue(func() map[string][]Tier {
		m := maps.Clone(rows())
		for key, allowed := range m {
			m[key] = append(slices.Clip(allowed), TierAny)
		}
		return m
	})
}
