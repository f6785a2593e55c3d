-- name: LockOrganizationWebhookEndpoints :exec
-- Serialises endpoint creation within one organization until the transaction ends, so the count that
-- InsertWebhookEndpointWithin checks cannot change before its insert commits (lock class 7304).
SELECT pg_advisory_xact_lock(7304, hashtext(sqlc.arg(organization_id)::text));

-- name: InsertWebhookEndpointWithin :execrows
-- The endpoint, unless the organization already holds max_endpoints endpoints (below 1: no bound).
INSERT INTO webhook_endpoints (id, organization_id, url, enabled, event_types, secret, created_at)
SELECT @id::uuid, @organization_id::uuid, @url::text, @enabled::boolean, @event_types::text[], @secret::bytea,
    @created_at::timestamptz
WHERE @max_endpoints::int < 1
   OR (SELECT count(*) FROM webhook_endpoints WHERE organization_id = @organization_id::uuid) < @max_endpoints::int;

-- name: ListWebhookEndpoints :many
-- Keyset paging newest first; the first page passes a cursor after every row.
SELECT * FROM webhook_endpoints
WHERE organization_id = @organization_id
  AND (created_at, id) < (@before_created_at::timestamptz, @before_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;

-- name: WebhookEndpointByID :one
SELECT * FROM webhook_endpoints WHERE organization_id = @organization_id AND id = @id;

-- name: DeleteWebhookEndpoint :execrows
-- Its deliveries go with it (ON DELETE CASCADE).
DELETE FROM webhook_endpoints WHERE organization_id = @organization_id AND id = @id;

-- name: SetWebhookEndpointSecret :one
UPDATE webhook_endpoints SET secret = @secret
WHERE organization_id = @organization_id AND id = @id
RETURNING *;

-- name: InsertWebhookDelivery :exec
INSERT INTO webhook_deliveries (id, organization_id, endpoint_id, event_id, event_type, status, attempts,
    response_code, next_attempt_at, delivered_at, created_at, payload, original_event_id, blocked_reason)
VALUES (@id, @organization_id, @endpoint_id, @event_id, @event_type, @status, @attempts, @response_code,
    @next_attempt_at, @delivered_at, @created_at, @payload, NULLIF(@original_event_id::text, ''),
    NULLIF(@blocked_reason::text, ''));

-- name: WebhookDeliveryByID :one
SELECT id, organization_id, endpoint_id, event_id, event_type, status, attempts, response_code, next_attempt_at,
    delivered_at, created_at, payload, COALESCE(original_event_id, '')::text AS original_event_id,
    COALESCE(blocked_reason, '')::text AS blocked_reason
FROM webhook_deliveries
WHERE organization_id = @organization_id AND id = @id;

-- name: ListRecentWebhookDeliveries :many
SELECT id, organization_id, endpoint_id, event_id, event_type, status, attempts, response_code, next_attempt_at,
    delivered_at, created_at, payload, COALESCE(original_event_id, '')::text AS original_event_id,
    COALESCE(blocked_reason, '')::text AS blocked_reason
FROM webhook_deliveries
WHERE organization_id = @organization_id
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;

-- name: TakeEventsToFanOut :many
-- Locks up to row_limit ids of the webhook outbox, oldest first, each with its event looked up by primary
-- key; SKIP LOCKED lets several processes fan out side by side without taking the same event. found is
-- false for an id whose event is gone or has fanned_out_at set (never to be fanned out): the caller
-- consumes it without handing it out. Each event comes with the enabled endpoints of its organization
-- that subscribe to its type (none for email.cancelled, which is timeline-only), so that the caller can
-- name every delivery before writing it. Absent ids read as empty strings.
SELECT o.id, (e.id IS NOT NULL AND e.fanned_out_at IS NULL)::boolean AS found,
    COALESCE(e.organization_id::text, '')::text AS organization_id, COALESCE(e.type, '')::text AS type,
    COALESCE(e.message_id::text, '')::text AS message_id,
    COALESCE(e.recipient_id::text, '')::text AS recipient_id, COALESCE(e.domain_id::text, '')::text AS domain_id,
    e.provider_response, e.occurred_at, COALESCE(e.url, '')::text AS url, COALESCE(e.link_id, '')::text AS link_id,
    COALESCE(e.bounce_class, '')::text AS bounce_class,
    ARRAY(SELECT w.id::text FROM webhook_endpoints w
          WHERE w.organization_id = e.organization_id AND w.enabled AND e.type = ANY (w.event_types)
            AND e.type <> 'email.cancelled'
          ORDER BY w.created_at, w.id)::text[] AS endpoint_ids
FROM webhook_outbox o
LEFT JOIN events e ON e.id = o.id
ORDER BY o.id
LIMIT @row_limit
FOR UPDATE OF o SKIP LOCKED;

-- name: InsertFanOutDeliveries :exec
-- Delivery ids[i] goes to endpoint endpoint_ids[i] for event delivery_event_ids[i]; each event's
-- organization, type and payload come once per event, in the arrays led by event_ids. The join with
-- webhook_endpoints checks again, at write time, that the endpoint still exists in the event's
-- organization, is enabled and subscribes to the type: a delivery whose endpoint changed since
-- TakeEventsToFanOut is not written.
INSERT INTO webhook_deliveries (id, organization_id, endpoint_id, event_id, event_type, status, attempts,
    response_code, next_attempt_at, created_at, payload)
SELECT d.id, e.organization_id, w.id, e.id::text, e.type, 'pending', 0, 0, @now::timestamptz, @now::timestamptz,
    e.payload
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@endpoint_ids::uuid[]) AS endpoint_id,
        unnest(@delivery_event_ids::uuid[]) AS event_id) AS d
