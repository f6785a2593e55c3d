package postgres

import (
	"context"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.Queue = (*Queue)(nil)

// Defaults of QueueConfig.
const (
	// DefaultQueueLease is how long a received job stays invisible to other consumers. It must outlast
	// one delivery attempt (connect, DKIM-sign, SMTP transaction, recording the outcome); a worker that
	// crashes holds its jobs this long before another takes them over.
	DefaultQueueLease = 5 * time.Minute
	// DefaultQueuePollInterval bounds how long an idle consumer waits between looks at the table when no
	// notification arrives (a publisher in a process that lost its notification, or a lease expiring).
	DefaultQueuePollInterval = 200 * time.Millisecond
)

// QueueConfig tunes the PostgreSQL queue. Zero values mean the defaults.
type QueueConfig struct {
	// Lease is how long a received job is hidden from other consumers before it is handed out again
	// (default 5 minutes). A lease shorter than one delivery attempt has the job delivered twice; the
	// SMTP timeouts of RFC 5321 §4.5.3.2 allow one transaction well over ten minutes in the worst case.
	Lease time.Duration
	// PollInterval is the longest an idle Receive waits before looking at the table again when no
	// notification wakes it (default 200 ms).
	PollInterval time.Duration
}

// Queue is the PostgreSQL implementation of ports.Queue on the delivery_queue table: jobs are leased with
// FOR UPDATE SKIP LOCKED so concurrent consumers never receive the same row, and a lease that expires
// unacknowledged makes the job visible again, so a crashed worker's jobs are taken over (at least once).
// Publishing notifies the channel postmill_delivery_queue (queueChannel) on commit, which wakes waiting
// consumers in every process at once; polling every PollInterval covers the rest. It is safe for
// concurrent use.
type Queue struct {
	pool    *pgxpool.Pool
	queries *db.Queries
	cfg     QueueConfig
	// acks groups concurrent Acks into one statement (and one commit).
	acks combiner[*pendingAck]
	// waking is the state of the notifications sent for jobs written by the send path (queue_direct.go).
	waking atomic.Int32
	// wakeTx is set when a wake asked for announces transactional jobs; the next round's notification
	// takes it.
	wakeTx atomic.Bool
	// txQueued receives a value when this process queued transactional jobs (ports.TransactionalSignal).
	txQueued chan struct{}
}

// NewQueue returns a queue on pool, which must be migrated (Migrate) and stays owned by the caller.
func NewQueue(pool *pgxpool.Pool, cfg QueueConfig) *Queue {
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultQueueLease
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultQueuePollInterval
	}
	q := &Queue{pool: pool, queries: db.New(pool), cfg: cfg, txQueued: make(chan struct{}, 1)}
	q.acks = combiner[*pendingAck]{max: maxAckGroup, write: q.writeAcks}
	return q
}

var _ ports.BulkBacklog = (*Queue)(nil)

// bulkWaitSQL reads the head of delivery_queue_lane_idx's bulk half: the oldest bulk job visible now. A
// leased job, one waiting for its retry and a dead-lettered one all have visible_at ahead.
const bulkWaitSQL = `SELECT coalesce(extract(epoch FROM now() - (
    SELECT visible_at FROM delivery_queue WHERE bulk AND visible_at <= now() ORDER BY bulk, visible_at LIMIT 1)), 0)::float8`

// BulkWait implements ports.BulkBacklog with one index probe, planned as one whatever the table's
// statistics say (probePlansSQL, as for leases).
func (q *Queue) BulkWait(ctx context.Context) (time.Duration, error) {
	var b pgx.Batch
	b.Queue(probePlansSQL)
	b.Queue(bulkWaitSQL)
	br := q.pool.SendBatch(ctx, &b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return 0, interpretError(err)
	}
	var secs float64
	if err := br.QueryRow().Scan(&secs); err != nil {
		return 0, interpretError(err)
	}
	return time.Duration(max(secs, 0) * float64(time.Second)), nil
}

