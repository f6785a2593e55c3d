package tlspolicy

import (
	"container/list"
	"sync"
)

// lru is a bounded map that forgets the least recently used key when full. Policies are per recipient
// domain and DANE answers per MX host: both sets grow with the mail sent, so both are bounded.
type lru[V any] struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recently used; values are *lruItem[V]
	items map[string]*list.Element
}

type lruItem[V any] struct {
	key string
	val V
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, order: list.New(), items: make(map[string]*list.Element)}
}

func (c *lru[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruItem[V]).val, true
	}
	var zero V
	return zero, false
}

func (c *lru[V]) put(key string, val V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		e.Value.(*lruItem[V]).val = val
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&lruItem[V]{key: key, val: val})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruItem[V]).key)
	}
}

func (c *lru[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// flight lets one caller per key do a lookup while the others wait for its result: the first jobs for a
// domain arrive together, and one policy fetch serves them all.
type flight struct {
	mu      sync.Mutex
	pending map[string]chan struct{}
}

// do runs f for key unless a run for key is under way, in which case it waits for that run to end and
// returns false (the caller then reads the cache f filled).
func (g *flight) do(key string, f func()) bool {
	g.mu.Lock()
	if g.pending == nil {
		g.pending = make(map[string]chan struct{})
	}
	if ch, ok := g.pending[key]; ok {
		g.mu.Unlock()
		<-ch
		return false
	}
	ch := make(chan struct{})
	g.pending[key] = ch
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.pending, key)
		g.mu.Unlock()
		close(ch)
	}()
	f()
	return true
}
