-- +goose NO TRANSACTION
-- +goose Up
-- A message's status changes after the message is written (sent, then delivered, opened, clicked …), and
-- messages_scheduled_idx named status in its key and its predicate, so every change was a non-HOT update:
-- a new row version wherever there was room and new entries in every index of the table. The scheduler's
-- search now goes by due_at, the time a scheduled message waits for: set when the message is written
-- scheduled, cleared when it is promoted or cancelled, NULL for every other message. status is then in no
-- index (once 00044 drops messages_scheduled_idx), and a change of it can be a HOT update, written beside
-- the old version without index entries, when the page has room; new pages keep a tenth free for that, as
-- recipients' do (00041).
--
-- The index is built CONCURRENTLY, outside a transaction: a plain CREATE INDEX reads the whole table while
-- holding a lock that stops every send from writing a message until it is done. Each statement commits on
-- its own and can run again, so a migration stopped half-way (the process killed while building) is
-- finished by the next start: the DROP removes what an interrupted build leaves behind (an invalid index
-- of the same name) before the index is built again.
ALTER TABLE messages ADD COLUMN IF NOT EXISTS due_at timestamptz;
UPDATE messages SET due_at = scheduled_at WHERE status = 'scheduled' AND due_at IS DISTINCT FROM scheduled_at;
DROP INDEX CONCURRENTLY IF EXISTS messages_due_idx;
CREATE INDEX CONCURRENTLY messages_due_idx ON messages (due_at, id) WHERE due_at IS NOT NULL;
ALTER TABLE messages SET (fillfactor = 90);

-- +goose Down
ALTER TABLE messages RESET (fillfactor);
DROP INDEX CONCURRENTLY IF EXISTS messages_due_idx;
ALTER TABLE messages DROP COLUMN IF EXISTS due_at;
