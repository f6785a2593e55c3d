package postgres_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

var accountTables = []string{
	"organizations", "users", "memberships", "refresh_tokens", "api_keys", "smtp_credentials",
	"rate_limit_windows", "usage_meters",
}

func TestMigrate_IsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t) // migrated once already

	mustSignup(t, s)
	for range 2 {
		if err := postgres.Migrate(ctx, s.Pool()); err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
	}

	var applied, users int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v (%d found)", err, len(files))
	}
	if applied != len(files) {
		t.Fatalf("applied migrations = %d, want %d (each once)", applied, len(files))
	}
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&users); err != nil {
		t.Fatal(err)
	}
	if users != 1 {
		t.Fatalf("users after re-running migrations = %d, want 1 (data kept)", users)
	}
}

func TestMigrate_ConcurrentInOneSchema(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() { errs <- postgres.Migrate(ctx, s.Pool()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}

	// The tables landed in the test's schema (search_path from the URL), not in public.
	var schema string
	var tables int
	err = s.Pool().QueryRow(ctx, `SELECT current_schema(), (SELECT count(*) FROM pg_tables
		WHERE schemaname = current_schema() AND tablename = ANY($1))`, accountTables).Scan(&schema, &tables)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(schema, "pgtest_") {
		t.Fatalf("current_schema = %q, want the pgtest schema from search_path", schema)
	}
	if tables != len(accountTables) {
		t.Fatalf("tables in %s = %d, want %d", schema, tables, len(accountTables))
	}
}

func TestOpen_UnreachableFails(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	if err == nil {
		s.Close()
		t.Fatal("Open of an unreachable database succeeded")
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// TestMigrate_MessagesIndexDoesNotStopSends: 00042 builds messages_due_idx concurrently. While the build
// waits for a transaction that was open when it began, a message can still be written (a plain CREATE
// INDEX would hold every writer of messages until it was done); an invalid index an interrupted build left
// behind is built again rather than kept; a scheduled message an earlier version wrote gets its due time;
// and 00044 drops the old status index.
func TestMigrate_MessagesIndexDoesNotStopSends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	sqlDB := stdlib.OpenDBFromPool(s.Pool())
	t.Cleanup(func() { sqlDB.Close() })
	migrateDownTo(t, sqlDB, 41)

	// What an earlier version wrote and what an interrupted run of 00042 left: the column, a scheduled
	// message without a due time, and an invalid index named messages_due_idx (a unique build that failed).
	mustExec(t, s, `ALTER TABLE messages ADD COLUMN due_at timestamptz`)
	f.mustEarlierScheduled(t, baseTime)
	scheduled := f.mustEarlierScheduled(t, baseTime.Add(time.Minute))
	if _, err := s.Pool().Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY messages_due_idx ON messages (organization_id)
		WHERE due_at IS NULL`); err == nil {
		t.Fatal("a unique index over two messages of one organization was built")
	}
	if valid := indexValid(t, s, "messages_due_idx"); valid == nil || *valid {
		t.Fatalf("messages_due_idx before the migration: valid %v, want an invalid leftover", valid)
	}

	// A transaction open when the build begins: a concurrent build waits for it to end before it is done.
	open, err := s.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback(ctx)
	if _, err := open.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, os.DirFS("migrations"), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() {
		_, err := provider.Up(ctx)
		migrated <- err
	}()
	waiting := false
	for deadline := time.Now().Add(time.Minute); !waiting && time.Now().Before(deadline); {
		select {
		case err := <-migrated:
			t.Fatalf("the migration ended (%v) while a transaction older than its index build was open: the index was not built concurrently", err)
		case <-time.After(20 * time.Millisecond):
		}
		waiting = countRows(t, s, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event = 'virtualxid' AND query LIKE 'CREATE INDEX CONCURRENTLY messages_due_idx%'
			AND pid IN (SELECT pid FROM pg_locks WHERE relation = to_regclass('messages'))`) > 0
	}
	if !waiting {
		t.Fatal("the migration was never seen waiting for the open transaction")
	}
	sendCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if ins, err := s.InsertMessage(sendCtx, f.newSend(t, "during@build.example")); err != nil || ins.ID == "" {
		t.Fatalf("InsertMessage while the index is built = %+v, %v; want the message written", ins, err)
	}
	if err := open.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("migrate: %v", err)
	}

	if valid := indexValid(t, s, "messages_due_idx"); valid == nil || !*valid {
		t.Fatalf("messages_due_idx after the migration: valid %v, want a valid index", valid)
	}
	// The definition of this schema's index alone: pg_indexes would render every index of the database,
	// and an index of a parallel test's schema dropped meanwhile fails pg_get_indexdef.
	if n := countRows(t, s, `SELECT count(*) FROM (SELECT to_regclass(quote_ident(current_schema()) || '.messages_due_idx') AS idx OFFSET 0) x
		WHERE x.idx IS NOT NULL AND pg_get_indexdef(x.idx) LIKE '%(due_at, id) WHERE (due_at IS NOT NULL)'`); n != 1 {
		t.Fatal("messages_due_idx is not the index of (due_at, id) over the messages with a due time")
	}
	if valid := indexValid(t, s, "messages_scheduled_idx"); valid != nil {
		t.Fatal("messages_scheduled_idx is still there after 00044")
	}
	if n := countRows(t, s, `SELECT count(*) FROM messages WHERE id = $1 AND due_at = scheduled_at`, scheduled); n != 1 {
		t.Fatal("the scheduled message an earlier version wrote has no due time")
	}
}

// indexValid is pg_index.indisvalid of the schema's index name, nil when there is no such index.
func indexValid(tb testing.TB, s *postgres.Store, name string) *bool {
	tb.Helper()
	var valid *bool
	err := s.Pool().QueryRow(context.Background(), `SELECT indisvalid FROM pg_index
		WHERE indexrelid = to_regclass(quote_ident(current_schema()) || '.' || $1)`, name).Scan(&valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	return valid
}
