package sending

import (
	"context"
	"time"

	"github.com/postmill/postmill/core/poll"
	"github.com/postmill/postmill/ports"
)

// RunRelay moves due outbox jobs to the delivery queue until ctx ends, then returns nil. Each round publishes
// up to RelayBatch jobs in one outbox transaction (rows are deleted only when Publish succeeds, and SKIP
// LOCKED lets several relays run at once); it sleeps RelayInterval only when nothing was due, so a backlog
// drains at full speed. A failing round is logged and retried after a growing pause. Retries re-enter through
// the outbox with their NotBefore, so the relay is also what holds them back until they are due.
//
// When the outbox can tell of jobs this process just committed to it (ports.OutboxSignal: the send path with
// a queue outside the database, such as Kafka, and the scheduler's promotions), the pause ends then, so a
// send is not held back by the pause (100 ms by default) on its way to the queue.
func (s *Service) RunRelay(ctx context.Context) error {
	var added <-chan struct{}
	if sig, ok := s.outbox.(ports.OutboxSignal); ok {
		added = sig.OutboxAdded()
	}
	return poll.RunWake(ctx, s.logger, "relay", s.cfg.RelayInterval, added, func(ctx context.Context) (bool, error) {
		n, err := s.outbox.RelayDue(ctx, s.now(), s.cfg.RelayBatch, s.queue.Publish)
		return n > 0, err
	})
}

// RunScheduler promotes scheduled messages whose time has come until ctx ends, then returns nil (see
// promote for what each becomes). It goes again at once after a full batch and otherwise sleeps
// SchedulerInterval; several processes may run it together (the store locks with SKIP LOCKED). A failing
// round is logged and retried after a growing pause.
func (s *Service) RunScheduler(ctx context.Context) error {
	return poll.Run(ctx, s.logger, "scheduler", s.cfg.SchedulerInterval, func(ctx context.Context) (bool, error) {
		n, err := s.messages.PromoteDue(ctx, s.now(), s.cfg.SchedulerBatch, func(m ports.Message, o ports.Organization, d ports.Domain) (ports.MessageStatus, []ports.Event, []ports.DeliveryJob) {
			return promote(s.now(), m, o, d, newID)
		})
		return n >= s.cfg.SchedulerBatch, err
	})
}

// promote decides what a due scheduled message becomes at dispatch (the scheduler's decide function):
//   - its organization is paused: failed, with email.failed carrying providerResponse
//     `organization sending is paused` (SPEC §3 re-checks the pause at dispatch) and no job;
//   - a sandbox message: sent, with the queued and simulated sent events, and no job;
//   - otherwise: queued, with email.queued and one delivery job per recipient domain, first queued now
//     (one per recipient when the From domain tracks opens or clicks, as at send time).
//
// The message was metered when it was accepted, so nothing is metered here.
func promote(now time.Time, m ports.Message, org ports.Organization, d ports.Domain, newID func() string) (ports.MessageStatus, []ports.Event, []ports.DeliveryJob) {
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
	if tracked(d, m.HTML) {
		return ports.StatusQueued, events, newJobsPerRecipient(orgID, m.ID, m.Recipients, now, newID)
	}
	return ports.StatusQueued, events, newJobs(orgID, m.ID, m.Recipients, now, newID)
}

// AppliedJobRetention is how long a delivered job's id is remembered to make its outcome idempotent. A job
// is delivered again only when its lease expires (minutes) or a Kafka consumer restarts before committing,
// so a day is far beyond any redelivery; retries are new jobs with ids of their own.
const AppliedJobRetention = 24 * time.Hour

// pruneBatch bounds one pruning round so that a large backlog never holds one long transaction.
const pruneBatch = 10000

// RunPruner forgets applied job ids older than AppliedJobRetention until ctx ends, then returns nil. It goes
// again at once while a round was full and otherwise checks every ten minutes.
func (s *Service) RunPruner(ctx context.Context) error {
	return poll.Run(ctx, s.logger, "applied-job pruning", 10*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := s.delivery.PruneAppliedJobs(ctx, s.now().Add(-AppliedJobRetention), pruneBatch)
		return n == pruneBatch, err
	})
}
