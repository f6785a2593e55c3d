package mta

import "time"

// gcra is the generic cell rate algorithm (ITU-T I.371, as ATM networks police cells): a rate limiter
// that is equivalent to a token bucket of size burst filling at rate, kept as one timestamp instead of
// a counter and a clock. tat is the theoretical arrival time of the next message: when sending at
// exactly the rate, each message goes at tat and moves it on by interval. A message may go early by up
// to tolerance, which is the burst: interval × (burst − 1).
//
// gcra is not safe for concurrent use; the site that owns it holds its lock.
type gcra struct {
	interval  time.Duration // 1/rate; 0 = no limit
	tolerance time.Duration
	tat       time.Time
}

// setRate sets the limit to rate messages a second with bursts of burst (at least 1). A rate of 0 or less
// lifts the limit. The position in time (tat) is kept, so a change does not grant a fresh burst.
func (g *gcra) setRate(rate float64, burst int) {
	if rate <= 0 {
		g.interval, g.tolerance = 0, 0
		return
	}
	g.interval = max(time.Duration(float64(time.Second)/rate), time.Nanosecond)
	g.tolerance = g.interval * time.Duration(max(burst, 1)-1)
}

// wait returns how long a message arriving at now would have to wait to conform, without reserving.
func (g *gcra) wait(now time.Time) time.Duration {
	if g.interval == 0 || !g.tat.After(now) {
		return 0
	}
	return max(g.tat.Sub(now)-g.tolerance, 0)
}

// reserve books the next conforming moment for one message arriving at now and returns how long the
// message must wait for it (0: it may go at once).
func (g *gcra) reserve(now time.Time) time.Duration {
	if g.interval == 0 {
		return 0
	}
	w := g.wait(now)
	if g.tat.Before(now) {
		g.tat = now
	}
	g.tat = g.tat.Add(g.interval)
	return w
}
