-- name: InsertSuppressionReturning :one
-- Inserts the suppression, or when the organization already has one for the address and scope returns that
-- row unchanged (the DO UPDATE is a no-op that makes RETURNING see the existing row).
INSERT INTO suppressions (id, organization_id, address, scope, reason, created_at)
VALUES (@id, NULLIF(@organization_id::text, '')::uuid, lower(@address), @scope, @reason, @created_at)
ON CONFLICT ((COALESCE(organization_id, '00000000-0000-0000-0000-000000000000'::uuid)), address, scope)
DO UPDATE SET address = EXCLUDED.address
RETURNING id, COALESCE(organization_id::text, '')::text AS organization_id, address, scope, reason, created_at;

-- name: DeleteSuppression :execrows
DELETE FROM suppressions
WHERE organization_id IS NOT DISTINCT FROM NULLIF(@organization_id::text, '')::uuid AND id = @id;

-- name: ListBounces :many
-- Keyset paging newest first; the first page passes a cursor after every row.
SELECT * FROM bounces
WHERE organization_id = @organization_id
  AND (created_at, id) < (@before_created_at::timestamptz, @before_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;

-- name: ListComplaints :many
SELECT * FROM complaints
WHERE organization_id = @organization_id
  AND (created_at, id) < (@before_created_at::timestamptz, @before_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;

-- name: RecipientByID :one
-- By id alone: the caller authenticated the id (a VERP MAC) before asking.
SELECT id, organization_id, message_id, address FROM recipients WHERE id = @id;

-- name: MessageOrganization :one
-- By id alone, for the same reason.
SELECT organization_id FROM messages WHERE id = @id;

-- name: InsertBounces :exec
INSERT INTO bounces (id, organization_id, message_id, recipient_id, address, type, class, status, action,
    diagnostic_code, remote_mta, reporting_mta, created_at)
SELECT b.id, b.organization_id, b.message_id, b.recipient_id, b.address, b.type, b.class, b.status, b.action,
    b.diagnostic_code, b.remote_mta, b.reporting_mta, b.created_at
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@message_ids::uuid[]) AS message_id,
        unnest(@recipient_ids::uuid[]) AS recipient_id,
        unnest(@addresses::text[]) AS address,
        unnest(@types::text[]) AS type,
        unnest(@classes::text[]) AS class,
        unnest(@statuses::text[]) AS status,
        unnest(@actions::text[]) AS action,
        unnest(@diagnostic_codes::text[]) AS diagnostic_code,
        unnest(@remote_mtas::text[]) AS remote_mta,
        unnest(@reporting_mtas::text[]) AS reporting_mta,
        unnest(@created_at::timestamptz[]) AS created_at) AS b;

-- name: InsertComplaints :exec
-- has_arrivals[i] false stores no arrival date.
INSERT INTO complaints (id, organization_id, message_id, recipient_id, address, feedback_type, user_agent,
    reported_domain, source_ip, arrival_date, created_at)
SELECT c.id, c.organization_id, c.message_id, c.recipient_id, c.address, c.feedback_type, c.user_agent,
    c.reported_domain, c.source_ip, CASE WHEN c.has_arrival THEN c.arrival_date END, c.created_at
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@message_ids::uuid[]) AS message_id,
        unnest(@recipient_ids::uuid[]) AS recipient_id,
        unnest(@addresses::text[]) AS address,
        unnest(@feedback_types::text[]) AS feedback_type,
        unnest(@user_agents::text[]) AS user_agent,
        unnest(@reported_domains::text[]) AS reported_domain,
        unnest(@source_ips::text[]) AS source_ip,
        unnest(@has_arrivals::bool[]) AS has_arrival,
        unnest(@arrival_dates::timestamptz[]) AS arrival_date,
        unnest(@created_at::timestamptz[]) AS created_at) AS c;
