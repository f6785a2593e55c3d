-- +goose Up
-- A recipient's status changes once or twice after its row is written (queued, then sent, delivered or
-- bounced), and status is in none of its indexes, so each change can be a HOT update, written beside the old
-- version without new index entries, when the page has room. Packed full by inserts, about half the
-- pages had none, and those updates wrote both indexes again. New pages keep a tenth free.
ALTER TABLE recipients SET (fillfactor = 90);

-- +goose Down
ALTER TABLE recipients RESET (fillfactor);
