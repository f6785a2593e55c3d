-- +goose Up
-- The bulk lane of the delivery queue: a broadcast's delivery jobs carry bulk = true from the outbox to the
-- queue, and the queue's lease hands out the jobs of transactional mail (bulk = false) first, so a
-- broadcast's backlog never sits in front of a receipt or a password reset. The lease walks
-- delivery_queue_lane_idx in its order (lane, then visible_at): the transactional lane's visible jobs, then
-- the bulk lane's.
ALTER TABLE delivery_outbox ADD COLUMN bulk boolean NOT NULL DEFAULT false;
ALTER TABLE delivery_queue ADD COLUMN bulk boolean NOT NULL DEFAULT false;
CREATE INDEX delivery_queue_lane_idx ON delivery_queue (bulk, visible_at, id);

-- +goose Down
DROP INDEX delivery_queue_lane_idx;
ALTER TABLE delivery_queue DROP COLUMN bulk;
ALTER TABLE delivery_outbox DROP COLUMN bulk;
