package sending

import (
	"sync"
	"time"
)

// cacheSweepEvery is how many insertions pass between sweeps of expired entries, which bounds the memory of
// organizations and domains that stopped sending to what one sweep period adds.
const cacheSweepEvery = 1024

// cacheGuardFor bounds how long a forgotten key stays uncacheable (forgetIf): far longer than a store read
// takes, and no longer than that, so a long ttl does not turn caching off for its whole length.
const cacheGuardFor = 2 * time.Second

// ttlCache remembers values for a short, fixed time. Send reads the organization and the from-domain on every
// call; with thousands of sends per second from a few organizations, a one-second memory turns those reads
// into map lookups. Callers cache only answers that let a send proceed (an active organization, a verified
// domain), so a change that unblocks sending is seen at once. Any other change (a pause, a new plan, a
// suspension) is forgotten as soon as the change feed reports it (Service.changed): at once in the process
// that made it, moments later in the others, and within ttl whatever happens to the feed.
//
// It reads the monotonic wall clock (now is time.Now in production), not ports.Clock: freshness of a cache
// is an operational bound, and a test clock that stands still must not make entries live forever.
type ttlCache[K comparable, V any] struct {
	ttl time.Duration // <= 0 disables the cache
	now func() time.Time

	mu      sync.Mutex
	entries map[K]cacheEntry[V]
	inserts int
	guards  []cacheGuard[K] // recent forgetIf calls (see there)
}

type cacheEntry[V any] struct {
	value   V
	expires time.Time
}

func newTTLCache[K comparable, V any](ttl time.Duration, now func() time.Time) *ttlCache[K, V] {
	return &ttlCache[K, V]{ttl: ttl, now: now, entries: make(map[K]cacheEntry[V])}
}

// get returns the value stored for key unless it has expired.
func (c *ttlCache[K, V]) get(key K) (V, bool) {
	var zero V
	if c.ttl <= 0 {
		return zero, false
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return zero, false
	}
	if !now.Before(e.expires) {
		delete(c.entries, key)
		return zero, false
	}
	return e.value, true
}

// put stores value for ttl from now.
func (c *ttlCache[K, V]) put(key K, value V) {
	if c.ttl <= 0 {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.guards) > 0 && c.guarded(key, now) {
		return
	}
	c.entries[key] = cacheEntry[V]{value: value, expires: now.Add(c.ttl)}
	c.inserts++
	if c.inserts >= cacheSweepEvery {
		c.inserts = 0
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
	}
}

// forget drops the entry of key, so that the next get reads the store again.
func (c *ttlCache[K, V]) forget(key K) { c.forgetIf(func(k K) bool { return k == key }) }

// clear drops every entry.
func (c *ttlCache[K, V]) clear() { c.forgetIf(func(K) bool { return true }) }

// forgetIf drops every entry whose key matches. For a short while afterwards (ttl, at most cacheGuardFor)
// it also refuses to store a value under a matching key: such a value may come from a read that began
// before the change committed, and would otherwise bring the old state back for another ttl. Reads that
// begin later are fresh but go uncached meanwhile, which costs a few store reads after a rare change.
func (c *ttlCache[K, V]) forgetIf(match func(K) bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if match(k) {
			delete(c.entries, k)
		}
	}
	if c.ttl > 0 {
		c.guards = append(c.guards, cacheGuard[K]{match: match, until: now.Add(min(c.ttl, cacheGuardFor))})
	}
}

// guarded reports whether a recent forgetIf refuses key, dropping guards that have run out. c.mu is held.
func (c *ttlCache[K, V]) guarded(key K, now time.Time) bool {
	live := c.guards[:0]
	refused := false
	for _, g := range c.guards {
		if !now.Before(g.until) {
			continue
		}
		live = append(live, g)
		refused = refused || g.match(key)
	}
	clear(c.guards[len(live):])
	c.guards = live
	return refused
}

// cacheGuard keeps keys matching match out of the cache until until.
type cacheGuard[K comparable] struct {
	match func(K) bool
	until time.Time
}

// domainKey names a sending domain within its organization.
type domainKey struct {
	orgID string
	name  string
}
