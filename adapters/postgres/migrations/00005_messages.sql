-- +goose Up
-- Accepted messages (SPEC §2, §3, §4.2) with their recipients, attachment metadata, the event outbox, the
-- delivery outbox and suppressions. The send path writes a message, its recipients, attachments, events,
-- delivery jobs and usage in one transaction; every tenant row carries organization_id.
CREATE TABLE messages (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    domain_id       uuid        NOT NULL,
    status          text        NOT NULL,
    from_address    text        NOT NULL,
    reply_to        text        NOT NULL DEFAULT '',
    subject         text        NOT NULL DEFAULT '',
    html_body       text        NOT NULL DEFAULT '',
    text_body       text        NOT NULL DEFAULT '',
    headers         jsonb       NOT NULL DEFAULT '{}',
    tags            jsonb       NOT NULL DEFAULT '{}',
    metadata        jsonb,
    sandbox         boolean     NOT NULL DEFAULT false,
    scheduled_at    timestamptz,
    idempotency_key text,
    created_at      timestamptz NOT NULL,
    CONSTRAINT messages_pkey PRIMARY KEY (id),
    -- Idempotency rule 4 of SPEC §4.2 rests on this constraint: of concurrent sends with one key exactly
    -- one insert succeeds. Messages without a key hold NULL, which never conflicts.
    CONSTRAINT messages_org_idempotency_key UNIQUE (organization_id, idempotency_key),
    CONSTRAINT messages_domain_id_fkey FOREIGN KEY (organization_id, domain_id) REFERENCES domains (organization_id, id),
    CONSTRAINT messages_status_check CHECK (status IN ('queued', 'scheduled', 'sent', 'delivered', 'delivery_delayed',
        'bounced', 'complained', 'opened', 'clicked', 'failed', 'cancelled'))
);

-- GET /v1/emails pages newest first by (created_at, id).
CREATE INDEX messages_organization_id_created_at_idx ON messages (organization_id, created_at DESC, id DESC);
-- The scheduler's search for due messages. Partial, so that the bulk of messages (never scheduled) costs
-- the send path nothing here.
CREATE INDEX messages_scheduled_idx ON messages (status, scheduled_at) WHERE status = 'scheduled';

-- One row per address of to, cc and bcc, each with its own delivery state. domain is the lower-cased part
-- after the last "@", what delivery jobs group by and domain suppressions match.
CREATE TABLE recipients (
    id              uuid    NOT NULL,
    message_id      uuid    NOT NULL,
    organization_id uuid    NOT NULL,
    position        integer NOT NULL,
    type            text    NOT NULL,
    address         text    NOT NULL,
    domain          text    NOT NULL,
    status          text    NOT NULL,
    CONSTRAINT recipients_pkey PRIMARY KEY (id),
    CONSTRAINT recipients_message_position_key UNIQUE (message_id, position),
    CONSTRAINT recipients_message_id_fkey FOREIGN KEY (message_id) REFERENCES messages (id) ON DELETE CASCADE,
    CONSTRAINT recipients_type_check CHECK (type IN ('to', 'cc', 'bcc'))
);

-- Attachment metadata; the bytes live in the blob store under storage_key (generated, never the filename).
CREATE TABLE attachments (
    id              uuid    NOT NULL,
    message_id      uuid    NOT NULL,
    organization_id uuid    NOT NULL,
    position        integer NOT NULL,
    filename        text    NOT NULL,
    content_type    text    NOT NULL,
    size            bigint  NOT NULL,
    inline          boolean NOT NULL DEFAULT false,
    content_id      text    NOT NULL DEFAULT '',
    storage_key     text    NOT NULL,
    CONSTRAINT attachments_pkey PRIMARY KEY (id),
    CONSTRAINT attachments_message_position_key UNIQUE (message_id, position),
    CONSTRAINT attachments_message_id_fkey FOREIGN KEY (message_id) REFERENCES messages (id) ON DELETE CASCADE
);

