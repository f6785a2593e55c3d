package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
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
	logger = logger.With("component", "queue-signal")
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		heard, err := q.listenTransactional(ctx)
		if ctx.Err() != nil {
			break
		}
		if heard {
			backoff = 100 * time.Millisecond
		}
		logger.Warn("listening for transactional jobs failed; listening again", "error", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		backoff = min(2*backoff, maxListenBackoff)
	}
	return nil
}

// listenTransactional opens a connection like the pool's, listens and signals until the connection fails
// or ctx ends. heard reports whether listening had begun.
func (q *Queue) listenTransactional(ctx context.Context) (heard bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, q.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+queueChannel); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait: %w", err)
		}
		if n.Payload == txPayload {
			q.signalTransactional()
		}
	}
}
