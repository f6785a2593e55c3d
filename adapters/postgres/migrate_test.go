package postgres_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
