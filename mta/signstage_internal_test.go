package mta

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// threadNice reads the calling thread's nice value from /proc (field 19 of its stat line).
func threadNice(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Skipf("no /proc/thread-self: %v", err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.Atoi(fields[16]) // fields[0] is field 3 (state); nice is field 19
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// threadID names the calling thread (/proc/thread-self links to "pid/task/tid").
func threadID(t *testing.T) string {
	t.Helper()
	id, err := os.Readlink("/proc/thread-self")
	if err != nil {
		t.Skipf("no /proc/thread-self: %v", err)
	}
	return id
}

// TestSignStage_PriorityFollowsForeground: while foreground reports true a signature runs on a thread at
// the stage's nice value, otherwise on the caller's own (no hand-over to another thread), and the
// caller's thread is never changed.
func TestSignStage_PriorityFollowsForeground(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread priorities are set on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	base := threadNice(t)
	if base > 10 {
		t.Skipf("the test runs at nice %d already", base)
	}
	var fg atomic.Bool
	s := newSignStage(2, 15, fg.Load)
	defer s.close()

	var got int
	var thread string
	s.do(context.Background(), true, func() { got, thread = threadNice(t), threadID(t) })
	if got != base {
		t.Fatalf("with nothing in the foreground a signature ran at nice %d, want the process's %d", got, base)
	}
	if own := threadID(t); thread != own {
		t.Fatalf("with nothing in the foreground a signature ran on thread %s, want the caller's %s", thread, own)
	}
	fg.Store(true)
	s.do(context.Background(), true, func() { got = threadNice(t) })
	if got != 15 {
		t.Fatalf("with a request in the foreground a signature ran at nice %d, want 15", got)
	}
	fg.Store(false)
	s.do(context.Background(), true, func() { got = threadNice(t) })
	if got != base {
		t.Fatalf("after the request a signature ran at nice %d, want %d", got, base)
	}
	if n := threadNice(t); n != base {
		t.Fatalf("the caller's thread is at nice %d, was %d", n, base)
	}

	// Without a foreground signal there are no niced threads at all.
	plain := newSignStage(1, 15, nil)
	defer plain.close()
	plain.do(context.Background(), true, func() { got = threadNice(t) })
	if got != base {
		t.Fatalf("a stage without a foreground signal signed at nice %d, want %d", got, base)
	}
}

// TestSignStage_Bound: however many jobs ask at once, at most n sign at the same time on either set of
// threads, and every job runs.
func TestSignStage_Bound(t *testing.T) {
	t.Parallel()
	var fg atomic.Bool
	s := newSignStage(2, 5, fg.Load)
	defer s.close()
	for _, foreground := range []bool{false, true} {
		fg.Store(foreground)
		var running, peak, ran atomic.Int32
		var wg sync.WaitGroup
		for range 12 {
			wg.Go(func() {
				s.do(context.Background(), true, func() {
					n := running.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(5 * time.Millisecond)
					running.Add(-1)
					ran.Add(1)
				})
			})
		}
		wg.Wait()
		if ran.Load() != 12 {
			t.Fatalf("foreground %v: %d of 12 jobs ran", foreground, ran.Load())
		}
		if p := peak.Load(); p > 2 || p < 1 {
			t.Fatalf("foreground %v: %d jobs signed at once, want at most 2", foreground, p)
		}
	}
}

// TestSignStage_PanicReachesTheCaller: a panic while signing is raised again in the job's goroutine, where
// handle recovers it, and the stage goes on signing.
func TestSignStage_PanicReachesTheCaller(t *testing.T) {
	t.Parallel()
	s := newSignStage(1, 0, nil)
	defer s.close()
	func() {
		defer func() {
			if p := recover(); p != "bad key" {
				t.Fatalf("recovered %v, want the signing panic", p)
			}
		}()
		s.do(context.Background(), true, func() { panic("bad key") })
		t.Fatal("do returned after a panic")
	}()
	ran := false
	s.do(context.Background(), true, func() { ran = true })
	if !ran {
		t.Fatal("the stage stopped after a panic")
	}
}

// TestTakeSlots: with few jobs in hand every free slot is taken at once; with a full batch in hand the
// MTA waits for half a batch of slots, and for no longer than chunkWait.
func TestTakeSlots(t *testing.T) {
	t.Parallel()
	m := &MTA{cfg: Config{ReceiveBatch: 8}}
	ctx := t.Context()

	slots := make(chan struct{}, 32)
	slots <- struct{}{} // the slot Run took before asking
	if n := m.takeSlots(ctx, slots); n != 8 {
		t.Fatalf("nothing in hand: took %d slots, want a batch of 8", n)
	}

	// 20 jobs in hand (a full batch or more) and the slot just taken, none free: the next lease waits
	// for half a batch, 4 slots.
	slots = make(chan struct{}, 21)
	for range 21 {
		slots <- struct{}{}
	}
	got := make(chan int, 1)
	go func() { got <- m.takeSlots(ctx, slots) }()
	select {
	case n := <-got:
		t.Fatalf("took %d slots at once with a full batch in hand", n)
	case <-time.After(chunkWait / 5):
	}
	for range 3 { // three jobs finish: room for three more slots
		<-slots
	}
	if n := <-got; n < 4 {
		t.Fatalf("took %d slots, want half a batch (4) or more", n)
	}

	// Nobody finishes: after chunkWait it leases what it has.
	slots = make(chan struct{}, 24)
	for range 24 {
		slots <- struct{}{}
	}
	start := time.Now()
	if n := m.takeSlots(ctx, slots); n != 1 {
		t.Fatalf("took %d slots with none free", n)
	}
	if waited := time.Since(start); waited < chunkWait {
		t.Fatalf("gave up after %v, before chunkWait", waited)
	}

	// A transactional job queued by this process ends the wait while the jobs in hand are bulk ones: with
	// a wait no test sits out and nobody finishing, only the signal lets takeSlots return.
	signal := make(chan struct{}, 1)
	m = &MTA{cfg: Config{ReceiveBatch: 8}, txQueued: signal, chunkWait: time.Hour}
	// waiting starts takeSlots with 24 jobs in hand, none finishing, and checks that it waits.
	waiting := func(why string) {
		slots = make(chan struct{}, 24)
		for range 24 {
			slots <- struct{}{}
		}
		go func() { got <- m.takeSlots(ctx, slots) }()
		select {
		case n := <-got:
			t.Fatalf("took %d slots at once with a full batch in hand and %s", n, why)
		case <-time.After(chunkWait / 5):
		}
	}
	// The last lease had transactional jobs: they are flowing, and a signal does not end the wait.
	signal <- struct{}{}
	waiting("transactional jobs flowing")
	<-slots // three jobs finish: half a batch with the slot taken, and takeSlots returns
	<-slots
	<-slots
	if n := <-got; n != 4 {
		t.Fatalf("took %d slots, want half a batch (4)", n)
	}
	<-signal

	m.bulkOnly = true
	waiting("no signal")
	signal <- struct{}{}
	select {
	case n := <-got:
		if n != 1 {
			t.Fatalf("took %d slots with none free", n)
		}
	case <-time.After(time.Minute): // a bound on failure, not a measurement
		t.Fatal("still waiting for half a batch after a transactional job was signalled")
	}
}