// Publish implements ports.Queue with one multi-row insert and a notification, in one transaction. A job
// id already in the queue is not added twice, so a relay that publishes the same jobs again after a
// failed commit does not duplicate them.
func (q *Queue) Publish(ctx context.Context, jobs []ports.DeliveryJob) error {
	if len(jobs) == 0 {
		return nil
	}
	p := db.PublishJobsParams(jobArrays(jobs))
	tx := hasTransactional(jobs)
	err := interpretError(runPipeline(ctx, q.pool,
		func(q *db.Queries) error { return q.PublishJobs(ctx, p) },
		func(q *db.Queries) error { return q.NotifyQueue(ctx, notifyPayload(tx)) },
	))
	if err == nil && tx {
		q.signalTransactional()
	}
	return err
}

var _ ports.TransactionalSignal = (*Queue)(nil)

// TransactionalQueued implements ports.TransactionalSignal: a value follows the commit of transactional
// jobs written by this process, through Publish or by the send path (EnqueueSendsOn), and, while
// ListenTransactional runs, their announcement by any process.
func (q *Queue) TransactionalQueued() <-chan struct{} { return q.txQueued }

// signalTransactional leaves one value for the consumer, never blocking: a value still unread already
// stands for this queueing.
func (q *Queue) signalTransactional() {
	select {
	case q.txQueued <- struct{}{}:
	default:
	}
}

// hasTransactional reports whether any of jobs is transactional (not a broadcast's).
func hasTransactional(jobs []ports.DeliveryJob) bool {
	for _, j := range jobs {
		if !j.Bulk {
			return true
		}
	}
	return false
}

// Receive implements ports.Queue: it leases up to max visible jobs (transactional before bulk, oldest first
// within a lane) and returns as soon as
// there is at least one. When there is none it waits on a connection listening to the queue's channel,
// looking again on each notification and at least every PollInterval, until ctx ends (ctx's error is
// returned then). A max below 1 counts as 1. Each round of waiting borrows one pooled connection and gives
// it back, so closing the pool is never held up by an idle receiver for longer than PollInterval.
func (q *Queue) Receive(ctx context.Context, max int) ([]ports.Delivery, error) {
	if max < 1 {
		max = 1
	}
	for {
		ds, err := q.lease(ctx, q.pool, max)
		if err != nil || len(ds) > 0 {
			return ds, err
		}
		if ds, err = q.waitRound(ctx, max); err != nil || len(ds) > 0 {
			return ds, err
		}
	}
}

// waitRound listens on the queue's channel for up to PollInterval. It looks once more after LISTEN, which
// catches a job published between the caller's look and LISTEN, and returns what it leased then, or
// nothing once a notification came or the interval passed.
func (q *Queue) waitRound(ctx context.Context, max int) ([]ports.Delivery, error) {
	conn, err := q.pool.Acquire(ctx)
	if err != nil {
		return nil, q.receiveError(ctx, err)
	}
	defer func() {
		// A connection still listening would collect notifications for its next borrower; one that
		// cannot be told to stop is closed, and the pool replaces it.
		uctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := db.New(conn).UnlistenQueue(uctx); err != nil {
			_ = conn.Conn().Close(uctx)
		}
		conn.Release()
	}()
	if err := db.New(conn).ListenQueue(ctx); err != nil {
		return nil, q.receiveError(ctx, err)
	}
	ds, err := q.lease(ctx, conn, max)
	if err != nil || len(ds) > 0 {
		return ds, err
	}
	wctx, cancel := context.WithTimeout(ctx, q.cfg.PollInterval)
	_, err = conn.Conn().WaitForNotification(wctx)
	expired := wctx.Err() != nil
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil && !expired {
		return nil, q.receiveError(ctx, err)
	}
	return nil, nil
}

