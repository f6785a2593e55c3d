package sending

import (
	"math"
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	const m = time.Minute
	tests := []struct {
		name    string
		base    time.Duration
		limit   time.Duration
		attempt int
		want    time.Duration
	}{
		{"attempt 1 waits base", m, 2 * time.Hour, 1, m},
		{"attempt 2 doubles", m, 2 * time.Hour, 2, 2 * m},
		{"attempt 3", m, 2 * time.Hour, 3, 4 * m},
		{"attempt 7", m, 2 * time.Hour, 7, 64 * m},
		{"attempt 8 capped", m, 2 * time.Hour, 8, 2 * time.Hour},
		{"attempt 100 capped", m, 2 * time.Hour, 100, 2 * time.Hour},
		{"huge attempt capped without overflow", m, 2 * time.Hour, math.MaxInt, 2 * time.Hour},
		{"attempt 0 counts as 1", m, 2 * time.Hour, 0, m},
		{"negative attempt counts as 1", m, 2 * time.Hour, -5, m},
		{"cap exactly reached", m, 4 * m, 3, 4 * m},
		{"base above cap", 3 * time.Hour, 2 * time.Hour, 1, 2 * time.Hour},
		{"other base", 10 * time.Second, time.Hour, 4, 80 * time.Second},
		{"no base", 0, time.Hour, 3, 0},
		{"no cap", m, 0, 11, 1024 * m},
		{"no cap saturates", time.Hour, 0, 200, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := RetryDelay(tt.base, tt.limit, tt.attempt); got != tt.want {
				t.Fatalf("RetryDelay(%s, %s, %d) = %s, want %s", tt.base, tt.limit, tt.attempt, got, tt.want)
			}
		})
	}
}

func TestRetryDelayScheduleReachesMaxAge(t *testing.T) {
	t.Parallel()
	// With the defaults, retries are spread over the three days: 1+2+...+64 minutes, then every 2 hours.
	var elapsed time.Duration
	attempts := 0
	for elapsed < DefaultMaxAge {
		attempts++
		elapsed += RetryDelay(DefaultRetryBase, DefaultRetryCap, attempts)
	}
	if attempts != 42 { // 7 doubling waits (127 minutes), then 35 waits of 2 hours
		t.Fatalf("%d attempts before the maximum age, want 42", attempts)
	}
}
