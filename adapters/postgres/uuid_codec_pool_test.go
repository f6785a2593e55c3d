package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

// Through a Store's pool: canonical ids round-trip, the other spellings PostgreSQL accepts still do (sent
// as text), and a string that is no uuid gets PostgreSQL's own error.
func TestUUIDStrings_ThroughThePool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Store(t).Pool()
	var got []string
	if err := pool.QueryRow(ctx, `SELECT $1::uuid[]::text[]`, []string{
		"0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", "0190A3B4-5C6D-7E8F-9A0B-1C2D3E4F5A6C",
	}).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b" || got[1] != "0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6c" {
		t.Fatalf("round trip: %v", got)
	}
	if err := pool.QueryRow(ctx, `SELECT $1::uuid[]::text[]`, []string{"{0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b}", "0190a3b45c6d7e8f9a0b1c2d3e4f5a6b"}).Scan(&got); err != nil {
		t.Fatalf("spellings PostgreSQL accepts: %v", err)
	}
	if len(got) != 2 || got[0] != got[1] {
		t.Fatalf("other spellings: %v", got)
	}
	err := pool.QueryRow(ctx, `SELECT $1::uuid[]::text[]`, []string{"nope"}).Scan(&got)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22P02" {
		t.Fatalf("not a uuid: %v, want PostgreSQL's invalid_text_representation", err)
	}
}