// probePlansSQL is the text of ProbePlans (queries/messages.sql), for batches built by hand.
const probePlansSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
    set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
    set_config('enable_bitmapscan', 'off', true)`

// lease runs LeaseJobs after ProbePlans in one round trip, so that the picked rows are found by index
// however stale the table's statistics are (a queue fills from empty in seconds).
func (q *Queue) lease(ctx context.Context, conn batchSender, max int) ([]ports.Delivery, error) {
	var rows []db.LeaseJobsRow
	err := runPipeline(ctx, conn,
		func(qs *db.Queries) error { return qs.ProbePlans(ctx) },
		func(qs *db.Queries) (err error) {
			rows, err = qs.LeaseJobs(ctx, db.LeaseJobsParams{RowLimit: clampInt32(max), LeaseSeconds: q.cfg.Lease.Seconds()})
			return err
		})
	if err != nil {
		// Leases taken before the error expire and their jobs come back: nothing is lost.
		return nil, q.receiveError(ctx, err)
	}
	out := make([]ports.Delivery, 0, len(rows))
	for _, r := range rows {
		out = append(out, &queueDelivery{
			queue:      q,
			job:        bulkJob(jobFromFields(r.ID, r.OrganizationID, r.MessageID, r.Domain, r.RecipientIds, r.Attempt, r.FirstQueuedAt, r.NotBefore), r.Bulk),
			token:      r.LeaseToken,
			deliveries: int(r.Deliveries),
		})
	}
	return out, nil
}

// receiveError reports a cancelled or expired ctx as ctx's own error, as callers of a blocking receive
// expect, and anything else as a ports error.
func (q *Queue) receiveError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return interpretError(err)
}

// errLeaseLost is Ack's and Nack's answer when the lease ran out and the job may be with another consumer.
func errLeaseLost() error {
	return ports.Errorf(ports.CodeFailedPrecondition, "delivery lease expired; the job was or will be received again")
}

// queueDelivery is one leased job; its token proves the lease.
type queueDelivery struct {
	queue      *Queue
	job        ports.DeliveryJob
	token      string
	deliveries int
}

// Job implements ports.Delivery.
func (d *queueDelivery) Job() ports.DeliveryJob { return d.job }

// Deliveries implements ports.Delivery: the row's lease count, so a redelivery after a crash or an
// expired lease counts too.
func (d *queueDelivery) Deliveries() int { return d.deliveries }

// Ack implements ports.Delivery: the job is deleted, if this delivery still holds its lease. After the
// lease expired the job is left for whoever receives it next and Ack returns failed_precondition; the
// outcome was recorded once already (ApplyDelivery is idempotent per job id).
//
// Concurrent Acks share one statement and one commit (a deleted row is a commit waiting for the WAL
// flush). Each is still answered on its own: a lost lease fails only that Ack. Once queued, an Ack is
// written even if ctx ends while it waits; Ack then returns ctx's error.
func (d *queueDelivery) Ack(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p := &pendingAck{ctx: ctx, id: d.job.ID, token: d.token, done: make(chan error, 1)}
	d.queue.acks.add(p)
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Bounds of one group of acks.
const (
	// maxAckGroup bounds the acks of one statement.
	maxAckGroup = 256
	// ackGroupTimeout bounds a group's statement, which runs detached from its callers' contexts.
	ackGroupTimeout = 30 * time.Second
)

// pendingAck is one Ack waiting for its group to be written.
type pendingAck struct {
	ctx       context.Context
	id, token string
	done      chan error
}

// writeAcks deletes a group of leased jobs in one statement and answers each Ack.
func (q *Queue) writeAcks(group []*pendingAck) {
	p := db.AckJobsParams{Ids: make([]string, 0, len(group)), LeaseTokens: make([]string, 0, len(group))}
	live := group[:0:0]
	for _, a := range group {
		if err := a.ctx.Err(); err != nil {
			a.done <- err // the caller has gone; its job stays leased until the lease ends
			continue
		}
		live = append(live, a)
		p.Ids = append(p.Ids, a.id)
		p.LeaseTokens = append(p.LeaseTokens, a.token)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), ackGroupTimeout)
	defer cancel()
	var deleted []string
	err := runPipeline(ctx, q.pool,
		func(q *db.Queries) error { return q.ProbePlans(ctx) },
		func(q *db.Queries) (err error) {
			deleted, err = q.AckJobs(ctx, p)
			return err
		})
	if err != nil {
		err = interpretError(err)
		for _, a := range live {
			a.done <- err
		}
		return
	}
	gone := make(map[string]bool, len(deleted))
	for _, token := range deleted {
		gone[token] = true
	}
	for _, a := range live {
		if gone[a.token] {
			a.done <- nil
		} else {
			a.done <- errLeaseLost()
		}
	}
}

var _ ports.LeaseRenewer = (*queueDelivery)(nil)

// Renew implements ports.LeaseRenewer: the lease runs for another QueueConfig.Lease from now, if this
// delivery still holds it; failed_precondition once it was lost.
func (d *queueDelivery) Renew(ctx context.Context) error {
	n, err := d.queue.queries.RenewJobLease(ctx, db.RenewJobLeaseParams{
		ID: d.job.ID, LeaseToken: d.token, LeaseSeconds: d.queue.cfg.Lease.Seconds(),
	})
	if err != nil {
		return interpretError(err)
	}
	if n == 0 {
		return errLeaseLost()
	}
	return nil
}

// Nack implements ports.Delivery: the lease is dropped and the job is visible again at once. After the
// lease expired Nack returns failed_precondition; the job is visible again anyway.
func (d *queueDelivery) Nack(ctx context.Context) error {
	n, err := d.queue.queries.NackJob(ctx, db.NackJobParams{ID: d.job.ID, LeaseToken: d.token})
	if err != nil {
		return interpretError(err)
	}
	if n == 0 {
		return errLeaseLost()
	}
	return nil
}

// nackAfterSQL and deadLetterSQL belong beside NackJob in queries/queue.sql; they are written here while the
// sqlc queries are being reorganised.
const (
	nackAfterSQL = `
