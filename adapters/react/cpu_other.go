//go:build !linux

package react

import "time"

// threadClock measures wall-clock time where per-thread CPU clocks are not available: an upper bound of
// the render's CPU time.
type threadClock struct{ wall time.Time }

func startThreadClock() (c *threadClock, unlock func()) {
	return &threadClock{wall: time.Now()}, func() {}
}

func (c *threadClock) used() time.Duration { return time.Since(c.wall) }
