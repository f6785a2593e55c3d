package postgres

import (
	"fmt"
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

// TestCombiner_Keyed: with a key, a group holds calls of one key only, one key's groups are written one at
// a time, and different keys are written at the same time (a's first write waits until b's has started,
// which could never happen if keys shared one writer).
func TestCombiner_Keyed(t *testing.T) {
	t.Parallel()
	type call struct {
		key  string
		n    int
		done chan struct{}
	}
	const perKey = 200
	keys := []string{"a", "b", "c"}
	var (
		mu       sync.Mutex
		writing  = map[string]int{}
		written  = map[string]int{}
		mixed    atomic.Int32
		overlaps atomic.Int32
		bStarted = make(chan struct{})
		bOnce    sync.Once
		aWaited  atomic.Bool
	)
	c := &combiner[*call]{max: 8, key: func(p *call) string { return p.key }}
	c.write = func(group []*call) {
		k := group[0].key
		for _, p := range group {
			if p.key != k {
				mixed.Add(1)
			}
		}
		mu.Lock()
		writing[k]++
		if writing[k] > 1 {
			overlaps.Add(1)
		}
		mu.Unlock()
		switch k {
		case "a":
			if aWaited.CompareAndSwap(false, true) {
				select {
				case <-bStarted:
				case <-time.After(10 * time.Second):
					t.Error("key b was not written while key a's first group was being written")
				}
			}
		case "b":
			bOnce.Do(func() { close(bStarted) })
		}
		time.Sleep(100 * time.Microsecond)
		mu.Lock()
		writing[k]--
		for _, p := range group {
			written[p.key+"/"+fmt.Sprint(p.n)]++
		}
		mu.Unlock()
		for _, p := range group {
			close(p.done)
		}
	}
	var wg sync.WaitGroup
	for _, k := range keys {
		for i := range perKey {
			wg.Go(func() {
				p := &call{key: k, n: i, done: make(chan struct{})}
				c.add(p)
				<-p.done
			})
		}
	}
	wg.Wait()
	if mixed.Load() != 0 || overlaps.Load() != 0 {
		t.Fatalf("%d groups mixed keys, %d writes of one key overlapped", mixed.Load(), overlaps.Load())
	}
	if len(written) != len(keys)*perKey {
		t.Fatalf("%d distinct calls written, want %d", len(written), len(keys)*perKey)
	}
	for id, n := range written {
		if n != 1 {
			t.Fatalf("call %s written %d times", id, n)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queues) != 0 {
		t.Fatalf("%d keys still served after every call was answered", len(c.queues))
	}
}
