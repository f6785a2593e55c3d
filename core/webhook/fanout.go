package webhook

import (
	"context"
	"fmt"
	"time"

	"github.com/postmill/postmill/ports"
)

// loopErrorBackoffCap bounds the pause of a loop after consecutive store failures: long enough not to hammer
// a struggling database, short enough that work resumes soon after it recovers.
const loopErrorBackoffCap = 10 * time.Second

// RunFanOut turns outbox events into deliveries until ctx ends, then returns nil. Each round hands up to
// FanOutBatch events to the store, which writes one pending delivery per enabled endpoint subscribed to the
// event's type, with the body Payload builds, in the same transaction that marks the events done; the
// events are also published to the Stream, if any, inside that transaction's callback, so a failed publish
// leaves them to the next round (at least once). email.cancelled gets a body like every event but no
// endpoint can subscribe to it, so it makes no delivery. The loop goes again at once after a full batch and
// otherwise sleeps FanOutInterval; several processes may run it together (SKIP LOCKED). A failing round is
// logged and retried after a growing pause.
func (s *Service) RunFanOut(ctx context.Context) error {
	return s.loop(ctx, "webhook fan-out", s.cfg.FanOutInterval, func(ctx context.Context) (bool, error) {
		n, err := s.store.FanOut(ctx, s.now(), s.cfg.FanOutBatch, s.payloads)
		return n >= s.cfg.FanOutBatch, err
	})
}

// payloads is FanOut's callback: the webhook body of every event by event id, after publishing the events
// to the stream.
func (s *Service) payloads(ctx context.Context, events []ports.Event) (map[string][]byte, error) {
	if s.stream != nil && len(events) > 0 {
		if err := s.stream.Publish(ctx, events); err != nil {
			return nil, fmt.Errorf("webhook: publish events: %w", err)
		}
	}
	out := make(map[string][]byte, len(events))
	for _, ev := range events {
		out[ev.ID] = Payload(ev)
	}
	return out, nil
}

// loop runs round until ctx ends. round reports whether to go again at once; otherwise the loop sleeps
// interval. After an error it sleeps backoff(interval, loopErrorBackoffCap, consecutive failures).
func (s *Service) loop(ctx context.Context, name string, interval time.Duration, round func(context.Context) (bool, error)) error {
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		again, err := round(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := time.Duration(0)
		switch {
		case err != nil:
			failures++
			wait = backoff(interval, loopErrorBackoffCap, failures)
			s.logger.WarnContext(ctx, name+" round failed; retrying", "error", err, "failures", failures, "wait", wait)
		case !again:
			failures = 0
			wait = interval
		default:
			failures = 0
		}
		if wait > 0 && !sleep(ctx, wait) {
			return nil
		}
	}
}

// backoff is the pause after the n-th consecutive failure: base·2^(n-1), at most limit (and at least base,
// so a limit below base never shortens the normal interval).
func backoff(base, limit time.Duration, n int) time.Duration {
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

// sleep waits d or until ctx ends, reporting whether the full wait passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
