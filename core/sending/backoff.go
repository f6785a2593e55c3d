package sending

import (
	"math"
	"time"
)

// RetryDelay is the wait after delivery attempt number attempt (1 for the first) was deferred: base·2^(attempt-1),
// at most limit. With the defaults (1 minute, 2 hours) the waits are 1, 2, 4, 8, 16, 32, 64 minutes, then
// 2 hours each until the maximum age. Exponential backoff without jitter: retries of different messages are
// already spread by their own send times, and a deterministic schedule is easy to explain and to test.
// An attempt below 1 counts as 1; a non-positive base is no wait; a non-positive limit is no cap (the result
// then saturates at the largest Duration instead of overflowing).
func RetryDelay(base, limit time.Duration, attempt int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 1; i < attempt; i++ {
		if limit > 0 && d >= limit {
			break
		}
		if d > math.MaxInt64/2 {
			return math.MaxInt64
		}
		d *= 2
	}
	if limit > 0 && d > limit {
		return limit
	}
	return d
}
