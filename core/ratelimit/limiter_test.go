package ratelimit

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		tt, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	tests := []struct {
		name      string
		now       string
		length    time.Duration
		wantStart string
		wantEnd   string
	}{
		{"minute, mid window", "2026-11-21T10:15:42.5Z", time.Minute, "2026-11-21T10:15:00Z", "2026-11-21T10:16:00Z"},
		{"minute, on the boundary", "2026-11-21T10:15:00Z", time.Minute, "2026-11-21T10:15:00Z", "2026-11-21T10:16:00Z"},
		{"minute, last nanosecond", "2026-11-21T10:15:59.999999999Z", time.Minute, "2026-11-21T10:15:00Z", "2026-11-21T10:16:00Z"},
		{"hour", "2026-11-21T10:59:59Z", time.Hour, "2026-11-21T10:00:00Z", "2026-11-21T11:00:00Z"},
		{"hour, other zone keeps the instant", "2026-11-21T12:30:00+02:00", time.Hour, "2026-11-21T10:00:00Z", "2026-11-21T11:00:00Z"},
		{"half-hour zone aligns to the epoch, not the wall clock", "2026-11-21T10:45:00+05:30", time.Hour, "2026-11-21T05:00:00Z", "2026-11-21T06:00:00Z"},
		{"seven minutes counted from the epoch", "1970-01-01T00:15:00Z", 7 * time.Minute, "1970-01-01T00:14:00Z", "1970-01-01T00:21:00Z"},
		{"before the epoch", "1969-12-31T23:59:30Z", time.Minute, "1969-12-31T23:59:00Z", "1970-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start, end := Window(at(tt.now), tt.length)
			if !start.Equal(at(tt.wantStart)) || !end.Equal(at(tt.wantEnd)) {
				t.Fatalf("Window = [%s, %s), want [%s, %s)", start, end, tt.wantStart, tt.wantEnd)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 11, 21, 10, 16, 0, 0, time.UTC)
	tests := []struct {
		name        string
		untilEnd    time.Duration
		count       int
		limit       int
		wantAllowed bool
		wantRetry   time.Duration
	}{
		{"first request", 30 * time.Second, 1, 10, true, 0},
		{"count equal to the limit is allowed", 30 * time.Second, 10, 10, true, 0},
		{"one over the limit", 30 * time.Second, 11, 10, false, 30 * time.Second},
		{"fraction rounds up", 29*time.Second + time.Millisecond, 11, 10, false, 30 * time.Second},
		{"just under a second rounds up to one", 999 * time.Millisecond, 6, 5, false, time.Second},
		{"one nanosecond left is still one second", time.Nanosecond, 6, 5, false, time.Second},
		{"exactly at the end is at least one second", 0, 6, 5, false, time.Second},
		{"a whole hour", time.Hour, 6, 5, false, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := Decide(end.Add(-tt.untilEnd), end, tt.count, tt.limit)
			if d.Allowed != tt.wantAllowed || d.RetryAfter != tt.wantRetry || d.Count != tt.count || d.Limit != tt.limit {
				t.Fatalf("Decide = %+v, want allowed=%v retryAfter=%s", d, tt.wantAllowed, tt.wantRetry)
			}
		})
	}
}
