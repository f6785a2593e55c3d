package postgres

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCombiner: every call queued by concurrent callers is written exactly once, in groups of at most max,
// one group at a time, and the combiner starts again once it has drained.
func TestCombiner(t *testing.T) {
	t.Parallel()
	type call struct {
		n    int
		done chan struct{}
	}
	var (
		written  = make([]atomic.Int32, 500)
		writing  atomic.Int32
		overlaps atomic.Int32
		tooBig   atomic.Int32
	)
	c := &combiner[*call]{max: 16}
	c.write = func(group []*call) {
		if writing.Add(1) > 1 {
			overlaps.Add(1)
		}
		if len(group) > c.max {
			tooBig.Add(1)
		}
		time.Sleep(time.Millisecond) // a round trip, during which the next group queues
		for _, p := range group {
			written[p.n].Add(1)
			close(p.done)
		}
		writing.Add(-1)
	}
	for round := range 2 {
		var wg sync.WaitGroup
		for i := range 250 {
			wg.Go(func() {
				p := &call{n: round*250 + i, done: make(chan struct{})}
				c.add(p)
				<-p.done
			})
		}
		wg.Wait()
	}
	for i := range written {
		if n := written[i].Load(); n != 1 {
			t.Fatalf("call %d written %d times", i, n)
		}
	}
	if overlaps.Load() != 0 || tooBig.Load() != 0 {
		t.Fatalf("%d overlapping writes, %d groups over max", overlaps.Load(), tooBig.Load())
	}
}
