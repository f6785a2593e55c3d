// Package poll runs the core's background loops (the outbox relay, the scheduler, the webhook fan-out):
// rounds that go again at once while there is work, pause for an interval when there is none, and back off
// after failures so a struggling database is not hammered.
package poll

import (
	"context"
	"log/slog"
	"time"
)

// ErrorBackoffCap bounds the pause after consecutive failed rounds: long enough not to hammer a struggling
// database, short enough that work resumes soon after it recovers.
const ErrorBackoffCap = 10 * time.Second

// Run calls round until ctx ends, then returns nil. A round reports whether it found a full batch (again):
// the next round then starts at once; otherwise Run sleeps interval. A failed round is logged under name and
// retried after Backoff(interval, ErrorBackoffCap, consecutive failures).
func Run(ctx context.Context, logger *slog.Logger, name string, interval time.Duration, round func(context.Context) (again bool, err error)) error {
	return RunWake(ctx, logger, name, interval, nil, round)
}

// RunWake is Run whose pause after a round that found no full batch also ends when wake receives a value
// (a nil wake never does): a loop that is told of new work starts its next round at once. The pause after
// a failed round is not shortened.
func RunWake(ctx context.Context, logger *slog.Logger, name string, interval time.Duration, wake <-chan struct{}, round func(context.Context) (again bool, err error)) error {
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		again, err := round(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var wait time.Duration
		woken := wake
		switch {
		case err != nil:
			failures++
			wait = Backoff(interval, ErrorBackoffCap, failures)
			woken = nil
			logger.WarnContext(ctx, name+" round failed; retrying", "error", err, "failures", failures, "wait", wait)
		case !again:
			failures = 0
			wait = interval
		default:
			failures = 0
		}
		if wait > 0 && !sleepOrWake(ctx, wait, woken) {
			return nil
		}
	}
}

// Backoff is the pause after the n-th consecutive failure: base·2^(n-1), at most limit (and at least base,
// so a limit below base never shortens the normal interval).
func Backoff(base, limit time.Duration, n int) time.Duration {
	if base <= 0 {
		base = time.Millisecond
	}
	limit = max(limit, base)
	d := base
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// sleepOrWake waits d, until wake receives a value, or until ctx ends, reporting whether ctx is still live.
func sleepOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-wake:
		return true
	}
}

// Sleep waits d or until ctx ends, reporting whether the full wait passed.
func Sleep(ctx context.Context, d time.Duration) bool { return sleepOrWake(ctx, d, nil) }
