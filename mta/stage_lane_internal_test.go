package mta

import (
	"context"
	"testing"
	"time"
)

// TestWindowTransactionalFirst: when a destination's window is full, a transactional job that starts
// waiting after bulk jobs still gets the next place, and the bulk jobs follow in their order.
func TestWindowTransactionalFirst(t *testing.T) {
	t.Parallel()
	s := newStages(Config{Window: 1, Workers: 4})
	ctx := context.Background()
	leave, err := s.enterWindowAs(ctx, "mx.a:25", true)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	waiting := func(bulk, urgent int) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			s.mu.Lock()
			w := s.windows["mx.a:25"]
			ok := len(w.waiters) == bulk && len(w.urgent) == urgent
			s.mu.Unlock()
			if ok {
				return
			}
		}
		t.Fatalf("waiters never reached %d bulk and %d transactional", bulk, urgent)
	}
	enter := func(name string, bulk bool) {
		go func() {
			l, err := s.enterWindowAs(ctx, "mx.a:25", bulk)
			if err != nil {
				order <- "error " + err.Error()
				return
			}
			order <- name
			l()
		}()
	}
	enter("bulk 1", true)
	waiting(1, 0)
	enter("bulk 2", true)
	waiting(2, 0)
	enter("receipt", false)
	waiting(2, 1)
	leave()
	for _, want := range []string{"receipt", "bulk 1", "bulk 2"} {
		select {
		case got := <-order:
			if got != want {
				t.Fatalf("got %q, want %q next", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s never entered", want)
		}
	}
}
