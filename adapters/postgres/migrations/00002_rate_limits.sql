-- +goose Up
-- Fixed-window request counters shared by every process (SPEC §8). A row lives until expires_at, after
-- which DeleteExpiredWindows may remove it.
CREATE TABLE rate_limit_windows (
    key          text        NOT NULL,
    window_start timestamptz NOT NULL,
    count        integer     NOT NULL,
    expires_at   timestamptz NOT NULL,
    CONSTRAINT rate_limit_windows_pkey PRIMARY KEY (key, window_start)
);

CREATE INDEX rate_limit_windows_expires_at_idx ON rate_limit_windows (expires_at);

-- +goose Down
DROP TABLE rate_limit_windows;
