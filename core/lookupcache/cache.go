// Package lookupcache remembers values read from a store for a short, fixed time, and forgets them when a
// change is announced. The send path keeps organizations and sending domains in it, the account area API
// key records: each is read on every request, and a one-second memory turns those reads into map lookups.
// What a cache may hold and when it forgets is its caller's decision; this package only keeps time, bounds
// the memory and guards against a read that raced a change.
//
// It reads the monotonic wall clock (now is time.Now in production), not ports.Clock: freshness of a cache
// is an operational bound, and a test clock that stands still must not make entries live forever.
package lookupcache

import (
	"sync"
	"time"
)

// SweepEvery is how many insertions pass between sweeps of expired entries, which bounds the memory of keys
// that stopped being read to what one sweep period adds.
const SweepEvery = 1024

// GuardFor bounds how long forgotten keys stay uncacheable (ForgetIf): far longer than a store read takes,
// and no longer than that, so a long ttl does not turn caching off for its whole length.
const GuardFor = 2 * time.Second

// Cache remembers values for ttl. Safe for concurrent use.
type Cache[K comparable, V any] struct {
	ttl  time.Duration // <= 0 disables the cache
	max  int           // > 0 bounds the entries
	now  func() time.Time
	mu   sync.Mutex
	byK  map[K]entry[V]
	puts int
	// guards are recent ForgetIf calls (see there).
	guards []guard[K, V]
}

type entry[V any] struct {
	value   V
	expires time.Time
}

// guard keeps entries matching match out of the cache until until.
type guard[K comparable, V any] struct {
	match func(K, V) bool
	until time.Time
}

// New returns a cache keeping values for ttl (none when ttl <= 0) and, when max > 0, at most max entries.
func New[K comparable, V any](ttl time.Duration, max int, now func() time.Time) *Cache[K, V] {
	return &Cache[K, V]{ttl: ttl, max: max, now: now, byK: make(map[K]entry[V])}
}

// Get returns the value stored for key unless it has expired.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	var zero V
	if c.ttl <= 0 {
		return zero, false
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byK[key]
	if !ok {
		return zero, false
	}
	if !now.Before(e.expires) {
		delete(c.byK, key)
		return zero, false
	}
	return e.value, true
}

// Put stores value for ttl from now, unless a recent ForgetIf refuses it. A cache at its bound first drops
// what has expired and then, if still full, entries at random: a bounded memory matters more than which
// key is read again.
func (c *Cache[K, V]) Put(key K, value V) {
	if c.ttl <= 0 {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.guards) > 0 && c.guarded(key, value, now) {
		return
	}
	c.puts++
	_, present := c.byK[key]
	if full := c.max > 0 && !present && len(c.byK) >= c.max; full || c.puts >= SweepEvery {
		c.puts = 0
		for k, e := range c.byK {
			if !now.Before(e.expires) {
				delete(c.byK, k)
			}
		}
		for k := range c.byK {
			if c.max <= 0 || len(c.byK) < c.max {
				break
			}
			delete(c.byK, k)
		}
	}
	c.byK[key] = entry[V]{value: value, expires: now.Add(c.ttl)}
}

// Forget drops the entry of key, so that the next Get misses.
func (c *Cache[K, V]) Forget(key K) { c.ForgetIf(func(k K, _ V) bool { return k == key }) }

// Clear drops every entry.
func (c *Cache[K, V]) Clear() { c.ForgetIf(func(K, V) bool { return true }) }

// ForgetIf drops every entry that matches. For a short while afterwards (ttl, at most GuardFor) it also
// refuses to store a matching entry: its value may come from a read that began before the change
// committed, and would otherwise bring the old state back for another ttl. Reads that begin later are
// fresh but go uncached meanwhile, which costs a few store reads after a rare change.
func (c *Cache[K, V]) ForgetIf(match func(K, V) bool) {
	if c.ttl <= 0 {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.byK {
		if match(k, e.value) {
			delete(c.byK, k)
		}
	}
	c.guards = append(c.guards, guard[K, V]{match: match, until: now.Add(min(c.ttl, GuardFor))})
}

// Len is the number of entries held, expired ones not swept yet included.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byK)
}

// guarded reports whether a recent ForgetIf refuses key and value, dropping guards that have run out. c.mu
// is held.
func (c *Cache[K, V]) guarded(key K, value V, now time.Time) bool {
	live := c.guards[:0]
	refused := false
	for _, g := range c.guards {
		if !now.Before(g.until) {
			continue
		}
		live = append(live, g)
		refused = refused || g.match(key, value)
	}
	clear(c.guards[len(live):])
	c.guards = live
	return refused
}

// guardCount is the number of guards held, for tests.
func (c *Cache[K, V]) guardCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.guards)
}
