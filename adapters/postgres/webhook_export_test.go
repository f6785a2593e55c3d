package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
)

// FanOutPlans returns the generic plans PostgreSQL makes for FanOut's take of the outbox and its delete of
// the taken ids, with ProbePlans' settings first when probe is set (inside a transaction that is rolled
// back).
func (s *Store) FanOutPlans(ctx context.Context, probe bool) (take, remove string, err error) {
	rec := &batchRecorder{}
	q := db.New(rec)
	_, _ = q.TakeEventsToFanOut(ctx, 0)
	_ = q.DeleteWebhookOutbox(ctx, nil)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if probe {
		if _, err := tx.Exec(ctx, probePlansSQL); err != nil {
			return "", "", err
		}
	}
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		return "", "", err
	}
	plans := make([]string, 2)
	for i, queued := range rec.batch.QueuedQueries {
		if _, err := tx.Exec(ctx, "PREPARE fan_out AS "+queued.SQL); err != nil {
			return "", "", err
		}
		rows, err := tx.Query(ctx, "EXPLAIN EXECUTE fan_out(NULL)", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return "", "", err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", "", err
		}
		plans[i] = strings.Join(lines, "\n")
		// Prepared statements outlive the transaction: each goes once explained.
		if _, err := tx.Exec(ctx, "DEALLOCATE fan_out"); err != nil {
			return "", "", err
		}
	}
	return plans[0], plans[1], nil
}
