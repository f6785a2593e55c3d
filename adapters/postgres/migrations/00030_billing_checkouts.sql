-- +goose Up
-- Payment through a provider (docs/billing.md "Payment"). A checkout is recorded when it starts, for one
-- organization and one plan: its completion is matched to that organization and plan, never to what a
-- notification claims alone. Every provider event applied is recorded once per organization, so a replayed
-- notification changes nothing twice. billing_subscriptions.payment_subscription_id is the provider's
-- subscription the current plan is paid by (null for a plan taken without payment): ending that subscription
-- moves the organization back to the free plan, ending an older one does not.
CREATE TABLE billing_checkouts (
    organization_id uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    checkout_id     text        NOT NULL,
    plan_id         text        NOT NULL,
    created_at      timestamptz NOT NULL,
    completed_at    timestamptz,
    subscription_id text,
    PRIMARY KEY (organization_id, checkout_id),
    CONSTRAINT billing_checkouts_checkout_id_check CHECK (checkout_id <> '' AND length(checkout_id) <= 255),
    CONSTRAINT billing_checkouts_plan_id_check CHECK (plan_id <> '' AND length(plan_id) <= 64)
);

CREATE TABLE billing_payment_events (
    organization_id uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    event_id        text        NOT NULL,
    received_at     timestamptz NOT NULL,
    PRIMARY KEY (organization_id, event_id),
    CONSTRAINT billing_payment_events_event_id_check CHECK (event_id <> '' AND length(event_id) <= 255)
);

ALTER TABLE billing_subscriptions ADD COLUMN payment_subscription_id text;

-- +goose Down
ALTER TABLE billing_subscriptions DROP COLUMN payment_subscription_id;
DROP TABLE billing_payment_events;
DROP TABLE billing_checkouts;