UPDATE delivery_queue SET visible_at = now() + make_interval(secs => $3::float8), lease_until = NULL, lease_token = NULL
WHERE id = $1 AND lease_token = $2::uuid`
	handBackSQL = `
UPDATE delivery_queue SET visible_at = now() + make_interval(secs => $3::float8), lease_until = NULL, lease_token = NULL,
    deliveries = greatest(deliveries - 1, 0)
WHERE id = $1 AND lease_token = $2::uuid`
	deadLetterSQL = `
UPDATE delivery_queue
SET dead_at = now(), dead_reason = $3, visible_at = 'infinity', lease_until = NULL, lease_token = NULL
WHERE id = $1 AND lease_token = $2::uuid`
)

// NackAfter implements ports.Delivery: the lease is dropped and the job stays invisible until delay has
// passed (by the database's clock, like leases). A delay of zero or less is Nack. After the lease expired
// NackAfter returns failed_precondition and the job is visible again at once.
func (d *queueDelivery) NackAfter(ctx context.Context, delay time.Duration) error {
	if delay <= 0 {
		return d.Nack(ctx)
	}
	return d.update(ctx, nackAfterSQL, delay.Seconds())
}

// HandBack implements ports.Delivery: NackAfter that takes back the count its lease added, so the job's
// deliveries are those it was tried. After the lease expired it returns failed_precondition, and the
// expired lease's count stays (the job may have been worked on).
func (d *queueDelivery) HandBack(ctx context.Context, delay time.Duration) error {
	return d.update(ctx, handBackSQL, max(delay, 0).Seconds())
}

// maxDeadReason bounds the stored reason of a dead-lettered job.
const maxDeadReason = 2000

// DeadLetter implements ports.Delivery: the row stays in delivery_queue with dead_at and dead_reason set and
// visible_at 'infinity', so no consumer leases it again until an operator puts it back (docs/operations.md).
// The reason is stored as valid UTF-8 without NUL bytes (PostgreSQL refuses both in text), bounded.
func (d *queueDelivery) DeadLetter(ctx context.Context, reason string) error {
	return d.update(ctx, deadLetterSQL, storableText(reason, maxDeadReason))
}

// update runs one statement on the leased row and reports a lost lease.
func (d *queueDelivery) update(ctx context.Context, sql string, arg any) error {
	tag, err := d.queue.pool.Exec(ctx, sql, d.job.ID, d.token, arg)
	if err != nil {
		return interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return errLeaseLost()
	}
	return nil
}

// storableText makes s valid UTF-8 without NUL (written \x00), cut to at most max bytes on a rune boundary.
func storableText(s string, max int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", `\x00`)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// bulkJob sets a leased job's lane, which consumers carry into its retry.
func bulkJob(j ports.DeliveryJob, bulk bool) ports.DeliveryJob {
	j.Bulk = bulk
	return j
}
