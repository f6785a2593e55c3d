package react

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadClock measures the CPU time of the OS thread that runs a render. The render's goroutine is locked
// to that thread, so the thread's clock is the render's CPU time, garbage-collection assists included, and
// it does not advance while other work on a busy machine has the CPU.
type threadClock struct {
	id    int32
	ok    bool // the thread clock was readable at start; otherwise wall time is used
	start time.Duration
	wall  time.Time
}

// startThreadClock locks the calling goroutine to its thread and starts measuring; unlock undoes the lock.
func startThreadClock() (c *threadClock, unlock func()) {
	runtime.LockOSThread()
	// The kernel's clock id for a thread's CPU time (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), what
	// pthread_getcpuclockid computes); unlike CLOCK_THREAD_CPUTIME_ID it can be read from another thread.
	c = &threadClock{id: int32(^unix.Gettid())<<3 | 6, wall: time.Now()}
	c.start, c.ok = c.read()
	return c, runtime.UnlockOSThread
}

func (c *threadClock) read() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(c.id, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// used is the CPU time since start, or the wall time where the thread clock is not readable.
func (c *threadClock) used() time.Duration {
	if c.ok {
		if d, ok := c.read(); ok {
			return d - c.start
		}
	}
	return time.Since(c.wall)
}
