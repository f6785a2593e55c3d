package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

// BulkWait is how long the oldest bulk job ready for delivery has waited: transactional jobs, leased jobs
// and jobs waiting for a retry do not count.
func TestQueue_BulkWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{PollInterval: 20 * time.Millisecond})
	wait := func() time.Duration {
		t.Helper()
		d, err := q.BulkWait(ctx)
		if err != nil {
			t.Fatalf("BulkWait: %v", err)
		}
		return d
	}
	// readyFor makes job id visible since ago and checks that BulkWait then says about ago.
	readyFor := func(id string, ago time.Duration) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, `UPDATE delivery_queue SET visible_at = now() - make_interval(secs => $2) WHERE id = $1`,
			id, ago.Seconds()); err != nil {
			t.Fatal(err)
		}
		if d := wait(); d < ago-time.Minute || d > ago+time.Minute {
			t.Fatalf("a bulk job ready for %v: BulkWait %v", ago, d)
		}
	}
	if d := wait(); d != 0 {
		t.Fatalf("empty queue: %v", d)
	}
	tx := newJobs(3)
	if err := q.Publish(ctx, tx); err != nil {
		t.Fatal(err)
	}
	// Transactional jobs that have waited an hour are not broadcast work.
	if _, err := s.Pool().Exec(ctx, `UPDATE delivery_queue SET visible_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if d := wait(); d != 0 {
		t.Fatalf("only transactional jobs: %v", d)
	}

	bulk := newJobs(3)
	for i := range bulk {
		bulk[i].Bulk = true
	}
	if err := q.Publish(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	if d := wait(); d >= time.Minute {
		t.Fatalf("bulk jobs just published: %v", d)
	}
	readyFor(bulk[1].ID, 30*time.Minute)

	// Leased (the three transactional jobs first, then the oldest bulk one), the bulk job no longer counts;
	// back for a retry in an hour, still not.
	var got []string
	for len(got) < 4 {
		for _, d := range mustReceive(t, q, 4-len(got), 5*time.Second) {
			got = append(got, d.Job().ID)
			if d.Job().Bulk {
				if d.Job().ID != bulk[1].ID {
					t.Fatalf("leased bulk job %s before the oldest, %s", d.Job().ID, bulk[1].ID)
				}
				if d := wait(); d >= time.Minute {
					t.Fatalf("the oldest bulk job leased: %v", d)
				}
				if err := d.NackAfter(ctx, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if d := wait(); d >= time.Minute {
		t.Fatalf("the oldest bulk job waiting for its retry: %v", d)
	}
	readyFor(bulk[2].ID, 5*time.Minute)
}
