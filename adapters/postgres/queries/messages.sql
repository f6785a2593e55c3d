-- name: PreferGenericPlans :exec
-- Heads a pipelined batch of the send path: for the rest of that batch's transaction only, statements are
-- planned once per connection instead of on every execution. PostgreSQL otherwise keeps planning the
-- array-driven statements afresh each time (their custom plans look cheaper than a generic one), which
-- costs more than executing them; their generic plans are the same index probes.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true);

-- name: ProbePlans :exec
-- Heads a pipelined batch of array-driven statements (the send path's inserts, the MTA's reads, outcome
-- writes, leases and acks): for the rest of that batch's transaction only, they are planned once per
-- connection (as PreferGenericPlans) and as index probes, one per array element. Their right plan never
-- scans a table: each element names rows by key. But a plan made while a table is small (a new
-- installation, or any table before autovacuum analyses it again) prefers a sequential scan and a hash
-- join, and a generic plan keeps that shape while the table grows until the next ANALYZE, so every
-- statement would read all of messages, recipients or delivery_queue. With sequential scans, hash and
-- merge joins priced out, the planner takes the indexes whatever the statistics say. Bitmap scans are priced
-- out too: a take that walks a queue table in index order (LIMIT ... FOR UPDATE SKIP LOCKED) planned as a
-- bitmap scan reads every due row and every dead one left by earlier takes, heap pages included, then sorts
-- them, where an index scan stops at the limit and marks the dead entries it passes so that later takes
-- skip them.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
    set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
    set_config('enable_bitmapscan', 'off', true);

-- name: InsertMessages :exec
-- Writes the messages of several concurrent sends of one organization; set-returning functions in one
-- select list advance in lockstep, so element i of each array describes message i. A message whose
-- idempotency key is taken is skipped (SendOutcomes then reports the owner); a concurrent transaction
-- holding the same key is waited for, so exactly one message per key is ever created.
INSERT INTO messages (id, organization_id, domain_id, status, from_address, reply_to, subject, html_body, text_body,
    headers, tags, metadata, sandbox, scheduled_at, due_at, idempotency_key, created_at)
SELECT m.id, @organization_id, m.domain_id, m.status, m.from_address, m.reply_to, m.subject, m.html_body, m.text_body,
    m.headers, m.tags, m.metadata, m.sandbox, CASE WHEN m.scheduled THEN m.scheduled_at END,
    CASE WHEN m.scheduled AND m.status = 'scheduled' THEN m.scheduled_at END, NULLIF(m.idempotency_key, ''), m.created_at
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@domain_ids::uuid[]) AS domain_id,
        unnest(@statuses::text[]) AS status,
        unnest(@from_addresses::text[]) AS from_address,
        unnest(@reply_tos::text[]) AS reply_to,
        unnest(@subjects::text[]) AS subject,
        unnest(@html_bodies::text[]) AS html_body,
        unnest(@text_bodies::text[]) AS text_body,
        unnest(@headers::jsonb[]) AS headers,
        unnest(@tags::jsonb[]) AS tags,
        unnest(@metadata::jsonb[]) AS metadata,
        unnest(@sandbox::bool[]) AS sandbox,
        unnest(@scheduled::bool[]) AS scheduled,
        unnest(@scheduled_at::timestamptz[]) AS scheduled_at,
        unnest(@idempotency_keys::text[]) AS idempotency_key,
        unnest(@created_at::timestamptz[]) AS created_at) AS m
ON CONFLICT ON CONSTRAINT messages_org_idempotency_key DO NOTHING;

-- name: LockUsageMeters :exec
-- Creates (at 0) and locks the usage meters a group of sends meters, in the order (metric, period) so that
-- two transactions locking the same meters never deadlock. The locks last until the transaction ends: the
-- statements after this one read the meters' current values and no other transaction changes them
-- meanwhile, which is what keeps MeterSends from passing a limit however many groups run at once. A period
-- whose only sends were refused keeps its row at 0, which reads like an absent one.
INSERT INTO usage_meters (organization_id, metric, period_start, value)
SELECT @organization_id, m.metric, m.period_start, 0
FROM (SELECT unnest(@metrics::text[]) AS metric, unnest(@periods::date[]) AS period_start) AS m
ORDER BY m.metric, m.period_start
ON CONFLICT ON CONSTRAINT usage_meters_pkey DO UPDATE SET value = usage_meters.value;

