-- +goose Up
-- A delivery job whose outcome cannot be recorded however often it is retried is dead-lettered: the row
-- stays in delivery_queue, out of circulation (visible_at 'infinity', so no lease ever picks it), with when
-- and why, for an operator to inspect and put back (docs/operations.md). deliveries already counts every
-- lease; consumers cap their retries with it.
ALTER TABLE delivery_queue
    ADD COLUMN dead_at     timestamptz,
    ADD COLUMN dead_reason text;

CREATE INDEX delivery_queue_dead_at_idx ON delivery_queue (dead_at) WHERE dead_at IS NOT NULL;

-- +goose Down
DROP INDEX delivery_queue_dead_at_idx;
ALTER TABLE delivery_queue DROP COLUMN dead_reason, DROP COLUMN dead_at;