JOIN (SELECT
        unnest(@event_ids::uuid[]) AS id,
        unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@types::text[]) AS type,
        unnest(@payloads::bytea[]) AS payload) AS e ON e.id = d.event_id
JOIN webhook_endpoints w ON w.id = d.endpoint_id AND w.organization_id = e.organization_id AND w.enabled
    AND e.type = ANY (w.event_types);

-- name: DeleteWebhookOutbox :exec
-- The outbox ids a fan-out took, deleted in the transaction that writes their deliveries.
DELETE FROM webhook_outbox WHERE id = ANY (@ids::uuid[]);

-- name: ClaimDueWebhookDeliveries :many
-- Leases up to row_limit due deliveries (pending or failed, next_attempt_at passed, no live lease) whose
-- endpoint is enabled, earliest due first; SKIP LOCKED keeps concurrent dispatchers off each other's rows,
-- and the lease keeps them off the rows once this transaction has committed. Each lease gets a fresh
-- token, so a dispatcher whose lease expired cannot record over the next holder.
WITH due AS (
    SELECT d.id FROM webhook_deliveries d
    JOIN webhook_endpoints w ON w.id = d.endpoint_id
    WHERE d.status IN ('pending', 'failed') AND d.next_attempt_at <= @now::timestamptz
      AND (d.lease_until IS NULL OR d.lease_until < @now::timestamptz)
      AND w.enabled
    ORDER BY d.next_attempt_at, d.id
    LIMIT @row_limit
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE webhook_deliveries AS d
SET lease_token = gen_random_uuid()::text, lease_until = @lease_until::timestamptz
FROM due, webhook_endpoints AS w
WHERE d.id = due.id AND w.id = d.endpoint_id
RETURNING d.id, d.organization_id, d.endpoint_id, d.event_id, d.event_type, d.status, d.attempts, d.response_code,
    d.next_attempt_at, d.delivered_at, d.created_at, d.payload,
    COALESCE(d.original_event_id, '')::text AS original_event_id, d.lease_token::text AS lease_token,
    w.url AS endpoint_url, w.enabled AS endpoint_enabled, w.event_types AS endpoint_event_types,
    w.secret AS endpoint_secret, w.created_at AS endpoint_created_at;

-- name: RecordWebhookAttempts :exec
-- Result i applies only while the delivery still holds lease leases[i]; the lease is released. Only
-- pending and failed deliveries are due: next_attempt_at is the given retry time, or, for a pending or
-- failed result without one, the delivery's previous due time (it is due again at once); NULL in every
-- other state. blocked_reason is kept for a blocked result only.
UPDATE webhook_deliveries AS d
SET status          = r.status,
    attempts        = r.attempts,
    response_code   = r.response_code,
    next_attempt_at = CASE WHEN r.status IN ('pending', 'failed')
                          THEN COALESCE(CASE WHEN r.has_next THEN r.next_attempt_at END, d.next_attempt_at) END,
    delivered_at    = CASE WHEN r.has_delivered THEN r.delivered_at END,
    blocked_reason  = CASE WHEN r.status = 'blocked' THEN NULLIF(r.blocked_reason, '') END,
    lease_token     = NULL,
    lease_until     = NULL
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@leases::text[]) AS lease,
        unnest(@statuses::text[]) AS status,
        unnest(@attempts::int[]) AS attempts,
        unnest(@response_codes::int[]) AS response_code,
        unnest(@has_next::bool[]) AS has_next,
        unnest(@next_attempt_at::timestamptz[]) AS next_attempt_at,
        unnest(@has_delivered::bool[]) AS has_delivered,
        unnest(@delivered_at::timestamptz[]) AS delivered_at,
        unnest(@blocked_reasons::text[]) AS blocked_reason) AS r
WHERE d.id = r.id AND d.lease_token = r.lease;
