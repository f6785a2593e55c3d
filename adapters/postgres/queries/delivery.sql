-- name: InsertAppliedJob :execrows
-- Zero rows affected means the job's outcome was applied before (or is being applied by a concurrent
-- transaction, which this one waited for).
INSERT INTO applied_jobs (job_id, applied_at) VALUES (@job_id, now())
ON CONFLICT (job_id) DO NOTHING;

-- name: LockMessage :one
-- Serialises outcome applications of one message, so each sees the recipients' states the others left.
-- The organization is compared with IS NOT DISTINCT FROM, which no index serves, so the row is always
-- found through the primary key: with organization_id = … the planner may instead walk the organization's
-- messages in messages_org_idempotency_key when its statistics are stale (see ProbePlans).
SELECT status FROM messages WHERE id = @id AND organization_id IS NOT DISTINCT FROM @organization_id FOR NO KEY UPDATE;

-- name: SetRecipientStatuses :exec
UPDATE recipients AS r SET status = u.status
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@statuses::text[]) AS status) AS u
WHERE r.organization_id = @organization_id AND r.message_id = @message_id AND r.id = u.id;

-- name: RecipientStatuses :many
SELECT status FROM recipients
WHERE organization_id = @organization_id AND message_id = @message_id
ORDER BY position;

-- name: SetMessageStatus :exec
-- Found through the primary key (see LockMessage).
UPDATE messages SET status = @status WHERE id = @id AND organization_id IS NOT DISTINCT FROM @organization_id;

-- name: OutboundMessage :one
-- Found through the primary key (see LockMessage).
SELECT sqlc.embed(m), sqlc.embed(d)
FROM messages m
JOIN domains d ON d.id = m.domain_id AND d.organization_id = m.organization_id
WHERE m.id = @id AND m.organization_id IS NOT DISTINCT FROM @organization_id;

-- name: InsertAppliedJobs :many
-- The grouped form of InsertAppliedJob, in job id order so that concurrent groups wait for each other in
-- one order. Only jobs whose message is the organization's are recorded. The ids returned are the ones
-- recorded now; a missing id was applied before (or by a concurrent transaction this one waited for), or
-- its message is not the organization's.
INSERT INTO applied_jobs (job_id, applied_at)
SELECT u.job_id, now()
FROM (SELECT
        unnest(@job_ids::uuid[]) AS job_id,
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@message_ids::uuid[]) AS message_id) AS u
WHERE EXISTS (SELECT 1 FROM messages m WHERE m.id = u.message_id AND m.organization_id IS NOT DISTINCT FROM u.organization_id)
ORDER BY u.job_id
ON CONFLICT (job_id) DO NOTHING
RETURNING job_id;

-- name: LockMessages :many
-- The grouped form of LockMessage: each (organization, message) pair's row, locked in id order so that
-- concurrent groups never deadlock on each other. A pair missing from the result is not the organization's.
-- Each row is found through the primary key (see LockMessage), as in every grouped statement on messages.
SELECT m.id, m.status FROM messages m
JOIN (SELECT
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@ids::uuid[]) AS id) AS u ON m.id = u.id AND m.organization_id IS NOT DISTINCT FROM u.organization_id
ORDER BY m.id
FOR NO KEY UPDATE OF m;

-- name: SetRecipientStatusesOfMessages :exec
-- The grouped form of SetRecipientStatuses: one row per recipient, each naming its organization and message.
UPDATE recipients AS r SET status = u.status
FROM (SELECT
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@message_ids::uuid[]) AS message_id,
        unnest(@ids::uuid[]) AS id,
        unnest(@statuses::text[]) AS status) AS u
WHERE r.organization_id = u.organization_id AND r.message_id = u.message_id AND r.id = u.id;

-- name: RecipientStatusesOfMessages :many
-- The grouped form of RecipientStatuses: every recipient state of the messages in message_ids whose
-- organization is in organization_ids (see OutboundRecipients), by message then position.
SELECT r.message_id, r.status FROM recipients r
WHERE r.message_id = ANY(@message_ids::uuid[]) AND r.organization_id = ANY(@organization_ids::uuid[])
ORDER BY r.message_id, r.position;

-- name: SetMessageStatuses :exec
-- The grouped form of SetMessageStatus.
UPDATE messages AS m SET status = u.status
FROM (SELECT
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@ids::uuid[]) AS id,
        unnest(@statuses::text[]) AS status) AS u
WHERE m.id = u.id AND m.organization_id IS NOT DISTINCT FROM u.organization_id;

-- name: OutboundMessages :many
-- The grouped form of OutboundMessage: each (organization, message) pair's message with its domain. A pair
-- missing from the result is not the organization's.
SELECT sqlc.embed(m), sqlc.embed(d)
FROM messages m
JOIN (SELECT
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@ids::uuid[]) AS id) AS u ON m.id = u.id AND m.organization_id IS NOT DISTINCT FROM u.organization_id
JOIN domains d ON d.id = m.domain_id AND d.organization_id = m.organization_id;

-- name: OutboundRecipients :many
-- Every recipient of the messages in message_ids whose organization is in organization_ids, by message then
-- request order. The caller pairs each message with its organization (message ids are unique across
-- organizations). A join on the unnested pairs would be planned as a scan of the whole table.
SELECT sqlc.embed(r)
FROM recipients r
WHERE r.message_id = ANY(@message_ids::uuid[]) AND r.organization_id = ANY(@organization_ids::uuid[])
ORDER BY r.message_id, r.position;

-- name: OutboundAttachments :many
-- Every attachment of the messages in message_ids whose organization is in organization_ids, by message
-- then request order (see OutboundRecipients).
SELECT sqlc.embed(a)
FROM attachments a
WHERE a.message_id = ANY(@message_ids::uuid[]) AND a.organization_id = ANY(@organization_ids::uuid[])
ORDER BY a.message_id, a.position;

-- name: PruneAppliedJobs :execrows
-- Deletes at most @batch_limit remembered job ids applied before @before, oldest first.
DELETE FROM applied_jobs AS a
WHERE a.job_id IN (
    SELECT o.job_id FROM applied_jobs AS o WHERE o.applied_at < @before::timestamptz ORDER BY o.applied_at LIMIT @batch_limit::int
);
