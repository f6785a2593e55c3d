-- +goose Up
-- The protection and warm-up loop reads every organization's last day of sends, deliveries, bounces and
-- complaints every few minutes; these indexes keep that a range scan rather than a scan of every row ever
-- written. The events index holds only the two types reputation counts.
CREATE INDEX events_reputation_idx ON events (occurred_at) WHERE type IN ('email.sent', 'email.delivered');
CREATE INDEX bounces_created_at_idx ON bounces (created_at);
CREATE INDEX complaints_created_at_idx ON complaints (created_at);

-- +goose Down
DROP INDEX complaints_created_at_idx;
DROP INDEX bounces_created_at_idx;
DROP INDEX events_reputation_idx;