-- The event outbox: every message state change and domain event, written in the transaction of the change.
-- Message timelines read it by message; the webhook fan-out reads it per organization in id (UUIDv7) order.
-- It has no foreign keys so that writing an event never locks the row it is about.
CREATE TABLE events (
    id                uuid        NOT NULL,
    organization_id   uuid        NOT NULL,
    type              text        NOT NULL,
    message_id        uuid,
    recipient_id      uuid,
    domain_id         uuid,
    provider_response text,
    occurred_at       timestamptz NOT NULL,
    CONSTRAINT events_pkey PRIMARY KEY (id)
);

CREATE INDEX events_message_id_idx ON events (message_id, occurred_at, id) WHERE message_id IS NOT NULL;
CREATE INDEX events_organization_id_idx ON events (organization_id, id);

-- Delivery jobs waiting for the relay: written with the message (or as a retry) and moved to the delivery
-- queue once not_before has passed.
CREATE TABLE delivery_outbox (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    message_id      uuid        NOT NULL,
    domain          text        NOT NULL,
    recipient_ids   uuid[]      NOT NULL,
    attempt         integer     NOT NULL,
    first_queued_at timestamptz NOT NULL,
    not_before      timestamptz NOT NULL,
    CONSTRAINT delivery_outbox_pkey PRIMARY KEY (id)
);

CREATE INDEX delivery_outbox_not_before_idx ON delivery_outbox (not_before, id);

-- Job ids whose outcome has been applied: the queue delivers at least once, ApplyDelivery applies once.
CREATE TABLE applied_jobs (
    job_id     uuid        NOT NULL,
    applied_at timestamptz NOT NULL,
    CONSTRAINT applied_jobs_pkey PRIMARY KEY (job_id)
);

