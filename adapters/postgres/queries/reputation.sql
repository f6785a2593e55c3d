-- name: ReputationDays :many
WITH t AS (
    SELECT m.domain_id, (e.occurred_at AT TIME ZONE 'UTC')::date AS day,
        (e.type = 'email.sent')::int AS sent, (e.type = 'email.delivered')::int AS delivered,
        0 AS hard, 0 AS soft, 0 AS complained
    FROM events e JOIN messages m ON m.id = e.message_id AND m.organization_id = e.organization_id
    WHERE e.organization_id = @organization_id AND e.occurred_at >= @since
        AND e.type IN ('email.sent', 'email.delivered')
    UNION ALL
    SELECT m.domain_id, (b.created_at AT TIME ZONE 'UTC')::date, 0, 0, (b.type = 'hard')::int, (b.type = 'soft')::int, 0
    FROM bounces b JOIN messages m ON m.id = b.message_id AND m.organization_id = b.organization_id
    WHERE b.organization_id = @organization_id AND b.created_at >= @since
    UNION ALL
    SELECT m.domain_id, (c.created_at AT TIME ZONE 'UTC')::date, 0, 0, 0, 0, 1
    FROM complaints c JOIN messages m ON m.id = c.message_id AND m.organization_id = c.organization_id
    WHERE c.organization_id = @organization_id AND c.created_at >= @since
)
SELECT d.name::text AS domain, t.day::date AS day, sum(t.sent)::bigint AS sent, sum(t.delivered)::bigint AS delivered,
    sum(t.hard)::bigint AS hard_bounced, sum(t.soft)::bigint AS soft_bounced, sum(t.complained)::bigint AS complained
FROM t JOIN domains d ON d.id = t.domain_id AND d.organization_id = @organization_id
GROUP BY d.name, t.day
ORDER BY d.name, t.day;

-- name: BounceClassCounts :many
SELECT d.name::text AS domain, COALESCE(NULLIF(b.class, ''), b.type)::text AS class, count(*)::bigint AS count
FROM bounces b
JOIN messages m ON m.id = b.message_id AND m.organization_id = b.organization_id
JOIN domains d ON d.id = m.domain_id AND d.organization_id = b.organization_id
WHERE b.organization_id = @organization_id AND b.created_at >= @since
GROUP BY 1, 2
ORDER BY 1, 3 DESC;

-- name: ReputationProtection :one
SELECT broadcasts_paused, paused_reason, paused_at FROM reputation_protection WHERE organization_id = $1;

-- name: SetBroadcastsPaused :one
INSERT INTO reputation_protection (organization_id, broadcasts_paused, paused_reason, paused_at, updated_at)
VALUES (@organization_id, @paused, @reason, @paused_at, @now)
ON CONFLICT (organization_id) DO UPDATE SET broadcasts_paused = EXCLUDED.broadcasts_paused,
    paused_reason = EXCLUDED.paused_reason, paused_at = EXCLUDED.paused_at, updated_at = EXCLUDED.updated_at
RETURNING broadcasts_paused, paused_reason, paused_at;

-- name: OrganizationsHealth :many
WITH t AS (
    SELECT e.organization_id, (e.type = 'email.sent')::int AS sent, (e.type = 'email.delivered')::int AS delivered,
        0 AS hard, 0 AS complained
    FROM events e WHERE e.occurred_at >= @since AND e.type IN ('email.sent', 'email.delivered')
    UNION ALL
    SELECT b.organization_id, 0, 0, (b.type = 'hard')::int, 0 FROM bounces b WHERE b.created_at >= @since
    UNION ALL
    SELECT c.organization_id, 0, 0, 0, 1 FROM complaints c WHERE c.created_at >= @since
), agg AS (
    SELECT t.organization_id, sum(t.sent)::bigint AS sent, sum(t.delivered)::bigint AS delivered,
        sum(t.hard)::bigint AS hard_bounced, sum(t.complained)::bigint AS complained
    FROM t GROUP BY t.organization_id
)
SELECT o.id, o.name, COALESCE(agg.sent, 0)::bigint AS sent, COALESCE(agg.delivered, 0)::bigint AS delivered,
    COALESCE(agg.hard_bounced, 0)::bigint AS hard_bounced, COALESCE(agg.complained, 0)::bigint AS complained,
    o.warmup_cap, COALESCE(p.broadcasts_paused, false)::boolean AS broadcasts_paused,
    COALESCE(p.paused_reason, '')::text AS paused_reason, p.paused_at, p.warmup_step_on
FROM organizations o
LEFT JOIN agg ON agg.organization_id = o.id
LEFT JOIN reputation_protection p ON p.organization_id = o.id
WHERE o.warmup_cap > 0 OR agg.sent > 0 OR agg.hard_bounced > 0 OR agg.complained > 0
ORDER BY o.id;

-- name: StepWarmup :execrows
WITH p AS (
    INSERT INTO reputation_protection (organization_id, warmup_step_on, updated_at)
    VALUES (@organization_id, @day, @now)
    ON CONFLICT (organization_id) DO UPDATE SET warmup_step_on = EXCLUDED.warmup_step_on, updated_at = EXCLUDED.updated_at
    WHERE reputation_protection.warmup_step_on IS NULL OR reputation_protection.warmup_step_on < EXCLUDED.warmup_step_on
    RETURNING organization_id
)
UPDATE organizations SET warmup_cap = @warmup_cap FROM p WHERE organizations.id = p.organization_id;

-- name: QueueDepths :many
WITH q AS (
    SELECT domain, 1 AS queued, (lease_until IS NOT NULL AND lease_until > now())::int AS leased, 0 AS outbox,
        first_queued_at
    FROM delivery_queue
    UNION ALL
    SELECT domain, 0, 0, 1, first_queued_at FROM delivery_outbox
)
SELECT domain::text AS domain, sum(queued)::bigint AS queued, sum(leased)::bigint AS leased, sum(outbox)::bigint AS outbox,
    min(first_queued_at)::timestamptz AS oldest_queued_at
FROM q
GROUP BY domain
ORDER BY sum(queued) + sum(outbox) DESC, domain
LIMIT $1;
