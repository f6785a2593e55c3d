-- name: InsertAppliedJob :execrows
-- Zero rows affected means the job's outcome was applied before (or is being applied by a concurrent
-- transaction, which this one waited for).
INSERT INTO applied_jobs (job_id, applied_at) VALUES (@job_id, now())
ON CONFLICT (job_id) DO NOTHING;

-- name: LockMessage :one
-- Serialises outcome applications of one message, so each sees the recipients' states the others left.
SELECT status FROM messages WHERE organization_id = @organization_id AND id = @id FOR NO KEY UPDATE;

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
UPDATE messages SET status = @status WHERE organization_id = @organization_id AND id = @id;

-- name: OutboundMessage :one
SELECT sqlc.embed(m), sqlc.embed(d)
FROM messages m
JOIN domains d ON d.organization_id = m.organization_id AND d.id = m.domain_id
WHERE m.organization_id = @organization_id AND m.id = @id;
