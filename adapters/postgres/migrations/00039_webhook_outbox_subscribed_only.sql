-- +goose Up
-- webhook_outbox_add (00033) queued every new event for the webhook fan-out, which then read the event, built
-- its webhook body and deleted the id, though most events of most organizations have no endpoint to go to:
-- an organization without endpoints paid a row, its index entry and a fan-out read for each of a sent
-- message's three events. Now an event is queued only when an endpoint of its organization subscribes to its
-- type at the time it is written (enabled or not: the fan-out still decides by the endpoints it finds), or
-- when the events are published to a stream (event_streams has a row: the Kafka events topic, registered by
-- every process configured with it when it starts), which takes every event. An endpoint receives the
-- events written after it exists, as before (an event written just before the endpoint could reach it when
-- its fan-out ran later; now it never does).
--
-- The endpoints are looked up once per statement for the organizations it writes events of. The function
-- prices sequential scans, hash and merge joins out and has no JIT (as contacts_note_events, 00037), so a
-- plan cached while webhook_endpoints was small still probes its index by organization.
CREATE TABLE event_streams (
    name          text        NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT event_streams_pkey PRIMARY KEY (name)
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_outbox_add() RETURNS trigger LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off AS $$
DECLARE
    orgs uuid[];
BEGIN
    IF EXISTS (SELECT 1 FROM event_streams) THEN
        INSERT INTO webhook_outbox (id) SELECT id FROM new_events WHERE fanned_out_at IS NULL ON CONFLICT DO NOTHING;
        RETURN NULL;
    END IF;
    SELECT array_agg(DISTINCT w.organization_id) INTO orgs
      FROM webhook_endpoints w
     WHERE w.organization_id = ANY (ARRAY(SELECT DISTINCT organization_id FROM new_events));
    IF orgs IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_outbox (id)
    SELECT n.id FROM new_events n
     WHERE n.fanned_out_at IS NULL AND n.organization_id = ANY (orgs)
       AND EXISTS (SELECT 1 FROM webhook_endpoints w
                    WHERE w.organization_id = n.organization_id AND n.type = ANY (w.event_types))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_outbox_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (id) SELECT id FROM new_events WHERE fanned_out_at IS NULL ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP TABLE event_streams;
