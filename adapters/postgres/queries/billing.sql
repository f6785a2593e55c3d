-- name: SubscribedPlan :one
SELECT plan_id FROM billing_subscriptions WHERE organization_id = $1;

-- name: UpsertSubscribedPlan :exec
INSERT INTO billing_subscriptions (organization_id, plan_id, updated_at, payment_subscription_id)
VALUES ($1, $2, $3, sqlc.narg(payment_subscription_id))
ON CONFLICT (organization_id) DO UPDATE SET plan_id = EXCLUDED.plan_id, updated_at = EXCLUDED.updated_at,
    payment_subscription_id = EXCLUDED.payment_subscription_id;

-- name: InsertBillingCheckout :exec
INSERT INTO billing_checkouts (organization_id, checkout_id, plan_id, created_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (organization_id, checkout_id) DO UPDATE SET plan_id = EXCLUDED.plan_id, created_at = EXCLUDED.created_at
WHERE billing_checkouts.completed_at IS NULL;

-- name: BillingCheckoutPlan :one
SELECT plan_id FROM billing_checkouts WHERE organization_id = $1 AND checkout_id = $2;

-- name: InsertPaymentEvent :execrows
INSERT INTO billing_payment_events (organization_id, event_id, received_at)
VALUES ($1, $2, $3)
ON CONFLICT (organization_id, event_id) DO NOTHING;

-- name: CompleteBillingCheckout :execrows
UPDATE billing_checkouts SET completed_at = $3, subscription_id = sqlc.narg(subscription_id)
WHERE organization_id = $1 AND checkout_id = $2 AND completed_at IS NULL;

-- name: LockPaidSubscription :one
SELECT plan_id FROM billing_subscriptions
WHERE organization_id = $1 AND payment_subscription_id = $2
FOR UPDATE;
