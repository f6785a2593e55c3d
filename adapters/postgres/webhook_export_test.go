package postgres

import (
	"context"

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
	plans, err := s.genericPlans(ctx, probe, rec.batch.QueuedQueries[0].SQL, rec.batch.QueuedQueries[1].SQL)
	if err != nil {
		return "", "", err
	}
	return plans[0], plans[1], nil
}
