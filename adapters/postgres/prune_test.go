package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

func TestPruneAppliedJobsForgetsOnlyOldIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	now := time.Now().UTC()
	// Five ids applied two days ago, two an hour ago.
	if _, err := s.Pool().Exec(ctx, `INSERT INTO applied_jobs (job_id, applied_at)
		SELECT gen_random_uuid(), $1::timestamptz FROM generate_series(1, 5)
		UNION ALL SELECT gen_random_uuid(), $2::timestamptz FROM generate_series(1, 2)`, now.Add(-48*time.Hour), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	cutoff := now.Add(-24 * time.Hour)
	n, err := s.PruneAppliedJobs(ctx, cutoff, 3)
	if err != nil || n != 3 {
		t.Fatalf("first prune = %d, %v; want 3 (the limit)", n, err)
	}
	n, err = s.PruneAppliedJobs(ctx, cutoff, 3)
	if err != nil || n != 2 {
		t.Fatalf("second prune = %d, %v; want the 2 old ids left", n, err)
	}
	if n, _ = s.PruneAppliedJobs(ctx, cutoff, 3); n != 0 {
		t.Fatalf("third prune removed %d", n)
	}
	if left := countRows(t, s, `SELECT count(*) FROM applied_jobs`); left != 2 {
		t.Fatalf("%d ids left, want the 2 recent ones", left)
	}
}
