-- +goose Up
-- The display name a recipient was given in the send ("Ada Lovelace" of "Ada Lovelace <ada@example.org>"),
-- decoded, '' when none. address keeps the bare address that is suppressed, grouped by domain and
-- metered; the name only goes into the To and Cc header fields of the delivered message.
ALTER TABLE recipients ADD COLUMN name text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE recipients DROP COLUMN name;
