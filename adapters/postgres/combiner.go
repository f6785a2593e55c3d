package postgres

import (
	"runtime"
	"sync"
	"time"
)

// combiner groups concurrent calls of one kind so that they share a round trip and a commit: while one
// group is being written, the calls arriving queue up and go together into the next group. Each commit
// waits for the WAL flush (an fsync), so one call per transaction would cap the calls per second at the
// disk's flush rate and pay a transaction's fixed statements for every call.
//
// With key set, calls are queued per key: only calls of one key share a group, and groups of different
// keys are written concurrently (the sends of one organization and day, say, whose transactions lock the
// same usage rows while other organizations' do not). Without key every call shares one queue.
//
// With linger set, a writer that has just written a group of several calls (calls are arriving together)
// waits linger before it takes the next group, so that the next group is larger: fewer transactions,
// statements and commits per call, for at most linger more latency. A call that finds the combiner idle is
// written at once, and a group of one is never followed by a wait.
//
// There is no goroutine while nothing is queued: the call that finds no writer for its key becomes the
// writer, writes the group its own call is in and hands what queued meanwhile to a new goroutine, which
// writes group after group until the key's queue is empty. The zero value is not usable: set max and write.
type combiner[T any] struct {
	// max bounds the calls of one group, so that one statement's arrays stay small.
	max int
	// write writes one group and answers each of its calls; it must not panic.
	write func(group []T)
	// key, when set, names the queue of a call; calls of different keys never share a group.
	key func(T) string
	// linger, when set, is the wait after a group of several calls before the next group is taken.
	linger time.Duration
	// sleep waits linger; nil is time.Sleep (tests replace it).
	sleep func(time.Duration)

	mu sync.Mutex
	// queues holds the calls waiting per key; a key is present exactly while a writer serves it.
	queues map[string][]T
}

// add queues p; the caller then waits for p's answer, which write gives.
func (c *combiner[T]) add(p T) {
	var k string
	if c.key != nil {
		k = c.key(p)
	}
	c.mu.Lock()
	if c.queues == nil {
		c.queues = make(map[string][]T)
	}
	q, serving := c.queues[k]
	c.queues[k] = append(q, p)
	c.mu.Unlock()
	if serving {
		return
	}
	// Calls that start together (the reports of one batch, each on its own goroutine) would otherwise
	// find this one's group already taken with only itself in it: one yield lets them queue first.
	runtime.Gosched()

	first := c.next(k)
	c.write(first)
	if c.lingers(first) {
		go c.serve(k, first) // the wait is the next writer's, not this caller's
		return
	}
	if more := c.next(k); more != nil {
		go func() {
			c.write(more)
			c.serve(k, more)
		}()
	}
}

// serve writes key's groups one after the other until its queue is empty, last being the group written
// before.
func (c *combiner[T]) serve(k string, last []T) {
	for {
		if c.lingers(last) {
			if c.sleep != nil {
				c.sleep(c.linger)
			} else {
				time.Sleep(c.linger)
			}
		}
		group := c.next(k)
		if group == nil {
			return
		}
		c.write(group)
		last = group
	}
}

// lingers reports whether the writer waits linger after writing group: when it held several calls.
func (c *combiner[T]) lingers(group []T) bool {
	return c.linger > 0 && len(group) > 1
}

// next takes up to max queued calls of key, in arrival order; when none is left the writer stops serving
// key.
func (c *combiner[T]) next(k string) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[k]
	if len(q) == 0 {
		delete(c.queues, k)
		return nil
	}
	if len(q) <= c.max {
		c.queues[k] = nil
		return q
	}
	c.queues[k] = append([]T(nil), q[c.max:]...)
	return q[:c.max]
}
