-- +goose Up
-- The catalogue plan each organization last subscribed to (POST /v1/billing/subscribe). The limits themselves
-- stay on organizations (monthly_limit, warmup_cap), where the send path meters them; an organization
-- without a row is on the free plan.
CREATE TABLE billing_subscriptions (
    organization_id uuid        PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    plan_id         text        NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT billing_subscriptions_plan_id_check CHECK (plan_id <> '' AND length(plan_id) <= 64)
);

-- Automatic protection and adaptive warm-up (docs/reputation.md). broadcasts_paused stops the broadcast
-- expander of the organization; transactional sending is untouched. warmup_step_on is the last day the
-- warm-up schedule raised or held the cap, so that it moves at most once a day whichever process runs it.
CREATE TABLE reputation_protection (
    organization_id   uuid        PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    broadcasts_paused boolean     NOT NULL DEFAULT false,
    paused_reason     text        NOT NULL DEFAULT '',
    paused_at         timestamptz,
    warmup_step_on    date,
    updated_at        timestamptz NOT NULL
);

-- +goose Down
DROP TABLE reputation_protection;
DROP TABLE billing_subscriptions;
