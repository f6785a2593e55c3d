-- +goose Up
-- due_at (00042) is set by the statements that write a scheduled message and cleared by the ones that
-- promote or cancel it. A process of an earlier version still running beside the migrated database (the
-- core processes of a deployment are replaced one by one) writes scheduled messages without due_at, and the
-- scheduler would never find them. These guards keep "due_at is the scheduled time exactly while the status
-- is scheduled" whoever writes the row. Their conditions are evaluated without calling the functions, so a
-- row that already keeps the rule, as every row the current statements write does, costs nothing more.
-- +goose StatementBegin
CREATE FUNCTION messages_set_due_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.due_at := NEW.scheduled_at;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION messages_clear_due_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.due_at := NULL;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER messages_due_at_on_insert BEFORE INSERT ON messages FOR EACH ROW
    WHEN (NEW.status = 'scheduled' AND NEW.due_at IS DISTINCT FROM NEW.scheduled_at)
    EXECUTE FUNCTION messages_set_due_at();
CREATE TRIGGER messages_due_at_on_update BEFORE UPDATE ON messages FOR EACH ROW
    WHEN (NEW.status <> 'scheduled' AND NEW.due_at IS NOT NULL)
    EXECUTE FUNCTION messages_clear_due_at();
-- Scheduled messages an earlier version wrote while 00042 ran or since, found through messages_scheduled_idx
-- (00044 drops it after this) and messages_due_idx.
UPDATE messages SET due_at = scheduled_at WHERE status = 'scheduled' AND due_at IS DISTINCT FROM scheduled_at;
UPDATE messages SET due_at = NULL WHERE status <> 'scheduled' AND due_at IS NOT NULL;

-- +goose Down
DROP TRIGGER messages_due_at_on_update ON messages;
DROP TRIGGER messages_due_at_on_insert ON messages;
DROP FUNCTION messages_clear_due_at();
DROP FUNCTION messages_set_due_at();
