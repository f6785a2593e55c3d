-- name: InsertEvents :exec
-- Empty strings stand for NULL ids, urls, link ids and bounce classes; has_responses[i] tells whether
-- provider_responses[i] is present.
INSERT INTO events (id, organization_id, type, message_id, recipient_id, domain_id, provider_response, occurred_at,
    url, link_id, bounce_class)
SELECT e.id, e.organization_id, e.type, NULLIF(e.message_id, '')::uuid, NULLIF(e.recipient_id, '')::uuid,
    NULLIF(e.domain_id, '')::uuid, CASE WHEN e.has_response THEN e.provider_response END, e.occurred_at,
    NULLIF(e.url, ''), NULLIF(e.link_id, ''), NULLIF(e.bounce_class, '')
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@types::text[]) AS type,
        unnest(@message_ids::text[]) AS message_id,
        unnest(@recipient_ids::text[]) AS recipient_id,
        unnest(@domain_ids::text[]) AS domain_id,
        unnest(@has_responses::bool[]) AS has_response,
        unnest(@provider_responses::text[]) AS provider_response,
        unnest(@occurred_at::timestamptz[]) AS occurred_at,
        unnest(@urls::text[]) AS url,
        unnest(@link_ids::text[]) AS link_id,
        unnest(@bounce_classes::text[]) AS bounce_class) AS e;

-- name: InsertOutboxJobs :exec
-- recipient_ids[i] is job i's recipient ids joined with commas (arrays of arrays must be rectangular).
INSERT INTO delivery_outbox (id, organization_id, message_id, domain, recipient_ids, attempt, first_queued_at, not_before, bulk)
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
        unnest(@bulk::bool[]) AS bulk) AS j;

-- name: TakeDueOutboxJobs :many
-- Deletes (and returns) up to row_limit due jobs; SKIP LOCKED lets several relays run side by side without
-- taking the same row. The caller commits only once the jobs are published. The due ids are taken into an
-- array first (an InitPlan, run once) and the rows deleted by primary-key probes: a join back to the
-- picked rows planned while the outbox was empty walked the whole outbox for every take.
DELETE FROM delivery_outbox
WHERE id = ANY (ARRAY(
    SELECT o.id FROM delivery_outbox o
    WHERE o.not_before <= @now
    ORDER BY o.not_before, o.id
    LIMIT @row_limit
    FOR UPDATE SKIP LOCKED
))
RETURNING *;

-- name: InsertSendEvents :exec
-- InsertEvents for the send path: event i is written only if its send's message (owner_ids[i]) exists at
-- this point of the transaction.
INSERT INTO events (id, organization_id, type, message_id, recipient_id, domain_id, provider_response, occurred_at)
SELECT e.id, e.organization_id, e.type, NULLIF(e.message_id, '')::uuid, NULLIF(e.recipient_id, '')::uuid,
    NULLIF(e.domain_id, '')::uuid, CASE WHEN e.has_response THEN e.provider_response END, e.occurred_at
FROM (SELECT
        unnest(@owner_ids::uuid[]) AS owner_id,
        unnest(@ids::uuid[]) AS id,
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@types::text[]) AS type,
        unnest(@message_ids::text[]) AS message_id,
        unnest(@recipient_ids::text[]) AS recipient_id,
        unnest(@domain_ids::text[]) AS domain_id,
        unnest(@has_responses::bool[]) AS has_response,
        unnest(@provider_responses::text[]) AS provider_response,
        unnest(@occurred_at::timestamptz[]) AS occurred_at) AS e
WHERE EXISTS (SELECT 1 FROM messages m WHERE m.id = e.owner_id);

-- name: InsertSendJobs :exec
-- InsertOutboxJobs for the send path: job i is written only if its message exists at this point of the
-- transaction.
INSERT INTO delivery_outbox (id, organization_id, message_id, domain, recipient_ids, attempt, first_queued_at, not_before, bulk)
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