-- name: MeterSends :many
-- Meters a group's sends under the meters LockUsageMeters locked, with the effect of one conditional update
-- per send in arrival order: send i's units go onto every meter together when each meter stays within send
-- i's maximum for it (maxes[(i-1)*k + j] for meter j of the k metrics and periods), and onto none otherwise.
-- Only a message this transaction inserted is metered: a send whose idempotency key was taken was skipped
-- by InsertMessages and meters nothing. A message that does not fit is deleted again, so the conditional
-- inserts of its recipients, events and jobs write nothing for it and its key is free for a later send.
-- over_limit is, per send, the position (from 1) of the first of its limits it did not fit under, 0 when
-- it was metered or metered nothing (or, never expected, when its meters were not found: it is deleted all
-- the same, so nothing is written unmetered). Every accepted send adds the same units to every meter, so one
-- running total (walk) tells what each send finds: it fits when that total plus its units stay within its
-- room, the least headroom any of its limits leaves. A send's message is looked up by a scalar subquery,
-- which stays a primary-key probe under PreferGenericPlans (an EXISTS may become a hashed scan of messages).
-- The walk reads each send from arrays (arr, one row, materialized) by position and answers from itself, so
-- the statement joins no two CTEs: under ProbePlans such a join is a nested loop, and joined to the send
-- CTE each step scanned every send (a group of 128 took 3.6 ms, 12-16 ms when most were over the cap).
WITH RECURSIVE meter AS (
    SELECT m.pos, u.value
    FROM (SELECT unnest(@metrics::text[]) AS metric, unnest(@periods::date[]) AS period_start,
            generate_subscripts(@metrics::text[], 1) AS pos) AS m
    JOIN usage_meters u
        ON u.organization_id = @organization_id AND u.metric = m.metric AND u.period_start = m.period_start
), send AS (
    SELECT s.i, s.id, s.units, ((SELECT x.id FROM messages x WHERE x.id = s.id) IS NOT NULL)::bool AS inserted,
        (SELECT min((@maxes::bigint[])[(s.i - 1) * cardinality(@metrics::text[]) + meter.pos] - meter.value)
         FROM meter) AS room
    FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@units::bigint[]) AS units,
            generate_subscripts(@ids::uuid[], 1) AS i) AS s
), arr AS MATERIALIZED (
    SELECT array_agg(s.inserted AND COALESCE(s.units > 0, false) ORDER BY s.i) AS ok,
        array_agg(COALESCE(s.units, 0) ORDER BY s.i) AS units, array_agg(COALESCE(s.room, -1) ORDER BY s.i) AS room,
        count(*)::int AS n
    FROM send s
), walk (i, after, refused, pos) AS (
    SELECT 0, 0::bigint, false, 0
    UNION ALL
    SELECT walk.i + 1, walk.after + CASE WHEN t.fits THEN t.units ELSE 0 END, t.ok AND NOT t.fits,
        CASE WHEN t.ok AND NOT t.fits THEN COALESCE((SELECT min(meter.pos) FROM meter
            WHERE meter.value + walk.after + t.units
                > (@maxes::bigint[])[walk.i * cardinality(@metrics::text[]) + meter.pos]), 0) ELSE 0 END
    FROM walk
    CROSS JOIN arr
    CROSS JOIN LATERAL (SELECT arr.ok[walk.i + 1] AS ok, arr.units[walk.i + 1] AS units,
        arr.ok[walk.i + 1] AND walk.after + arr.units[walk.i + 1] <= arr.room[walk.i + 1] AS fits) AS t
    WHERE walk.i < arr.n
), metered AS (
    UPDATE usage_meters u SET value = u.value + (SELECT max(walk.after) FROM walk)
    FROM (SELECT unnest(@metrics::text[]) AS metric, unnest(@periods::date[]) AS period_start) AS m
    WHERE u.organization_id = @organization_id AND u.metric = m.metric AND u.period_start = m.period_start
      AND (SELECT max(walk.after) FROM walk) > 0
    RETURNING u.metric
), refused AS (
    DELETE FROM messages x
    WHERE x.id IN (SELECT (@ids::uuid[])[walk.i] FROM walk WHERE walk.refused)
    RETURNING x.id
)
SELECT (@ids::uuid[])[walk.i]::text AS message_id, walk.pos::int AS over_limit
FROM walk
WHERE walk.i > 0
ORDER BY walk.i;

