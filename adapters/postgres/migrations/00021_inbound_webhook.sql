-- +goose Up
-- Webhook routes post each message they take, signed like SPEC §6's events, with the webhook retry schedule.
-- A webhook route keeps its signing secret sealed by the core. The received email is its own delivery:
-- action_next_at is when the next attempt is due (NULL when nothing is left to do), action_lease the claim
-- of the process attempting it, action_event_id the email.received event id the request carries.
ALTER TABLE inbound_routes ADD COLUMN secret bytea;

ALTER TABLE received_emails
    ADD COLUMN action_event_id       uuid,
    ADD COLUMN action_attempts       integer NOT NULL DEFAULT 0,
    ADD COLUMN action_next_at        timestamptz,
    ADD COLUMN action_lease          uuid,
    ADD COLUMN action_response_code  integer NOT NULL DEFAULT 0,
    ADD COLUMN action_blocked_reason text    NOT NULL DEFAULT '';

CREATE INDEX received_emails_action_due_idx ON received_emails (action_next_at) WHERE action_next_at IS NOT NULL;

-- +goose Down
DROP INDEX received_emails_action_due_idx;
ALTER TABLE received_emails
    DROP COLUMN action_event_id,
    DROP COLUMN action_attempts,
    DROP COLUMN action_next_at,
    DROP COLUMN action_lease,
    DROP COLUMN action_response_code,
    DROP COLUMN action_blocked_reason;
ALTER TABLE inbound_routes DROP COLUMN secret;
