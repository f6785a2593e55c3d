package postgres

import "sync"

// combiner groups concurrent calls of one kind so that they share a round trip and a commit: while one
// group is being written, the calls arriving queue up and go together into the next group. Each commit
// waits for the WAL flush (an fsync), so one call per transaction would cap the calls per second at the
// disk's flush rate and pay a transaction's fixed statements for every call.
//
// There is no goroutine while nothing is queued: the call that finds no writer becomes the writer, writes
// the group its own call is in and hands what queued meanwhile to a new goroutine, which writes group after
// group until the queue is empty. The zero value is not usable: set max and write.
type combiner[T any] struct {
	// max bounds the calls of one group, so that one statement's arrays stay small.
	max int
	// write writes one group and answers each of its calls; it must not panic.
	write func(group []T)

	mu      sync.Mutex
	queue   []T
	serving bool // a writer is running and will take what is queued
}

// add queues p; the caller then waits for p's answer, which write gives.
func (c *combiner[T]) add(p T) {
	c.mu.Lock()
	c.queue = append(c.queue, p)
	if c.serving {
		c.mu.Unlock()
		return
	}
	c.serving = true
	c.mu.Unlock()

	c.write(c.next())
	if more := c.next(); more != nil {
		go func() {
			for group := more; group != nil; group = c.next() {
				c.write(group)
			}
		}()
	}
}

// next takes up to max queued calls, in arrival order; when none is left the writer stops serving.
func (c *combiner[T]) next() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queue
	if len(q) == 0 {
		c.serving = false
		return nil
	}
	if len(q) <= c.max {
		c.queue = nil
		return q
	}
	c.queue = append([]T(nil), q[c.max:]...)
	return q[:c.max]
}
