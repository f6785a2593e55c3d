package postgres

import (
	"context"
	"time"
)

// EnqueueSendsOn has the send path (InsertMessage, InsertMessages) write its delivery jobs straight into q's
// table, delivery_queue, in the send's own transaction, instead of into delivery_outbox for the relay to
// move. The queue is in the same database, so the job is as durable as the message and visible to
// consumers the moment the send commits: one insert, no relay round and no outbox row to delete. Waiting
// consumers are woken by a notification sent after the commit (wake). Jobs written elsewhere — retries,
// scheduled messages when they fall due, released holds — still go through the outbox, which holds them
// until their time; the relay keeps running for them. Call it before serving; a send already in flight
// may still use the outbox, which is equally correct.
func (s *Store) EnqueueSendsOn(q *Queue) {
	s.Messages.queue.Store(q)
}

// notifyTimeout bounds one notification of wake.
const notifyTimeout = 5 * time.Second

// wake notifies the queue's channel after the send path committed jobs, with txPayload when transactional
// says that some were transactional (queue_signal.go). It never blocks the sender:
// the notification is sent by a goroutine, and wakes that come while one is in flight are covered by one
// more, so a burst of sends costs a few notifications rather than one each. A notification sent outside
// the send's transaction keeps NOTIFY's commit-time lock (one notifying transaction commits at a time)
// out of the sends' group commits. A lost notification costs a waiting consumer at most PollInterval.
func (q *Queue) wake(transactional bool) {
	if transactional {
		q.wakeTx.Store(true) // before the round is asked for, so that the round that follows sees it
	}
	for {
		switch q.waking.Load() {
		case 0: // idle: start a round
			if q.waking.CompareAndSwap(0, 1) {
				go q.notifyRounds()
				return
			}
		case 1: // a round is in flight: ask for one more after it
			if q.waking.CompareAndSwap(1, 2) {
				return
			}
		default: // one more is already asked for
			return
		}
	}
}

// notifyRounds sends notifications until no wake came during the last one.
func (q *Queue) notifyRounds() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		// On failure consumers still look every PollInterval, and a lost announcement of transactional
		// jobs costs a consumer in another process at most the wait it would have ended.
		_ = q.queries.NotifyQueue(ctx, notifyPayload(q.wakeTx.Swap(false)))
		cancel()
		if q.waking.CompareAndSwap(1, 0) {
			return
		}
		q.waking.Store(1) // it was 2, and only wake's first case changes it from 0
	}
}
