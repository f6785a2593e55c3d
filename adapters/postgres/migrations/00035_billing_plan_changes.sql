-- +goose Up
-- A plan change inside the provider's subscription (docs/billing.md "Changing plans inside a
-- subscription"). An organization paying through a subscription moves to another priced plan by changing
-- that subscription's price, not by a second checkout: the plan and the price asked for are recorded here,
-- on the organization's subscription row, before the provider is asked, and they apply only when the
-- provider confirms that this subscription is on that price (the answer to the update, or a notification).
-- Recording anything else about the subscription (subscribing, a completed checkout, an ended subscription)
-- clears them, so a late confirmation of an abandoned change changes nothing.
ALTER TABLE billing_subscriptions
    ADD COLUMN pending_plan_id text,
    ADD COLUMN pending_price_id text,
    ADD CONSTRAINT billing_subscriptions_pending_check CHECK (
        (pending_plan_id IS NULL AND pending_price_id IS NULL)
        OR (payment_subscription_id IS NOT NULL AND pending_plan_id <> '' AND length(pending_plan_id) <= 64
            AND pending_price_id <> '' AND length(pending_price_id) <= 255)
    );

-- +goose Down
ALTER TABLE billing_subscriptions
    DROP CONSTRAINT billing_subscriptions_pending_check,
    DROP COLUMN pending_price_id,
    DROP COLUMN pending_plan_id;
