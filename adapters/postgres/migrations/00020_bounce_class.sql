-- +goose Up
-- What a bounce means beyond hard and soft (core/deliverability/bounceclass: bad_mailbox, spam_block,
-- rate_limited, ...). Bounces recorded before it hold '' and are classified again from their status and
-- diagnostic code when listed.
ALTER TABLE bounces ADD COLUMN class text NOT NULL DEFAULT '';
-- The same class on the email.bounced and email.delivery_delayed events, for the webhook body's
-- data.bounce_class. NULL on every other event.
ALTER TABLE events ADD COLUMN bounce_class text;

-- +goose Down
ALTER TABLE events DROP COLUMN bounce_class;
ALTER TABLE bounces DROP COLUMN class;
