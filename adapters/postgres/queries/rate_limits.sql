-- name: IncrementWindow :one
INSERT INTO rate_limit_windows AS w (key, window_start, count, expires_at)
VALUES ($1, $2, 1, $3)
ON CONFLICT (key, window_start) DO UPDATE SET count = w.count + 1
RETURNING count;

-- name: DeleteExpiredWindows :execrows
DELETE FROM rate_limit_windows WHERE expires_at <= $1;