-- name: SendOutcomes :many
-- Reads, once a group's sends are metered, whether each send's message was written and, for one that was
-- not because its idempotency key was taken, the message holding the key now, or an empty id when none
-- does (the key's owner was refused within this transaction, so the send is tried again on its own). Only
-- sends that were not written look their key up; the lookups are per send (a scalar subquery, a lateral
-- one with LIMIT) so that their generic plans stay index probes rather than scans of the organization's
-- messages.
SELECT s.id::text AS message_id, s.written::bool AS written,
    COALESCE(o.id::text, '')::text AS existing_id, COALESCE(o.status, '')::text AS existing_status
FROM (SELECT u.id, u.idempotency_key, (SELECT w.id FROM messages w WHERE w.id = u.id) IS NOT NULL AS written
      FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@idempotency_keys::text[]) AS idempotency_key) AS u) AS s
LEFT JOIN LATERAL (
    SELECT o.id, o.status FROM messages o
    WHERE NOT s.written AND s.idempotency_key <> ''
      AND o.organization_id = @organization_id AND o.idempotency_key = s.idempotency_key
    LIMIT 1
) AS o ON true;

-- name: InsertMessageRecipients :exec
-- Only for messages that exist at this point of the transaction: refused and deduplicated sends get none.
INSERT INTO recipients (id, message_id, organization_id, position, type, address, name, domain, status)
SELECT r.id, r.message_id, @organization_id, r.position, r.type, r.address, r.name, r.domain, r.status
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@message_ids::uuid[]) AS message_id,
        unnest(@positions::int[]) AS position,
        unnest(@types::text[]) AS type,
        unnest(@addresses::text[]) AS address,
        unnest(@names::text[]) AS name,
        unnest(@domains::text[]) AS domain,
        unnest(@statuses::text[]) AS status) AS r
WHERE EXISTS (SELECT 1 FROM messages m WHERE m.id = r.message_id);

-- name: InsertMessageAttachments :exec
INSERT INTO attachments (id, message_id, organization_id, position, filename, content_type, size, inline, content_id,
    storage_key)
SELECT a.id, a.message_id, @organization_id, a.position, a.filename, a.content_type, a.size, a.inline, a.content_id,
    a.storage_key
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@message_ids::uuid[]) AS message_id,
        unnest(@positions::int[]) AS position,
        unnest(@filenames::text[]) AS filename,
        unnest(@content_types::text[]) AS content_type,
        unnest(@sizes::bigint[]) AS size,
        unnest(@inline::bool[]) AS inline,
        unnest(@content_ids::text[]) AS content_id,
        unnest(@storage_keys::text[]) AS storage_key) AS a
WHERE EXISTS (SELECT 1 FROM messages m WHERE m.id = a.message_id);

