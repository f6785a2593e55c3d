// Package ratelimit implements the request-rate limits of SPEC §8 as fixed windows counted in a store shared by
// every process, so that several edge replicas enforce one limit together.
package ratelimit

import (
	"context"
	"log/slog"
	"time"

	"github.com/postmill/postmill/ports"
)

// SweepInterval is how often Run deletes counters of windows that have ended. Expired rows are never read
// again (every window has its own row), so sweeping is only housekeeping and need not be frequent.
const SweepInterval = time.Minute

// Limiter counts requests in fixed windows aligned to the Unix epoch. Fixed windows (rather than sliding ones)
// are what SPEC §8 prescribes: the counter resets when the window expires, and one atomic increment per request
// is all the store has to do.
type Limiter struct {
	store  ports.RateLimitStore
	clock  ports.Clock
	logger *slog.Logger
}

var _ ports.RateLimiter = (*Limiter)(nil)

// New builds a Limiter over a shared counter store. A nil clock means the wall clock. Sweep failures are
// logged to slog.Default until WithLogger names another logger.
func New(store ports.RateLimitStore, clock ports.Clock) *Limiter {
	if clock == nil {
		clock = ports.SystemClock{}
	}
	return &Limiter{store: store, clock: clock, logger: slog.Default()}
}

// WithLogger sets the logger Run reports sweep failures to and returns l, so it chains after New.
func (l *Limiter) WithLogger(logger *slog.Logger) *Limiter {
	if logger != nil {
		l.logger = logger
	}
	return l
}

// Allow counts one request against key in the current window of the given length. The key should name the
// rule as well as the subject (for example "login:203.0.113.7"), since two rules with the same key and window
// length would share one counter.
func (l *Limiter) Allow(ctx context.Context, key string, limit int, window time.Duration) (ports.RateDecision, error) {
	if limit < 1 || window <= 0 {
		return ports.RateDecision{}, ports.Errorf(ports.CodeInternal, "ratelimit: invalid rule limit=%d window=%s", limit, window)
	}
	now := l.clock.Now()
	start, end := Window(now, window)
	count, err := l.store.IncrementWindow(ctx, key, start, end)
	if err != nil {
		return ports.RateDecision{}, err
	}
	return Decide(now, end, count, limit), nil
}

// Window returns the fixed window of the given length that contains now: start is now rounded down to a
// multiple of length counted from the Unix epoch, and end is start plus length. Aligning to the epoch rather
// than to the first request lets every process compute the same window without coordination.
func Window(now time.Time, length time.Duration) (start, end time.Time) {
	ns := now.UnixNano()
	offset := ns % int64(length)
	if offset < 0 {
		offset += int64(length)
	}
	start = time.Unix(0, ns-offset).In(now.Location())
	return start, start.Add(length)
}

// Decide turns a window's count into a decision. The request that makes the count equal to the limit is still
// allowed. RetryAfter is the time left in the window rounded up to whole seconds and at least one second,
// because SPEC §7 reports it as an integer retryAfterSeconds and a client that waits that long must find the
// window over.
func Decide(now, end time.Time, count, limit int) ports.RateDecision {
	d := ports.RateDecision{Allowed: count <= limit, Count: count, Limit: limit}
	if d.Allowed {
		return d
	}
	wait := end.Sub(now)
	secs := wait / time.Second
	if wait%time.Second != 0 {
		secs++
	}
	d.RetryAfter = max(secs, 1) * time.Second
	return d
}

// Run deletes the counters of ended windows every SweepInterval until ctx ends, then returns nil. The
// composition root runs it as a service next to the HTTP server.
func (l *Limiter) Run(ctx context.Context) error {
	ticker := time.NewTicker(SweepInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			n, err := l.store.DeleteExpiredWindows(ctx, l.clock.Now())
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				l.logger.WarnContext(ctx, "rate-limit sweep failed", "error", err)
				continue
			}
			if n > 0 {
				l.logger.DebugContext(ctx, "rate-limit windows swept", "deleted", n)
			}
		}
	}
}
