package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
)

// pipelineStep calls exactly one generated query method on q.
type pipelineStep func(q *db.Queries) error

// batchSender sends a pgx.Batch: the pool (each batch is then one implicit transaction) or a pgx.Tx.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// runPipeline sends the statements of steps in one round trip while keeping sqlc in charge of both ends.
// Each step runs twice: first against a recorder, which queues the statement sqlc built (with its encoded
// arguments) into a pgx.Batch, then, once the batch is sent, against a replayer that hands each step its
// statement's results, which sqlc scans. Sent on the pool, the batch is one implicit transaction (the
// extended protocol's Sync ends it): a statement failing on the server rolls back every statement of the
// batch. The first error is returned, including pgx.ErrNoRows from a :one step.
func runPipeline(ctx context.Context, conn batchSender, steps ...pipelineStep) error {
	rec := &batchRecorder{}
	recorded := db.New(rec)
	for i, step := range steps {
		_ = step(recorded) // the recorder's answers are placeholders
		if len(rec.batch.QueuedQueries) != i+1 {
			return fmt.Errorf("postgres: pipeline step %d issued %d statements, want 1", i, len(rec.batch.QueuedQueries)-i)
		}
	}
	results := conn.SendBatch(ctx, &rec.batch)
	replay := db.New(&batchReplayer{results: results, queued: rec.batch.QueuedQueries})
	var err error
	for _, step := range steps {
		if err = step(replay); err != nil {
			break
		}
	}
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	return err
}

// errRecorded is what the recorder answers queries with: their results exist only once the batch is sent.
var errRecorded = errors.New("postgres: statement recorded for a batch")

// batchRecorder is a db.DBTX that queues statements instead of running them.
type batchRecorder struct{ batch pgx.Batch }

func (r *batchRecorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.batch.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (r *batchRecorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.batch.Queue(sql, args...)
	return nil, errRecorded
}

func (r *batchRecorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.batch.Queue(sql, args...)
	return errRow{errRecorded}
}

// batchReplayer is a db.DBTX answering each statement, in order, with its result from a sent batch. It
// checks that the statements come in the order they were queued.
type batchReplayer struct {
	results pgx.BatchResults
	queued  []*pgx.QueuedQuery
	next    int
}

func (r *batchReplayer) check(sql string) error {
	if r.next >= len(r.queued) || r.queued[r.next].SQL != sql {
		return errors.New("postgres: pipeline replayed a statement it did not record")
	}
	r.next++
	return nil
}

func (r *batchReplayer) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	if err := r.check(sql); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.results.Exec()
}

func (r *batchReplayer) Query(_ context.Context, sql string, _ ...any) (pgx.Rows, error) {
	if err := r.check(sql); err != nil {
		return nil, err
	}
	return r.results.Query()
}

func (r *batchReplayer) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	if err := r.check(sql); err != nil {
		return errRow{err}
	}
	return r.results.QueryRow()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
