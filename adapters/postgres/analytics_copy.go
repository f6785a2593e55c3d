package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

// copyOutboxSQL takes up to $1 outbox ids in order (skipping those another reader holds), deletes them,
// and adds their events of a counted type to the hourly rollups: per organization, per sending domain and
// per tag (name:value), as InsertEvents counts them. The picked ids are collected into an array first and
// deleted by key, and each one's event and message are looked up by key (LATERAL, kept a nested loop by
// OFFSET 0; the message's organization is compared after). The statement is planned on each call (about a
// millisecond, once a batch of up to a thousand): a generic plan made while events and messages were
// empty, as on a new installation, kept walking a whole index of events as the outer side of the join or
// reading each message through messages_organization_id_created_at_idx (whose trailing id column matches
// any key, so every entry of the organization is read), which cost up to 470 ms a batch once the tables
// had grown. The statement answers how many ids it took; its data-modifying parts run to completion
// whether or not the final SELECT reads them.
const copyOutboxSQL = `
WITH gone AS (
    DELETE FROM analytics_outbox
    WHERE id = ANY (ARRAY(SELECT id FROM analytics_outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED))
    RETURNING id
), ev AS (
    SELECT e.organization_id, e.occurred_at, e.type, coalesce(d.name, '') AS domain, m.tags
    FROM gone g
    CROSS JOIN LATERAL (
        SELECT organization_id, occurred_at, type, message_id FROM events WHERE id = g.id OFFSET 0
    ) e
    LEFT JOIN LATERAL (
        SELECT organization_id, domain_id, tags FROM messages WHERE id = e.message_id OFFSET 0
    ) m ON m.organization_id = e.organization_id
    LEFT JOIN LATERAL (
        SELECT name FROM domains WHERE organization_id = m.organization_id AND id = m.domain_id OFFSET 0
    ) d ON true
    WHERE e.message_id IS NOT NULL AND e.type = ANY ($2::text[])
), dims AS (
    SELECT organization_id, '' AS domain, '' AS tag, occurred_at, type FROM ev
    UNION ALL SELECT organization_id, domain, '', occurred_at, type FROM ev WHERE domain <> ''
    UNION ALL SELECT organization_id, '', t.k || ':' || t.v, occurred_at, type
        FROM ev, jsonb_each_text(coalesce(ev.tags, '{}'::jsonb)) AS t (k, v)
), up AS (` + rollupsFromDims + `
)
SELECT count(*) FROM gone`

// CopyOutbox copies up to max events from the outbox the events trigger fills straight into the rollups,
// in one statement: the outbox ids are deleted in the transaction that counts them, so every event is
// counted exactly once and no event row is kept for deduplication (analytics_events stays for sources
// that deliver at least once: the Kafka events topic). It is the pipeline's path when the source and the
// store are both this database. It returns how many outbox ids it took, so 0 means the outbox is empty;
// ids of events the analytics does not count (domain events) are removed uncounted.
func (s *Analytics) CopyOutbox(ctx context.Context, max int) (int, error) {
	if max < 1 {
		max = 1
	}
	// Planned on each call (PlanEachCall, queued first in the same implicit transaction), from the tables
	// as they are (copyOutboxSQL).
	var n int64
	rec := &batchRecorder{}
	_ = db.New(rec).PlanEachCall(ctx) // queued, run when the batch is sent
	rec.batch.Queue(copyOutboxSQL, max, ports.AnalyticsEventTypes).QueryRow(func(row pgx.Row) error { return row.Scan(&n) })
	if err := s.pool.SendBatch(ctx, &rec.batch).Close(); err != nil {
		return 0, interpretError(err)
	}
	return int(n), nil
}
