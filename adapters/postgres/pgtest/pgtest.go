// Package pgtest gives tests of any module a private, migrated PostgreSQL schema. Each call creates a
// uniquely named schema and drops it when the test ends, so tests run in parallel against one database
// without seeing each other's rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres"
)

// EnvDatabaseURL names the variable holding the database tests create their schemas in.
const EnvDatabaseURL = "POSTMILL_TEST_DATABASE_URL"

// DefaultDatabaseURL is used when EnvDatabaseURL is unset: the local PostgreSQL with trust authentication.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// setupTimeout bounds each administrative statement, so that an unreachable database fails the test
// quickly instead of hanging it.
const setupTimeout = 10 * time.Second

// URL creates a fresh schema and returns the database URL with search_path set to it; the schema is
// dropped with everything in it when tb ends. An unreachable database fails the test: a database test
// that skips silently would pass without testing anything.
func URL(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv(EnvDatabaseURL)
	if base == "" {
		base = DefaultDatabaseURL
	}
	schema := schemaName(tb)

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := exec(ctx, base, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: cannot create a test schema in the database of %s (set it to a reachable PostgreSQL URL; default %s): %v",
			EnvDatabaseURL, DefaultDatabaseURL, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := exec(ctx, base, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(tb, base, schema)
}

// Store returns an open, migrated Store confined to a fresh schema, closed when tb ends.
func Store(tb testing.TB) *postgres.Store {
	tb.Helper()
	dsn := URL(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		tb.Fatalf("pgtest: open store (%s): %v", EnvDatabaseURL, err)
	}
	// Registered after URL's cleanup, so it runs first: the pool is closed before its schema is dropped.
	tb.Cleanup(s.Close)
	if err := postgres.Migrate(ctx, s.Pool()); err != nil {
		tb.Fatalf("pgtest: migrate: %v", err)
	}
	return s
}

// databaseTimeout bounds CREATE DATABASE and DROP DATABASE, which wait for a checkpoint: seconds on a
// busy cluster, where a schema takes milliseconds.
const databaseTimeout = 2 * time.Minute

// DatabaseStore is Store in a database of its own, created for tb and dropped when it ends, for tests of
// what every schema of a database shares: the channels of LISTEN and NOTIFY.
func DatabaseStore(tb testing.TB) *postgres.Store {
	tb.Helper()
	base := os.Getenv(EnvDatabaseURL)
	if base == "" {
		base = DefaultDatabaseURL
	}
	name := schemaName(tb)
	ctx, cancel := context.WithTimeout(context.Background(), databaseTimeout)
	defer cancel()
	if err := exec(ctx, base, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: cannot create a test database (%s): %v", EnvDatabaseURL, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), databaseTimeout)
		defer cancel()
		if err := exec(ctx, base, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	dsn := withDatabase(tb, base, name)
	mctx, mcancel := context.WithTimeout(context.Background(), time.Minute)
	defer mcancel()
	s, err := postgres.Open(mctx, dsn)
	if err != nil {
		tb.Fatalf("pgtest: open store: %v", err)
	}
	tb.Cleanup(s.Close) // registered after the drop, so it runs first
	if err := postgres.Migrate(mctx, s.Pool()); err != nil {
		tb.Fatalf("pgtest: migrate: %v", err)
	}
	return s
}

func exec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// schemaName is unique per call and starts with the test's name, so a schema left behind by a killed
// run says which test made it.
func schemaName(tb testing.TB) string {
	tb.Helper()
	var name strings.Builder
	for _, r := range strings.ToLower(tb.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			name.WriteRune(r)
		default:
			name.WriteByte('_')
		}
		if name.Len() >= 30 {
			break
		}
	}
	var suffix [8]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		tb.Fatalf("pgtest: random schema suffix: %v", err)
	}
	return "pgtest_" + name.String() + "_" + hex.EncodeToString(suffix[:])
}

// withDatabase names another database in a URL (postgres://...) or a keyword/value string.
func withDatabase(tb testing.TB, dsn, database string) string {
	tb.Helper()
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " dbname=" + database
	}
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("pgtest: %s is not a valid PostgreSQL URL", EnvDatabaseURL)
	}
	u.Path = "/" + database
	return u.String()
}

// withSearchPath adds search_path to a URL (postgres://...) or a keyword/value string (host=... user=...);
// pgx passes it to the server as a run-time parameter.
func withSearchPath(tb testing.TB, dsn, schema string) string {
	tb.Helper()
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		// The parse error quotes the URL, password included, so it is not printed.
		tb.Fatalf("pgtest: %s is not a valid PostgreSQL URL", EnvDatabaseURL)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
