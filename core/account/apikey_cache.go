package account

import (
	"time"

	"github.com/postmill/postmill/ports"
)

// DefaultAPIKeyCacheTTL is how long AuthenticateAPIKey reuses a key record it read by prefix. It is the
// send path's bound on a stale organization (sending.DefaultLookupCacheTTL), so that a request is never
// judged on an API key older than the organization it acts for. A revocation is seen at once in the
// process that made it and, through the change feed, moments later in the others; this is only the bound
// when the feed misses one.
const DefaultAPIKeyCacheTTL = time.Second

// DefaultAPIKeyCacheSize bounds how many key records the cache holds: far more keys than one process
// serves in one TTL, so the bound is reached only by very many keys each used once.
//
// The cache (Service.keyCache, a core/lookupcache cache by prefix) holds the record as stored — the
// SHA-256 of the token, never the token — and AuthenticateAPIKey compares the presented token's hash with
// it on every call, so a wrong secret is refused from the cache as from the store. Only keys that exist
// enter (unknown prefixes are not cached), so the number of entries is bounded by the keys issued as well
// as by size; a revoked key may be cached, and is refused like any revoked key.
const DefaultAPIKeyCacheSize = 10000

// forgetAPIKeysOf drops the cached keys of orgID ("" for every organization); for a short while the cache
// also refuses records of that organization read before the change (lookupcache.Cache.ForgetIf).
func (s *Service) forgetAPIKeysOf(orgID string) {
	s.keyCache.ForgetIf(func(_ string, k ports.APIKey) bool { return orgID == "" || k.OrganizationID == orgID })
}

// apiKeysChanged is the change feed's subscriber. Revoking a key is announced as a change of its
// organization (the api_keys trigger of migration 00034), so the organization's keys are forgotten; a
// ChangeAll forgets every key. Domain changes do not concern keys.
func (s *Service) apiKeysChanged(c ports.Change) {
	switch c.Kind {
	case ports.ChangeDomain:
	case ports.ChangeOrganization:
		s.forgetAPIKeysOf(c.OrganizationID)
	default:
		s.forgetAPIKeysOf("")
	}
}
