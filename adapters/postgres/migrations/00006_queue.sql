-- +goose Up
-- The PostgreSQL delivery queue: jobs the relay published, leased by MTA workers with FOR UPDATE SKIP
-- LOCKED. A row is visible when visible_at has passed; receiving it moves visible_at to the end of the
-- lease (lease_until), so a worker that crashes without acking loses the lease and the job is received
-- again. lease_token is fresh per receive: only the holder of the current lease may ack or nack.
CREATE TABLE delivery_queue (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    message_id      uuid        NOT NULL,
    domain          text        NOT NULL,
    recipient_ids   uuid[]      NOT NULL,
    attempt         integer     NOT NULL,
    first_queued_at timestamptz NOT NULL,
    not_before      timestamptz NOT NULL,
    visible_at      timestamptz NOT NULL DEFAULT now(),
    lease_until     timestamptz,
    lease_token     uuid,
    deliveries      integer     NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT delivery_queue_pkey PRIMARY KEY (id)
);

CREATE INDEX delivery_queue_visible_at_idx ON delivery_queue (visible_at, id);

-- +goose Down
DROP TABLE delivery_queue;
