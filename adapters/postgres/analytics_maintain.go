package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

// partitionedTables are the analytics tables partitioned by day, with how long each keeps its rows.
var partitionedTables = []struct {
	name   string
	retain func(ports.AnalyticsRetention) time.Duration
}{
	{"analytics_requests", func(r ports.AnalyticsRetention) time.Duration { return r.Requests }},
	{"analytics_events", func(r ports.AnalyticsRetention) time.Duration { return r.Events }},
}

// partitionsAhead is how many days past today Maintain prepares.
const partitionsAhead = 3

// Maintain implements ports.AnalyticsStore: it creates the daily partitions of yesterday, today and the
// next partitionsAhead days (moving rows the default partition holds for such a day into it), drops the
// partitions wholly older than the retention, and deletes older rows from the default partitions and the
// rollups. Zero retentions take ports.DefaultAnalyticsRetention's.
func (s *Analytics) Maintain(ctx context.Context, now time.Time, r ports.AnalyticsRetention) error {
	if r.Requests <= 0 {
		r.Requests = ports.DefaultAnalyticsRetention.Requests
	}
	if r.Events <= 0 {
		r.Events = ports.DefaultAnalyticsRetention.Events
	}
	today := now.UTC().Truncate(24 * time.Hour)
	for _, t := range partitionedTables {
		for d := -1; d <= partitionsAhead; d++ {
			if err := s.ensurePartition(ctx, t.name, today.AddDate(0, 0, d)); err != nil {
				return err
			}
		}
		cutoff := now.UTC().Add(-t.retain(r))
		if err := s.dropPartitionsBefore(ctx, t.name, cutoff); err != nil {
			return err
		}
		if _, err := s.pool.Exec(ctx, `DELETE FROM `+t.name+`_default WHERE occurred_at < $1`, cutoff); err != nil {
			return interpretError(err)
		}
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM analytics_rollups WHERE bucket < $1`,
		now.UTC().Add(-r.Events).Truncate(time.Hour)); err != nil {
		return interpretError(err)
	}
	return nil
}

func partitionName(table string, day time.Time) string { return table + "_p" + day.Format("20060102") }

// ensurePartition creates the partition of day unless it exists: a plain table filled with the day's rows
// from the default partition, then attached, in one transaction.
func (s *Analytics) ensurePartition(ctx context.Context, table string, day time.Time) error {
	name := partitionName(table, day)
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
		return interpretError(err)
	}
	if exists {
		return nil
	}
	lo, hi := day.Format(time.RFC3339), day.AddDate(0, 0, 1).Format(time.RFC3339)
	ident, parent := pgx.Identifier{name}.Sanitize(), pgx.Identifier{table}.Sanitize()
	def := pgx.Identifier{table + "_default"}.Sanitize()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Serialises concurrent maintainers of one table; the loser finds the partition made.
		if _, err := tx.Exec(ctx, `LOCK TABLE `+parent+` IN SHARE UPDATE EXCLUSIVE MODE`); err != nil {
			return err
		}
		var again bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&again); err != nil || again {
			return err
		}
		stmts := []string{
			`CREATE TABLE ` + ident + ` (LIKE ` + parent + ` INCLUDING DEFAULTS)`,
			fmt.Sprintf(`WITH moved AS (DELETE FROM %s WHERE occurred_at >= '%s' AND occurred_at < '%s' RETURNING *)
INSERT INTO %s SELECT * FROM moved`, def, lo, hi, ident),
			fmt.Sprintf(`ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')`, parent, ident, lo, hi),
		}
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: create partition %s: %w", name, interpretError(err))
	}
	return nil
}

