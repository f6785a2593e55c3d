-- +goose Up
-- delivery_queue_visible_at_idx (00006) served the lease until delivery_queue_lane_idx (bulk, visible_at, id;
-- 00028) took its place; no statement reads it since. Every job's insert, lease and release still wrote an
-- entry into it (a lease moves visible_at, so it is never a HOT update): two index writes a message for
-- nothing.
DROP INDEX delivery_queue_visible_at_idx;

-- +goose Down
CREATE INDEX delivery_queue_visible_at_idx ON delivery_queue (visible_at, id);
