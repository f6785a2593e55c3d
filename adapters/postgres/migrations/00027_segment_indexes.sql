-- +goose Up
-- Segment rules on engagement ("lastActiveAt within the last N days") get an index of their own. With it
-- the planner ANDs the bitmap of the contacts active in the window with the bitmaps of the other indexed
-- conditions (a properties containment through contacts_properties_idx, for one) before it reads a single
-- contact, so a rule of several conditions reads the rows of their intersection rather than every
-- candidate of the most selective one. last_sent_at has no such index on purpose: every email.sent
-- event moves it, and an index on it would turn those updates from HOT updates into updates of every
-- index of the table; opens and clicks, which move last_active_at, are far rarer.
CREATE INDEX contacts_organization_id_last_active_at_idx ON contacts (organization_id, last_active_at);

-- +goose Down
DROP INDEX contacts_organization_id_last_active_at_idx;