-- Suppressed addresses and domains (an address without "@" is a whole domain). organization_id is NULL for
-- platform-wide rows. The unique index treats NULL as one organization so that a global suppression, too,
-- exists once per address and scope.
CREATE TABLE suppressions (
    id              uuid        NOT NULL,
    organization_id uuid,
    address         text        NOT NULL,
    scope           text        NOT NULL,
    reason          text        NOT NULL,
    created_at      timestamptz NOT NULL,
    CONSTRAINT suppressions_pkey PRIMARY KEY (id),
    CONSTRAINT suppressions_address_check CHECK (address = lower(address) AND address <> ''),
    CONSTRAINT suppressions_scope_check CHECK (scope IN ('global', 'tenant', 'domain', 'recipient')),
    CONSTRAINT suppressions_reason_check CHECK (reason IN ('bounce', 'complaint', 'invalid', 'manual')),
    CONSTRAINT suppressions_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

CREATE UNIQUE INDEX suppressions_org_address_scope_key
    ON suppressions ((COALESCE(organization_id, '00000000-0000-0000-0000-000000000000'::uuid)), address, scope);
CREATE INDEX suppressions_address_idx ON suppressions (address);

-- lock_usage_meter locks one usage row (creating it at 0 when absent) and returns its value. Every caller
-- locks an organization's month row before its day row, so two transactions never deadlock on them. Creating
-- the row is what lets the very first sends of a period wait for each other too; a period whose only sends
-- were refused keeps its row at 0, which reads like an absent one.
-- +goose StatementBegin
CREATE FUNCTION lock_usage_meter(p_organization_id uuid, p_metric text, p_period date) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_value bigint;
BEGIN
    SELECT um.value INTO v_value FROM usage_meters um
    WHERE um.organization_id = p_organization_id AND um.metric = p_metric AND um.period_start = p_period
    FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO usage_meters (organization_id, metric, period_start, value)
        VALUES (p_organization_id, p_metric, p_period, 0)
        ON CONFLICT DO NOTHING;
        SELECT um.value INTO v_value FROM usage_meters um
        WHERE um.organization_id = p_organization_id AND um.metric = p_metric AND um.period_start = p_period
        FOR UPDATE;
    END IF;
    RETURN v_value;
END
$$;
-- +goose StatementEnd

-- accept_messages decides, inside the send transaction, the fate of messages the same transaction has just
-- tried to insert (several concurrent sends of one organization and day are written together):
--   existing    the insert was skipped because the idempotency key belongs to another message, which is
--               returned (existing_id, existing_status); nothing is metered for it;
--   plan_limit  the monthly allowance (metric emails_sent, period p_month) would be passed;
--   warmup_cap  the daily warm-up cap (metric emails_sent_daily, period p_day) would be passed;
--   created     metered and kept;
--   retry       the key's owner vanished within this transaction (it was refused): send it again alone.
-- Limits of 0 mean none (still counted). Messages are taken in array order, so earlier sends get the
-- allowance first. Refused messages are deleted again, so the caller's conditional inserts of their
-- recipients, events and jobs write nothing. The usage rows are locked only when something is metered, and
-- stay locked until the transaction ends: that is what keeps concurrent transactions from passing a limit.
-- +goose StatementBegin
CREATE FUNCTION accept_messages(p_organization_id uuid, p_month date, p_day date, p_ids uuid[],
                                p_idempotency_keys text[], p_units bigint[], p_monthly_limits bigint[],
                                p_daily_caps bigint[])
RETURNS TABLE (message_id uuid, outcome text, existing_id uuid, existing_status text)
LANGUAGE plpgsql AS $$
DECLARE
    v_month   bigint;
    v_day     bigint;
    v_metered bigint := 0;
    v_refused uuid[] := '{}';
BEGIN
    FOR i IN 1 .. COALESCE(array_length(p_ids, 1), 0) LOOP
        message_id := p_ids[i];
        existing_id := NULL;
        existing_status := NULL;
        IF NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = p_ids[i]) THEN
            SELECT m.id, m.status INTO existing_id, existing_status FROM messages m
            WHERE m.organization_id = p_organization_id AND m.idempotency_key = p_idempotency_keys[i]
              AND m.id <> ALL (v_refused);
            outcome := CASE WHEN existing_id IS NULL THEN 'retry' ELSE 'existing' END;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF p_units[i] > 0 THEN
            IF v_month IS NULL THEN
                v_month := lock_usage_meter(p_organization_id, 'emails_sent', p_month);
                v_day := lock_usage_meter(p_organization_id, 'emails_sent_daily', p_day);
            END IF;
            IF p_monthly_limits[i] > 0 AND v_month + p_units[i] > p_monthly_limits[i] THEN
                outcome := 'plan_limit';
            ELSIF p_daily_caps[i] > 0 AND v_day + p_units[i] > p_daily_caps[i] THEN
                outcome := 'warmup_cap';
            ELSE
                v_month := v_month + p_units[i];
                v_day := v_day + p_units[i];
                v_metered := v_metered + p_units[i];
                outcome := 'created';
            END IF;
            IF outcome <> 'created' THEN
                v_refused := v_refused || p_ids[i];
            END IF;
        ELSE
            outcome := 'created';
        END IF;
        RETURN NEXT;
    END LOOP;
    IF v_metered > 0 THEN
        UPDATE usage_meters um SET value = um.value + v_metered
        WHERE um.organization_id = p_organization_id
          AND ((um.metric = 'emails_sent' AND um.period_start = p_month)
            OR (um.metric = 'emails_sent_daily' AND um.period_start = p_day));
    END IF;
    IF cardinality(v_refused) > 0 THEN
        DELETE FROM messages m WHERE m.id = ANY (v_refused);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION accept_messages(uuid, date, date, uuid[], text[], bigint[], bigint[], bigint[]);
DROP FUNCTION lock_usage_meter(uuid, text, date);
DROP TABLE suppressions;
DROP TABLE applied_jobs;
DROP TABLE delivery_outbox;
DROP TABLE events;
DROP TABLE attachments;
DROP TABLE recipients;
DROP TABLE messages;
