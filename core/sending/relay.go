package sending

import (
	"context"
	"time"

	"github.com/postmill/postmill/ports"
)

// loopErrorBackoffCap bounds the pause of RunRelay and RunScheduler after consecutive store failures: long
// enough not to hammer a struggling database, short enough that work resumes soon after it recovers.
const loopErrorBackoffCap = 10 * time.Second

// RunRelay moves due outbox jobs to the delivery queue until ctx ends, then returns nil. Each round publishes
// up to RelayBatch jobs in one outbox transaction (rows are deleted only when Publish succeeds, and SKIP
// LOCKED lets several relays run at once); it sleeps RelayInterval only when nothing was due, so a backlog
// drains at full speed. A failing round is logged and retried after a growing pause. Retries re-enter through
// the outbox with their NotBefore, so the relay is also what holds them back until they are due.
func (s *Service) RunRelay(ctx context.Context) error {
	return s.loop(ctx, "relay", s.cfg.RelayInterval, func(ctx context.Context) (bool, error) {
		n, err := s.outbox.RelayDue(ctx, s.now(), s.cfg.RelayBatch, s.queue.Publish)
		return n > 0, err
	})
}

// RunScheduler promotes scheduled messages whose time has come until ctx ends, then returns nil (see
// promote for what each becomes). It goes again at once after a full batch and otherwise sleeps
// SchedulerInterval; several processes may run it together (the store locks with SKIP LOCKED). A failing
// round is logged and retried after a growing pause.
func (s *Service) RunScheduler(ctx context.Context) error {
	return s.loop(ctx, "scheduler", s.cfg.SchedulerInterval, func(ctx context.Context) (bool, error) {
		n, err := s.messages.PromoteDue(ctx, s.now(), s.cfg.SchedulerBatch, func(m ports.Message, o ports.Organization) (ports.MessageStatus, []ports.Event, []ports.DeliveryJob) {
			return promote(s.now(), m, o, newID)
		})
		return n >= s.cfg.SchedulerBatch, err
	})
}

// loop runs round until ctx ends. round reports whether to go again at once; otherwise the loop sleeps
// interval. After an error it sleeps RetryDelay(interval, loopErrorBackoffCap, consecutive failures).
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
			wait = RetryDelay(interval, max(interval, loopErrorBackoffCap), failures)
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

// promote decides what a due scheduled message becomes at dispatch (the scheduler's decide function):
//   - its organization is paused: failed, with email.failed carrying providerResponse
//     `organization sending is paused` (SPEC §3 re-checks the pause at dispatch) and no job;
//   - a sandbox message: sent, with the queued and simulated sent events, and no job;
//   - otherwise: queued, with email.queued and one delivery job per recipient domain, first queued now.
//
// The message was metered when it was accepted, so nothing is metered here.
func promote(now time.Time, m ports.Message, org ports.Organization, newID func() string) (ports.MessageStatus, []ports.Event, []ports.DeliveryJob) {
	orgID := m.OrganizationID
	if orgID == "" {
		orgID = org.ID
	}
	switch {
	case org.Paused:
		resp := msgOrgPaused
		return ports.StatusFailed, []ports.Event{messageEvent(newID, orgID, m.ID, ports.EventEmailFailed, now, &resp)}, nil
	case m.Sandbox:
		return ports.StatusSent, sandboxEvents(newID, orgID, m.ID, now), nil
	}
	events := []ports.Event{messageEvent(newID, orgID, m.ID, ports.EventEmailQueued, now, nil)}
	return ports.StatusQueued, events, newJobs(orgID, m.ID, m.Recipients, now, newID)
}
