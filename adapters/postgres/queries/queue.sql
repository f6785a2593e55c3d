-- name: PublishJobs :exec
-- A job id already in the queue is kept as it is: a relay that published but could not commit publishes
-- the same job again, and the queue holds it once.
INSERT INTO delivery_queue (id, organization_id, message_id, domain, recipient_ids, attempt, first_queued_at, not_before, bulk)
SELECT j.id, j.organization_id, j.message_id, j.domain, string_to_array(j.recipient_ids, ',')::uuid[], j.attempt,
    j.first_queued_at, j.not_before, j.bulk
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@message_ids::uuid[]) AS message_id,
        unnest(@domains::text[]) AS domain,
        unnest(@recipient_ids::text[]) AS recipient_ids,
        unnest(@attempts::int[]) AS attempt,
        unnest(@first_queued_at::timestamptz[]) AS first_queued_at,
        unnest(@not_before::timestamptz[]) AS not_before,
        unnest(@bulk::bool[]) AS bulk) AS j
ON CONFLICT (id) DO NOTHING;

-- name: NotifyQueue :exec
-- Wakes waiting consumers in every process once the publishing transaction commits. The payload is 'tx'
-- when transactional jobs were queued (queue_signal.go), empty otherwise.
SELECT pg_notify('postmill_delivery_queue', sqlc.arg(payload)::text);

-- name: LeaseJobs :many
-- Leases up to row_limit visible jobs: each gets a fresh token and stays invisible until the lease ends.
-- SKIP LOCKED keeps concurrent consumers off each other's rows; times are the database's, so every
-- process agrees on when a lease has expired. The order (bulk, visible_at, id) is delivery_queue_lane_idx's
-- (migration 00028): every visible job of the transactional lane (bulk false) is leased before any of the
-- bulk lane's, so a broadcast's backlog is never in front of a transactional job. Dead-lettered rows have
-- visible_at 'infinity' and are never picked. deliveries counts the leases, which consumers cap their
-- retries with. Run after ProbePlans (Queue.lease).
-- The picked ids are taken into an array first (an InitPlan, run once) and the rows updated by primary-key
-- probes: a join back to the picked rows, planned while the queue was empty and kept by the connection,
-- walked the whole queue for every lease.
UPDATE delivery_queue AS q
SET lease_token = gen_random_uuid(),
    lease_until = now() + make_interval(secs => @lease_seconds::float8),
    visible_at  = now() + make_interval(secs => @lease_seconds::float8),
    deliveries  = q.deliveries + 1
WHERE q.id = ANY (ARRAY(
    SELECT p.id FROM delivery_queue p
    WHERE p.visible_at <= now()
    ORDER BY p.bulk, p.visible_at, p.id
    LIMIT @row_limit
    FOR UPDATE SKIP LOCKED))
RETURNING q.id, q.organization_id, q.message_id, q.domain, q.recipient_ids, q.attempt, q.first_queued_at, q.not_before,
    q.bulk, q.lease_token::text AS lease_token, q.deliveries;

-- name: AckJob :execrows
DELETE FROM delivery_queue WHERE id = @id AND lease_token = @lease_token::uuid;

-- name: NackJob :execrows
UPDATE delivery_queue SET visible_at = now(), lease_until = NULL, lease_token = NULL
WHERE id = @id AND lease_token = @lease_token::uuid;

-- name: RenewJobLease :execrows
-- A received job is hidden by visible_at; renewing moves it with the lease.
UPDATE delivery_queue
SET lease_until = now() + make_interval(secs => @lease_seconds::float8),
    visible_at  = now() + make_interval(secs => @lease_seconds::float8)
WHERE id = @id AND lease_token = @lease_token::uuid;

-- name: ListenQueue :exec
LISTEN postmill_delivery_queue;

-- name: UnlistenQueue :exec
UNLISTEN postmill_delivery_queue;

-- name: AckJobs :many
-- The grouped form of AckJob: deletes each job still leased under its token and returns the tokens of the
-- rows deleted (a token names one lease of one job).
-- A row matches when its id is one of ids and its token one of lease_tokens: a token is issued to one
-- lease of one job, so that is the same as matching the pairs. No join: a join to the pairs, planned while
-- the queue was empty and kept by the connection, walked the whole queue for every ack.
DELETE FROM delivery_queue AS q
WHERE q.id = ANY (@ids::uuid[]) AND q.lease_token = ANY (@lease_tokens::uuid[])
RETURNING q.lease_token::text AS lease_token;

-- name: InsertSendQueueJobs :exec
-- PublishJobs for the send path when the delivery queue is this database's (Store.EnqueueSendsOn): job i is
-- written only if its message exists at this point of the transaction, and consumers see it once the
-- send commits. Its id is new, so there is nothing to conflict with.
INSERT INTO delivery_queue (id, organization_id, message_id, domain, recipient_ids, attempt, first_queued_at, not_before, bulk)
SELECT j.id, j.organization_id, j.message_id, j.domain, string_to_array(j.recipient_ids, ',')::uuid[], j.attempt,
    j.first_queued_at, j.not_before, j.bulk
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@message_ids::uuid[]) AS message_id,
        unnest(@domains::text[]) AS domain,
        unnest(@recipient_ids::text[]) AS recipient_ids,
        unnest(@attempts::int[]) AS attempt,
        unnest(@first_queued_at::timestamptz[]) AS first_queued_at,
        unnest(@not_before::timestamptz[]) AS not_before,
        unnest(@bulk::bool[]) AS bulk) AS j
WHERE EXISTS (SELECT 1 FROM messages m WHERE m.id = j.message_id);
