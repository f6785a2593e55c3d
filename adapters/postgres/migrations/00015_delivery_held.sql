-- +goose Up
-- Delivery jobs held while their organization is paused or their sending domain suspended: the MTA hands
-- such a job to the core (LoadOutbound), which keeps it here and acknowledges it out of the queue, so it
-- neither circulates nor counts against the queue's redelivery cap. Releasing moves the rows of one
-- organization and sending domain back to delivery_outbox. id is the job's id, so a job handed out twice is
-- held once. domain is the recipient domain (as in delivery_outbox); domain_id the sending domain.
CREATE TABLE delivery_held (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    message_id      uuid        NOT NULL,
    domain          text        NOT NULL,
    recipient_ids   uuid[]      NOT NULL,
    attempt         integer     NOT NULL,
    first_queued_at timestamptz NOT NULL,
    not_before      timestamptz NOT NULL,
    domain_id       uuid        NOT NULL,
    reason          text        NOT NULL,
    held_at         timestamptz NOT NULL,
    CONSTRAINT delivery_held_pkey PRIMARY KEY (id)
);

CREATE INDEX delivery_held_group_idx ON delivery_held (organization_id, domain_id, held_at, id);

-- Every committed change of an organization's paused flag or plan, and of a domain's status, is announced
-- on the channel postmill_changes (payload "organization <org id>" or "domain <org id> <domain id>"), whoever
-- made it. Processes listen to drop what they cached and to release held deliveries at once.
-- +goose StatementBegin
CREATE FUNCTION announce_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'organizations' THEN
        PERFORM pg_notify('postmill_changes', 'organization ' || NEW.id::text);
    ELSE
        PERFORM pg_notify('postmill_changes', 'domain ' || NEW.organization_id::text || ' ' || NEW.id::text);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER organizations_announce_change
    AFTER UPDATE OF paused, monthly_limit, warmup_cap ON organizations
    FOR EACH ROW
    WHEN (OLD.paused IS DISTINCT FROM NEW.paused OR OLD.monthly_limit IS DISTINCT FROM NEW.monthly_limit
        OR OLD.warmup_cap IS DISTINCT FROM NEW.warmup_cap)
    EXECUTE FUNCTION announce_change();

CREATE TRIGGER domains_announce_change
    AFTER UPDATE OF status ON domains
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION announce_change();

-- +goose Down
DROP TRIGGER domains_announce_change ON domains;
DROP TRIGGER organizations_announce_change ON organizations;
DROP FUNCTION announce_change();
DROP TABLE delivery_held;
