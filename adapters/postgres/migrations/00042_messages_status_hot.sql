-- +goose Up
-- A message's status changes after the message is written (sent, then delivered, opened, clicked …), and
-- messages_scheduled_idx named status in its key and its predicate, so every change was a non-HOT update:
-- a new row version wherever there was room and new entries in every index of the table. The scheduler's
-- search now goes by due_at, the time a scheduled message waits for: set when the message is written
-- scheduled, cleared when it is promoted or cancelled, NULL for every other message. status is then in no
-- index, and a change of it can be a HOT update, written beside the old version without index entries,
-- when the page has room; new pages keep a tenth free for that, as recipients' do (00041).
ALTER TABLE messages ADD COLUMN due_at timestamptz;
UPDATE messages SET due_at = scheduled_at WHERE status = 'scheduled';
CREATE INDEX messages_due_idx ON messages (due_at, id) WHERE due_at IS NOT NULL;
DROP INDEX messages_scheduled_idx;
ALTER TABLE messages SET (fillfactor = 90);

-- +goose Down
ALTER TABLE messages RESET (fillfactor);
CREATE INDEX messages_scheduled_idx ON messages (status, scheduled_at) WHERE status = 'scheduled';
DROP INDEX messages_due_idx;
ALTER TABLE messages DROP COLUMN due_at;
