package postgres

import (
	"fmt"
	"slices"
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

// TestCombiner_Linger: after a group of several calls the writer waits linger before it takes the next
// group, so calls arriving during the wait share one group; a call that finds the combiner idle is written
// without a wait, and a group of one is not followed by one.
func TestCombiner_Linger(t *testing.T) {
	t.Parallel()
	type call struct {
		n    int
		done chan struct{}
	}
	var (
		mu     sync.Mutex
		groups [][]int
		waits  []int // how many groups had been written when each wait began
	)
	hold, holding := make(chan struct{}), make(chan struct{})
	c := &combiner[*call]{max: 16, linger: time.Hour}
	c.write = func(group []*call) {
		mu.Lock()
		var ns []int
		for _, p := range group {
			ns = append(ns, p.n)
		}
		slices.Sort(ns) // calls started together queue in any order
		groups = append(groups, ns)
		mu.Unlock()
		if group[0].n == 10 {
			close(holding)
			<-hold // calls 11 and 12 queue while call 10 is written
		}
		for _, p := range group {
			close(p.done)
		}
	}
	start := func(n int) chan struct{} {
		p := &call{n: n, done: make(chan struct{})}
		go c.add(p)
		return p.done
	}
	queued := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			c.mu.Lock()
			l := len(c.queues[""])
			c.mu.Unlock()
			if l == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d calls queued, want %d", l, n)
			}
		}
	}
	idle := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			c.mu.Lock()
			_, serving := c.queues[""]
			c.mu.Unlock()
			if !serving {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the writer did not stop")
			}
		}
	}
	var burst []chan struct{}
	c.sleep = func(time.Duration) {
		mu.Lock()
		waits = append(waits, len(groups))
		first := len(waits) == 1
		mu.Unlock()
		if first {
			// Calls 13, 14 and 15 arrive during the wait after the group of two, and go together.
			burst = append(burst, start(13), start(14), start(15))
			queued(3)
		}
	}

	<-start(0) // the combiner is idle: written at once, although linger is an hour
	idle()
	d10 := start(10)
	<-holding // 10 is being written
	d11, d12 := start(11), start(12)
	queued(2)
	close(hold)
	for _, d := range []chan struct{}{d10, d11, d12} {
		<-d
	}
	idle()
	for _, d := range burst {
		<-d
	}
	mu.Lock()
	defer mu.Unlock()
	if want := [][]int{{0}, {10}, {11, 12}, {13, 14, 15}}; fmt.Sprint(groups) != fmt.Sprint(want) {
		t.Fatalf("groups %v, want %v", groups, want)
	}
	// A wait after {11, 12} (three groups written) and after {13, 14, 15}; none after {0} or {10}.
	if fmt.Sprint(waits) != fmt.Sprint([]int{3, 4}) {
		t.Fatalf("waits began after %v groups written, want [3 4]", waits)
	}
}
