-- +goose NO TRANSACTION
-- +goose Up
-- The scheduler searches messages_due_idx (00042); the status index it used before is dropped only now,
-- after 00043 has found, through it, the scheduled messages an earlier version wrote while 00042 ran.
-- CONCURRENTLY: a plain DROP INDEX waits for every transaction using the table and stops every send behind
-- it until then.
DROP INDEX CONCURRENTLY IF EXISTS messages_scheduled_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS messages_scheduled_idx;
CREATE INDEX CONCURRENTLY messages_scheduled_idx ON messages (status, scheduled_at) WHERE status = 'scheduled';
