-- +goose Up
-- Why the SSRF guard of SPEC §6 refused a delivery's endpoint (which address, which rule, and how an
-- operator allows it), so that a blocked delivery tells its owner what to fix. NULL for every delivery that
-- was not blocked. The core bounds its length before it is stored.
ALTER TABLE webhook_deliveries ADD COLUMN blocked_reason text;

-- +goose Down
ALTER TABLE webhook_deliveries DROP COLUMN blocked_reason;