-- name: MessagesByIdempotencyKeys :many
-- MessageByIdempotencyKey for many keys at once (the bulk entry's one idempotency look-up per page): one
-- probe per key. Runs after PlanEachCall. A generic plan made while messages was empty (a new
-- installation's first broadcast) probes messages_organization_id_created_at_idx and filters every
-- message of the organization for each key, and the connection keeps that plan as the table grows; planned
-- on each call, the statement takes messages_org_idempotency_key once the table has more than a page.
SELECT m.idempotency_key::text AS idempotency_key, m.id::text AS id, m.status
FROM unnest(@idempotency_keys::text[]) AS k (key)
CROSS JOIN LATERAL (SELECT m.idempotency_key, m.id, m.status FROM messages m
    WHERE m.organization_id = @organization_id AND m.idempotency_key = k.key OFFSET 0) m;

-- name: PlanEachCall :exec
-- Has the next statements of the transaction planned on each call, from the table's size at that moment.
SELECT set_config('plan_cache_mode', 'force_custom_plan', true);

-- name: MessageByIdempotencyKey :one
SELECT id, status FROM messages WHERE organization_id = @organization_id AND idempotency_key = @idempotency_key::text;

-- name: MessageByID :one
SELECT * FROM messages WHERE organization_id = @organization_id AND id = @id;

-- name: RecipientsByMessage :many
SELECT * FROM recipients
WHERE organization_id = @organization_id AND message_id = @message_id
ORDER BY position;

-- name: AttachmentsByMessage :many
SELECT * FROM attachments
WHERE organization_id = @organization_id AND message_id = @message_id
ORDER BY position;

-- name: EventsByMessage :many
-- Absent ids read as ''.
SELECT id, organization_id, type, COALESCE(message_id::text, '')::text AS message_id,
    COALESCE(recipient_id::text, '')::text AS recipient_id, COALESCE(domain_id::text, '')::text AS domain_id,
    provider_response, occurred_at
FROM events
WHERE organization_id = @organization_id AND message_id = @message_id::uuid
ORDER BY occurred_at, id;

-- name: ListMessages :many
-- Keyset pagination newest first: the row comparison continues strictly after the cursor's
-- (created_at, id); the first page passes a bound past every row. An empty status lists every state.
SELECT id, organization_id, domain_id, status, from_address, reply_to, subject, tags, metadata, sandbox, scheduled_at,
    idempotency_key, created_at
FROM messages
WHERE organization_id = @organization_id
  AND (created_at, id) < (@before_created_at::timestamptz, @before_id::uuid)
  AND (@status::text = '' OR status = @status::text)
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;

-- name: RecipientsOfMessages :many
SELECT * FROM recipients
WHERE organization_id = @organization_id AND message_id = ANY(@message_ids::uuid[])
ORDER BY message_id, position;

-- name: CancelScheduledMessage :execrows
UPDATE messages SET status = 'cancelled', due_at = NULL
WHERE organization_id = @organization_id AND id = @id AND status = 'scheduled';

-- name: MessageStatus :one
SELECT status FROM messages WHERE organization_id = @organization_id AND id = @id;

-- name: SetRecipientsStatusOfMessage :exec
UPDATE recipients SET status = @status
WHERE organization_id = @organization_id AND message_id = @message_id;

-- name: DueScheduledMessages :many
-- Locks only the messages (OF m): several schedulers skip each other's rows, and organizations and domains
-- stay free. due_at is set only while a message waits for its time (migration 00042), so messages_due_idx
-- holds the scheduled messages alone.
SELECT sqlc.embed(m), sqlc.embed(o), d.open_tracking, d.click_tracking
FROM messages m
JOIN organizations o ON o.id = m.organization_id
JOIN domains d ON d.organization_id = m.organization_id AND d.id = m.domain_id
WHERE m.due_at <= @now::timestamptz AND m.status = 'scheduled'
ORDER BY m.due_at, m.id
LIMIT @row_limit
FOR UPDATE OF m SKIP LOCKED;

-- name: RecipientsOfMessagesAnyOrg :many
-- For the scheduler, which works across organizations on messages it has locked.
SELECT * FROM recipients
WHERE message_id = ANY(@message_ids::uuid[])
ORDER BY message_id, position;

-- name: SetPromotedStatuses :exec
-- Moves each promoted message and all its recipients to the state the scheduler decided.
WITH promoted AS (
    UPDATE messages AS m SET status = p.status, due_at = NULL
    FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@statuses::text[]) AS status) AS p
    WHERE m.id = p.id AND m.status = 'scheduled'
    RETURNING m.id, m.status
)
UPDATE recipients AS r SET status = promoted.status
FROM promoted
WHERE r.message_id = promoted.id;
