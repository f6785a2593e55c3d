-- +goose Up
-- The analytics store (docs/analytics.md): API request logs and message events, both partitioned by day on
-- their time so retention drops whole partitions. The maintenance loop creates each day's partition ahead
-- of time; a row of a day without one lands in the default partition, and the next maintenance run moves it
-- into its day. Every read is by organization.
CREATE TABLE analytics_requests (
    organization_id uuid        NOT NULL,
    id              uuid        NOT NULL,
    occurred_at     timestamptz NOT NULL,
    method          text        NOT NULL,
    route           text        NOT NULL,
    path            text        NOT NULL,
    status          integer     NOT NULL,
    latency_us      bigint      NOT NULL,
    api_key_id      text        NOT NULL DEFAULT '',
    user_id         text        NOT NULL DEFAULT '',
    user_agent      text        NOT NULL DEFAULT '',
    client_ip       text        NOT NULL DEFAULT '',
    request_id      text        NOT NULL DEFAULT '',
    request_body    text        NOT NULL DEFAULT '',
    response_body   text        NOT NULL DEFAULT '',
    CONSTRAINT analytics_requests_pkey PRIMARY KEY (organization_id, occurred_at, id)
) PARTITION BY RANGE (occurred_at);

CREATE INDEX analytics_requests_id_idx ON analytics_requests (organization_id, id);
CREATE TABLE analytics_requests_default PARTITION OF analytics_requests DEFAULT;

-- Events keyed by their id (and time, which a partitioned key must include; an event's time never
-- changes), so a re-delivered event inserts nothing.
CREATE TABLE analytics_events (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    occurred_at     timestamptz NOT NULL,
    type            text        NOT NULL,
    message_id      uuid,
    domain          text        NOT NULL DEFAULT '',
    tags            text[]      NOT NULL DEFAULT '{}',
    CONSTRAINT analytics_events_pkey PRIMARY KEY (id, occurred_at)
) PARTITION BY RANGE (occurred_at);

CREATE INDEX analytics_events_org_idx ON analytics_events (organization_id, occurred_at);
CREATE TABLE analytics_events_default PARTITION OF analytics_events DEFAULT;

-- Hourly counts per organization for everything (domain '' and tag ''), per sending domain (tag '') and
-- per tag (domain ''), written in the statement that inserts the events they count. GET /v1/analytics
-- reads only these.
CREATE TABLE analytics_rollups (
    organization_id uuid        NOT NULL,
    domain          text        NOT NULL,
    tag             text        NOT NULL,
    bucket          timestamptz NOT NULL,
    sent            bigint      NOT NULL DEFAULT 0,
    delivered       bigint      NOT NULL DEFAULT 0,
    bounced         bigint      NOT NULL DEFAULT 0,
    complained      bigint      NOT NULL DEFAULT 0,
    opened          bigint      NOT NULL DEFAULT 0,
    clicked         bigint      NOT NULL DEFAULT 0,
    failed          bigint      NOT NULL DEFAULT 0,
    delayed         bigint      NOT NULL DEFAULT 0,
    CONSTRAINT analytics_rollups_pkey PRIMARY KEY (organization_id, domain, tag, bucket)
);

CREATE INDEX analytics_rollups_bucket_idx ON analytics_rollups (bucket);

-- The pipeline's outbox: the id of every event the core writes, added by a statement trigger in the
-- transaction that writes the event. The pipeline takes ids in order, copies their events into the
-- analytics store and deletes the ids it copied.
CREATE TABLE analytics_outbox (
    id uuid NOT NULL,
    CONSTRAINT analytics_outbox_pkey PRIMARY KEY (id)
);

-- +goose StatementBegin
CREATE FUNCTION analytics_outbox_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO analytics_outbox (id) SELECT id FROM new_events ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER events_analytics_outbox AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION analytics_outbox_add();

-- +goose Down
DROP TRIGGER events_analytics_outbox ON events;
DROP FUNCTION analytics_outbox_add();
DROP TABLE analytics_outbox;
DROP TABLE analytics_rollups;
DROP TABLE analytics_events;
DROP TABLE analytics_requests;
