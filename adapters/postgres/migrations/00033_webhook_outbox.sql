-- +goose Up
-- The webhook fan-out's outbox: the id of every event still to be fanned out, added by a statement trigger
-- in the transaction that writes the event. Fan-out takes ids in order (UUIDv7, so time order), writes the
-- deliveries of their events and deletes the ids in the same transaction. It replaces marking each event
-- (UPDATE events SET fanned_out_at): fanned_out_at was in the predicate of events_fan_out_idx, so that
-- update was never HOT and wrote the wide events row and every index of events a second time.
--
-- fanned_out_at now means "never to be fanned out": it is set only when an event is inserted (events
-- written before migration 00007, and events a tool or benchmark seeds already fanned out so that the core
-- leaves them alone), and the trigger does not add such events. Every other event keeps fanned_out_at NULL
-- for good; whether it is still to be fanned out is whether its id is in webhook_outbox. Fan-out consumes
-- without handing out an outbox id whose event has fanned_out_at set (marked by a release from before
-- this migration during a rolling upgrade) or no longer exists.
CREATE TABLE webhook_outbox (
    id uuid NOT NULL,
    CONSTRAINT webhook_outbox_pkey PRIMARY KEY (id)
);

-- +goose StatementBegin
CREATE FUNCTION webhook_outbox_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (id) SELECT id FROM new_events WHERE fanned_out_at IS NULL ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- Created before the backfill: CREATE TRIGGER holds a lock that waits for every transaction writing
-- events and keeps new ones out until this migration commits, so each event is added once, by the trigger
-- or by the backfill.
CREATE TRIGGER events_webhook_outbox AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION webhook_outbox_add();

-- Events not fanned out yet (read through events_fan_out_idx, dropped next).
INSERT INTO webhook_outbox (id) SELECT id FROM events WHERE fanned_out_at IS NULL ON CONFLICT DO NOTHING;

DROP INDEX events_fan_out_idx;

-- +goose Down
-- The release before this migration takes events whose fanned_out_at is NULL: events fanned out since
-- (NULL and out of the outbox) are marked first, or they would be fanned out again.
UPDATE events AS e SET fanned_out_at = now()
WHERE e.fanned_out_at IS NULL AND NOT EXISTS (SELECT 1 FROM webhook_outbox o WHERE o.id = e.id);
CREATE INDEX events_fan_out_idx ON events (id) WHERE fanned_out_at IS NULL;
DROP TRIGGER events_webhook_outbox ON events;
DROP FUNCTION webhook_outbox_add();
DROP TABLE webhook_outbox;
