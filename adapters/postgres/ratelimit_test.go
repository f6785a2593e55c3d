package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

func TestIncrementWindow_Concurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	start := baseTime.Truncate(time.Minute)
	expires := start.Add(time.Minute)

	const n = 50
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts []int
		errs   []error
		gate   = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-gate
			c, err := s.IncrementWindow(ctx, "login:203.0.113.7", start, expires)
			mu.Lock()
			defer mu.Unlock()
			counts = append(counts, c)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	close(gate)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("IncrementWindow errors: %v", errs)
	}
	slices.Sort(counts)
	for i, c := range counts {
		if c != i+1 {
			t.Fatalf("sorted counts = %v, want 1..%d each once", counts, n)
		}
	}

	// Another key and the next window of the same key count from 1.
	if c, err := s.IncrementWindow(ctx, "login:198.51.100.1", start, expires); err != nil || c != 1 {
		t.Fatalf("other key: %d, %v; want 1", c, err)
	}
	if c, err := s.IncrementWindow(ctx, "login:203.0.113.7", expires, expires.Add(time.Minute)); err != nil || c != 1 {
		t.Fatalf("next window: %d, %v; want 1", c, err)
	}
}

func TestDeleteExpiredWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	now := baseTime

	for key, expires := range map[string]time.Time{
		"ended":      now.Add(-time.Second),
		"ends-now":   now,
		"running":    now.Add(time.Second),
		"long-lived": now.Add(time.Hour),
	} {
		for range 3 {
			if _, err := s.IncrementWindow(ctx, key, expires.Add(-time.Minute), expires); err != nil {
				t.Fatal(err)
			}
		}
	}

	n, err := s.DeleteExpiredWindows(ctx, now)
	if err != nil || n != 2 {
		t.Fatalf("DeleteExpiredWindows = %d, %v; want 2", n, err)
	}
	// Deleted windows start over; surviving ones keep counting.
	if c, _ := s.IncrementWindow(ctx, "ended", now.Add(-time.Second-time.Minute), now.Add(-time.Second)); c != 1 {
		t.Fatalf("deleted window count = %d, want 1", c)
	}
	if c, _ := s.IncrementWindow(ctx, "running", now.Add(time.Second-time.Minute), now.Add(time.Second)); c != 4 {
		t.Fatalf("surviving window count = %d, want 4", c)
	}
	if n, err := s.DeleteExpiredWindows(ctx, now.Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("DeleteExpiredWindows before anything ended = %d, %v; want 0", n, err)
	}
}
