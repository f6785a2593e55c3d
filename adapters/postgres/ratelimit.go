package postgres

import (
	"context"
	"time"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.RateLimitStore = (*RateLimits)(nil)

// RateLimits is the PostgreSQL store of fixed-window request counters (ports.RateLimitStore). Safe for
// concurrent use.
type RateLimits struct{ shared }

// IncrementWindow implements ports.RateLimitStore with one upsert, so concurrent requests from any number
// of processes each get a distinct count. expiresAt is set by the first request of a window.
func (s *RateLimits) IncrementWindow(ctx context.Context, key string, windowStart, expiresAt time.Time) (int, error) {
	n, err := s.queries.IncrementWindow(ctx, db.IncrementWindowParams{
		Key:         key,
		WindowStart: windowStart,
		ExpiresAt:   expiresAt,
	})
	if err != nil {
		return 0, interpretError(err)
	}
	return int(n), nil
}

// DeleteExpiredWindows implements ports.RateLimitStore: rows whose expiresAt is at or before now go.
func (s *RateLimits) DeleteExpiredWindows(ctx context.Context, now time.Time) (int, error) {
	n, err := s.queries.DeleteExpiredWindows(ctx, now)
	if err != nil {
		return 0, interpretError(err)
	}
	return int(n), nil
}
