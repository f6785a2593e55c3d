-- +goose Up
-- Webhook endpoints and their deliveries (SPEC §2, §3, §4.6, §6). The signing secret is stored sealed
-- (encrypted by the core before it reaches the store). webhook_endpoints_org_id_key lets deliveries
-- reference an endpoint together with its organization, so a delivery of one organization can never point
-- at another organization's endpoint.
CREATE TABLE webhook_endpoints (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    url             text        NOT NULL,
    enabled         boolean     NOT NULL DEFAULT true,
    event_types     text[]      NOT NULL,
    secret          bytea       NOT NULL,
    created_at      timestamptz NOT NULL,
    CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_endpoints_org_id_key UNIQUE (organization_id, id),
    CONSTRAINT webhook_endpoints_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

-- GET /v1/webhooks lists newest first; fan-out looks up an organization's endpoints by the same prefix.
CREATE INDEX webhook_endpoints_organization_id_created_at_idx
    ON webhook_endpoints (organization_id, created_at DESC, id DESC);

-- One event for one endpoint. payload holds the exact bytes every attempt posts (bytea, not jsonb, which
-- would reorder and respace them and so break signatures over replays). next_attempt_at is when a pending
-- or failed delivery is due and NULL in every other state. A dispatcher that takes a delivery leases it
-- (lease_token, lease_until); only the holder of the current lease may record the attempt's result.
-- event_id is text because test and replay deliveries carry "evt_test_<uuid>" and "evt_replay_<uuid>".
CREATE TABLE webhook_deliveries (
    id                uuid        NOT NULL,
    organization_id   uuid        NOT NULL,
    endpoint_id       uuid        NOT NULL,
    event_id          text        NOT NULL,
    event_type        text        NOT NULL,
    status            text        NOT NULL,
    attempts          integer     NOT NULL DEFAULT 0,
    response_code     integer     NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz,
    delivered_at      timestamptz,
    created_at        timestamptz NOT NULL,
    payload           bytea       NOT NULL,
    original_event_id text,
    lease_token       text,
    lease_until       timestamptz,
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (organization_id, endpoint_id)
        REFERENCES webhook_endpoints (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'delivered', 'failed', 'dead', 'blocked')),
    CONSTRAINT webhook_deliveries_attempts_check CHECK (attempts >= 0)
);

-- ClaimDue's search. Partial, so that the bulk of deliveries (delivered, dead, blocked) costs it nothing;
-- id breaks ties so that deliveries due together are attempted in event order.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at, id)
    WHERE status IN ('pending', 'failed');
-- GET /v1/webhook-events: the organization's most recent deliveries.
CREATE INDEX webhook_deliveries_organization_id_created_at_idx
    ON webhook_deliveries (organization_id, created_at DESC, id DESC);
-- Deleting an endpoint cascades to its deliveries; without this the cascade scans the whole table.
CREATE INDEX webhook_deliveries_endpoint_id_idx ON webhook_deliveries (endpoint_id);

-- Fan-out takes events whose fanned_out_at is NULL, oldest first (ids are UUIDv7, so id order is time
-- order). Events written before this migration count as fanned out, so that an upgrade does not post the
-- whole history to endpoints: now() is stable, so PostgreSQL evaluates the default once and keeps it in
-- the catalogue for every existing row, without rewriting the table; dropping the default then leaves new
-- rows NULL.
ALTER TABLE events ADD COLUMN fanned_out_at timestamptz DEFAULT now();
ALTER TABLE events ALTER COLUMN fanned_out_at DROP DEFAULT;

CREATE INDEX events_fan_out_idx ON events (id) WHERE fanned_out_at IS NULL;

-- +goose Down
DROP INDEX events_fan_out_idx;
ALTER TABLE events DROP COLUMN fanned_out_at;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
