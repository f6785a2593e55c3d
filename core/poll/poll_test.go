package poll

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, c := range []struct {
		base, limit time.Duration
		n           int
		want        time.Duration
	}{
		{100 * ms, 10 * time.Second, 1, 100 * ms},
		{100 * ms, 10 * time.Second, 2, 200 * ms},
		{100 * ms, 10 * time.Second, 4, 800 * ms},
		{100 * ms, 10 * time.Second, 8, 10 * time.Second},
		{100 * ms, 10 * time.Second, 1000, 10 * time.Second},
		{time.Second, 100 * ms, 3, time.Second}, // a limit below base never shortens the interval
		{0, 10 * ms, 2, 2 * ms},
		{50 * ms, 10 * time.Second, 5, 800 * ms},
		{time.Minute, 10 * time.Second, 3, time.Minute},
		{0, time.Second, 1, ms},
		{time.Second, 1<<63 - 1, 200, 1<<63 - 1}, // no overflow
	} {
		if got := Backoff(c.base, c.limit, c.n); got != c.want {
			t.Errorf("Backoff(%v, %v, %d) = %v, want %v", c.base, c.limit, c.n, got, c.want)
		}
	}
}

func TestRunGoesAgainOnFullBatchesAndStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var rounds atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, slog.New(slog.DiscardHandler), "test", time.Hour, func(context.Context) (bool, error) {
			n := rounds.Add(1)
			if n == 3 {
				return false, nil // an empty round: Run now sleeps an hour, until ctx ends
			}
			if n == 2 {
				return false, errors.New("store down") // a failure backs off for the interval base
			}
			return true, nil
		})
	}()
	// Round 1 (full) → round 2 at once (fails) → waits Backoff(1h, ...) — so round 3 must never come while
	// we watch; cancel ends the wait.
	time.Sleep(50 * time.Millisecond)
	if got := rounds.Load(); got != 2 {
		t.Fatalf("%d rounds, want 2 (a full batch goes again at once; a failure waits)", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after cancel", err)
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep reported an interrupted wait")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep ignored a cancelled context")
	}
}

// RunWake's pause after an empty round ends when wake receives a value; the pause after a failed round
// does not.
func TestRunWakeEndsTheIdlePause(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := make(chan struct{}, 1)
	rounds := make(chan int, 10)
	var n atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- RunWake(ctx, slog.New(slog.DiscardHandler), "test", time.Hour, wake, func(context.Context) (bool, error) {
			k := int(n.Add(1))
			rounds <- k
			if k == 2 {
				return false, errors.New("store down") // backs off for an hour whatever wake says
			}
			return false, nil // an empty round: an hour's pause, unless woken
		})
	}()
	next := func() int {
		select {
		case k := <-rounds:
			return k
		case <-time.After(30 * time.Second): // a bound on failure, not a measurement
			t.Fatal("no round within 30 s of the wake")
			return 0
		}
	}
	if k := next(); k != 1 {
		t.Fatalf("first round %d", k)
	}
	wake <- struct{}{}
	if k := next(); k != 2 {
		t.Fatalf("round after the wake %d, want 2", k)
	}
	wake <- struct{}{}
	select {
	case k := <-rounds:
		t.Fatalf("round %d ran during the backoff after a failure", k)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunWake returned %v after cancel", err)
	}
}
