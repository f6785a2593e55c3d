package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

// CopyOutboxPlan is the plan CopyOutbox's statement gets now, as the store runs it (planned on the call),
// for a batch of max.
func (s *Store) CopyOutboxPlan(ctx context.Context, max int) (string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := db.New(tx).PlanEachCall(ctx); err != nil {
		return "", err
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+copyOutboxSQL, max, ports.AnalyticsEventTypes)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}
