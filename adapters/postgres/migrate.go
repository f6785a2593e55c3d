package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrate applies every pending migration to the schema the pool's search_path points at; applied
// migrations are skipped, so running it again is a no-op. It uses goose's Provider (never goose's global
// state) so that migrations of separate schemas can run in parallel in one process. Replicas starting at
// once against the same schema are serialised by an advisory lock keyed by the schema name.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	schema, err := db.New(pool).CurrentSchema(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: current schema: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(migrationLockID(schema)),
		lock.WithLockTimeout(1, 300),
	)
	if err != nil {
		return fmt.Errorf("postgres: migrate: lock: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, fsys,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// migrationLockID derives the advisory lock id from the schema, so that migrating one schema never waits
// for another while two processes migrating the same schema still exclude each other.
func migrationLockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("postmill.migrate:" + schema))
	return int64(h.Sum64())
}
