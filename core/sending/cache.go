package sending

import (
	"sync"
	"time"
)

// cacheSweepEvery is how many insertions pass between sweeps of expired entries, which bounds the memory of
// organizations and domains that stopped sending to what one sweep period adds.
const cacheSweepEvery = 1024

// ttlCache remembers values for a short, fixed time. Send reads the organization and the from-domain on every
// call; with thousands of sends per second from a few organizations, a one-second memory turns those reads
// into map lookups. Entries are never invalidated early: callers cache only answers that let a send proceed
// (an active organization, a verified domain), so a change that unblocks sending is seen at once and a change
// that blocks it within ttl.
//
// It reads the monotonic wall clock (now is time.Now in production), not ports.Clock: freshness of a cache
// is an operational bound, and a test clock that stands still must not make entries live forever.
type ttlCache[K comparable, V any] struct {
	ttl time.Duration // <= 0 disables the cache
	now func() time.Time

	mu      sync.Mutex
	entries map[K]cacheEntry[V]
	inserts int
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

// domainKey names a sending domain within its organization.
type domainKey struct {
	orgID string
	name  string
}