// dropPartitionsBefore drops the daily partitions of table whose day ends at or before cutoff.
func (s *Analytics) dropPartitionsBefore(ctx context.Context, table string, cutoff time.Time) error {
	rows, err := s.pool.Query(ctx, `
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass($1)`, table)
	if err != nil {
		return interpretError(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return interpretError(err)
	}
	prefix := table + "_p"
	for _, n := range names {
		day, err := time.Parse("20060102", strings.TrimPrefix(n, prefix))
		if !strings.HasPrefix(n, prefix) || err != nil {
			continue
		}
		if day.AddDate(0, 0, 1).After(cutoff) {
			continue
		}
		if _, err := s.pool.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{n}.Sanitize()); err != nil {
			return fmt.Errorf("postgres: drop partition %s: %w", n, interpretError(err))
		}
	}
	return nil
}

// ReadEvents implements ports.AnalyticsEventSource over the outbox the events trigger fills: it locks up
// to max ids in order (skipping those another reader holds), hands their events to handle with each
// message's sending domain and tags, and deletes the ids only when handle succeeded, in one transaction.
// Outbox ids whose event is a domain event are acknowledged without being handed out. It returns how many
// outbox ids it took, so 0 means the outbox is empty.
func (s *Analytics) ReadEvents(ctx context.Context, max int, handle func(context.Context, []ports.AnalyticsEvent) error) (int, error) {
	if max < 1 {
		max = 1
	}
	handed := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The claimed ids are looked up by key: without ProbePlans the planner, seeing a LIMIT of unknown
		// size on a generic plan, hash-joins them against a sequential scan of events and messages, a cost
		// that grows with those tables on every batch.
		if _, err := tx.Exec(ctx, probePlansSQL); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
WITH claimed AS (
    SELECT id FROM analytics_outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
)
SELECT c.id, e.organization_id, e.type, e.message_id, coalesce(d.name, ''),
    coalesce(ARRAY(SELECT k || ':' || v FROM jsonb_each_text(m.tags) AS t (k, v) ORDER BY k), '{}'), e.occurred_at
FROM claimed c
LEFT JOIN events e ON e.id = c.id
LEFT JOIN messages m ON m.id = e.message_id
LEFT JOIN domains d ON d.organization_id = m.organization_id AND d.id = m.domain_id
ORDER BY c.id`, max)
		if err != nil {
			return err
		}
		var ids []string
		var batch []ports.AnalyticsEvent
		for rows.Next() {
			var id string
			var org, typ, msg *string
			var at *time.Time
			var ev ports.AnalyticsEvent
			if err := rows.Scan(&id, &org, &typ, &msg, &ev.Domain, &ev.Tags, &at); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
			if org == nil || msg == nil || !strings.HasPrefix(*typ, "email.") {
				continue
			}
			ev.ID, ev.OrganizationID, ev.Type, ev.MessageID, ev.OccurredAt = id, *org, *typ, *msg, at.UTC()
			batch = append(batch, ev)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if len(batch) > 0 {
			if err := handle(ctx, batch); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM analytics_outbox WHERE id = ANY($1::uuid[])`, ids); err != nil {
			return err
		}
		handed = len(ids)
		return nil
	})
	if err != nil {
		return 0, interpretError(err)
	}
	return handed, nil
}

// Lag implements ports.AnalyticsEventSource: the age of the oldest event still in the outbox. The outbox is
// walked in id order with each event looked up by key (LATERAL, kept a nested loop by OFFSET 0), stopping
// at the first. Written as a plain join, the planner chose a merge join that walks the events index from
// its start up to that id, a cost that grows with the events table (220 ms at 265,000 events, once per
// pipeline batch).
func (s *Analytics) Lag(ctx context.Context, now time.Time) (time.Duration, error) {
	var at *time.Time
	err := s.pool.QueryRow(ctx, `
SELECT e.occurred_at FROM analytics_outbox o
CROSS JOIN LATERAL (SELECT occurred_at FROM events WHERE id = o.id OFFSET 0) e
ORDER BY o.id LIMIT 1`).Scan(&at)
	if err == pgx.ErrNoRows || (err == nil && at == nil) {
		return 0, nil
	}
	if err != nil {
		return 0, interpretError(err)
	}
	return max(now.Sub(*at), 0), nil
}
