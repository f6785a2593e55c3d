package postgres

import (
	"context"
	"log/slog"
)

// Transactional jobs are announced to consumers in other processes as well as to this one. The
// notification that wakes idle consumers (queueChannel) carries txPayload when the jobs it announces
// include transactional ones; ListenTransactional hears it on a connection of its own and signals
// TransactionalQueued, so an MTA that runs beside the send path in another process (the split shape, or
// several all-in-one processes on one database) ends its wait for a batch of free slots as the MTA in the
// sending process does.
const (
	queueChannel = "postmill_delivery_queue"
	txPayload    = "tx"
)

// notifyPayload is NotifyQueue's payload for a queueing of jobs.
func notifyPayload(transactional bool) string {
	if transactional {
		return txPayload
	}
	return ""
}

// ListenTransactional listens to the queue's channel on a connection of its own, outside the pool, and
// signals TransactionalQueued for every announcement of transactional jobs, whichever process queued them,
// until ctx ends; then it returns nil. A lost connection is logged and opened again after a growing pause
// (at most ten seconds); announcements made meanwhile are not heard, which costs a consumer at most the
// wait the signal would have ended. logger may be nil.
func (q *Queue) ListenTransactional(ctx context.Context, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	listenAlways(ctx, q.pool.Config().ConnConfig.Copy(), queueChannel, logger.With("component", "queue-signal"), nil,
		func(payload string) {
			if payload == txPayload {
				q.signalTransactional()
			}
		})
	return nil
}
