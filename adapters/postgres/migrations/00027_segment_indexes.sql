-- +goose Up
-- Segment rules on engagement ("lastActiveAt within the last N days") get an index of their own. With it
-- the planner reads the contacts active in the window from a bitmap (and can AND it with the bitmaps of
-- other indexed conditions, a properties containment through contacts_properties_idx for one) rather
-- than every candidate of another condition. It is partial: every comparison on lastActiveAt implies it
-- is set, and contacts that never opened or clicked (every imported contact, to begin with) cost the
-- index nothing on insert. last_sent_at has no such index on purpose: every email.sent event moves it,
-- and an index on it would turn those updates from HOT updates into updates of every index of the
-- table; opens and clicks, which move last_active_at, are far rarer.
CREATE INDEX contacts_organization_id_last_active_at_idx ON contacts (organization_id, last_active_at)
    WHERE last_active_at IS NOT NULL;

-- +goose Down
DROP INDEX contacts_organization_id_last_active_at_idx;
