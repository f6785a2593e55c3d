package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// MessageDimensionsPlan returns the generic plan PostgreSQL makes for MessageDimensions' statement, with
// ProbePlans' settings first when probe is set (inside a transaction that is rolled back).
func (s *Store) MessageDimensionsPlan(ctx context.Context, probe bool) (string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if probe {
		if _, err := tx.Exec(ctx, probePlansSQL); err != nil {
			return "", err
		}
	}
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, "PREPARE dimensions AS "+messageDimensionsSQL); err != nil {
		return "", err
	}
	// Prepared statements outlive the transaction: this one goes once explained.
	defer func() { _, _ = tx.Exec(ctx, "DEALLOCATE dimensions") }()
	rows, err := tx.Query(ctx, "EXPLAIN EXECUTE dimensions(NULL, NULL)", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}
