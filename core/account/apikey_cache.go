package account

import (
	"sync"
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
const DefaultAPIKeyCacheSize = 10000

// apiKeyGuardFor bounds how long a forgotten organization's keys stay uncacheable: far longer than a store
// read takes, and no longer, so a long TTL does not turn caching off for its whole length.
const apiKeyGuardFor = 2 * time.Second

// apiKeyCache remembers key records by prefix for a short time, so that a request authenticated by API
// key is a map lookup and a hash instead of a query. It holds the record as stored — the SHA-256 of the
// token, never the token — and AuthenticateAPIKey compares the presented token's hash with it on every
// call, so a wrong secret is refused from the cache as from the store. Only keys that exist enter
// (unknown prefixes are not cached), so the number of entries is bounded by the keys issued as well as by
// size; a revoked key may be cached, and is refused like any revoked key.
//
// It reads the monotonic wall clock, not ports.Clock: freshness is an operational bound, and a test clock
// that stands still must not make entries live forever.
type apiKeyCache struct {
	ttl  time.Duration // <= 0 disables the cache
	size int
	now  func() time.Time

	mu      sync.Mutex
	entries map[string]apiKeyEntry // by prefix
	guards  []apiKeyGuard
}

type apiKeyEntry struct {
	key     ports.APIKey
	expires time.Time
}

// apiKeyGuard keeps the keys of one organization (every organization when orgID is "") out of the cache
// until until.
type apiKeyGuard struct {
	orgID string
	until time.Time
}

func newAPIKeyCache(ttl time.Duration, size int, now func() time.Time) *apiKeyCache {
	return &apiKeyCache{ttl: ttl, size: size, now: now, entries: make(map[string]apiKeyEntry)}
}

// get returns the record cached for prefix unless it has expired.
func (c *apiKeyCache) get(prefix string) (ports.APIKey, bool) {
	if c.ttl <= 0 {
		return ports.APIKey{}, false
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[prefix]
	if !ok {
		return ports.APIKey{}, false
	}
	if !now.Before(e.expires) {
		delete(c.entries, prefix)
		return ports.APIKey{}, false
	}
	return e.key, true
}

// put stores a record read from the store for ttl from now. A full cache first drops what has expired,
// then, if still full, one entry at random: a bounded memory matters more than which key is read again.
func (c *apiKeyCache) put(k ports.APIKey) {
	if c.ttl <= 0 || c.size <= 0 {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.guards) > 0 && c.guarded(k.OrganizationID, now) {
		return
	}
	if _, ok := c.entries[k.Prefix]; !ok && len(c.entries) >= c.size {
		for p, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, p)
			}
		}
		for p := range c.entries {
			if len(c.entries) < c.size {
				break
			}
			delete(c.entries, p)
		}
	}
	c.entries[k.Prefix] = apiKeyEntry{key: k, expires: now.Add(c.ttl)}
}

// forgetOrganization drops the keys of orgID ("" for every organization). For a short while afterwards
// (ttl, at most apiKeyGuardFor) it also refuses to store a key of that organization: such a record may come
// from a read that began before the revocation committed, and would otherwise bring the key back for
// another ttl. Reads that begin later go uncached meanwhile, a few queries after a rare change.
func (c *apiKeyCache) forgetOrganization(orgID string) {
	if c.ttl <= 0 {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, e := range c.entries {
		if orgID == "" || e.key.OrganizationID == orgID {
			delete(c.entries, p)
		}
	}
	c.guards = append(c.guards, apiKeyGuard{orgID: orgID, until: now.Add(min(c.ttl, apiKeyGuardFor))})
}

// guarded reports whether a recent forgetOrganization refuses a key of orgID, dropping guards that have
// run out. c.mu is held.
func (c *apiKeyCache) guarded(orgID string, now time.Time) bool {
	live := c.guards[:0]
	refused := false
	for _, g := range c.guards {
		if !now.Before(g.until) {
			continue
		}
		live = append(live, g)
		refused = refused || g.orgID == "" || g.orgID == orgID
	}
	clear(c.guards[len(live):])
	c.guards = live
	return refused
}

// apiKeysChanged is the change feed's subscriber. Revoking a key is announced as a change of its
// organization (the api_keys trigger of migration 00034), so the organization's keys are forgotten; a
// ChangeAll forgets every key. Domain changes do not concern keys.
func (s *Service) apiKeysChanged(c ports.Change) {
	switch c.Kind {
	case ports.ChangeDomain:
	case ports.ChangeOrganization:
		s.keyCache.forgetOrganization(c.OrganizationID)
	default:
		s.keyCache.forgetOrganization("")
	}
}
