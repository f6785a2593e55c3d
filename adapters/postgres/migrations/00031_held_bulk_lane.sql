-- +goose Up
-- A delivery job held for a paused organization or a suspended sending domain keeps its lane: a broadcast's
-- job released from the hold goes back to the outbox (and the queue) behind transactional mail, as it came.
ALTER TABLE delivery_held ADD COLUMN bulk boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE delivery_held DROP COLUMN bulk;
