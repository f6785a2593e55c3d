-- name: SubscribedPlan :one
SELECT plan_id, coalesce(pending_plan_id, '')::text AS pending_plan_id FROM billing_subscriptions
WHERE organization_id = $1;

-- name: UpsertSubscribedPlan :exec
INSERT INTO billing_subscriptions (organization_id, plan_id, updated_at, payment_subscription_id)
VALUES ($1, $2, $3, sqlc.narg(payment_subscription_id))
ON CONFLICT (organization_id) DO UPDATE SET plan_id = EXCLUDED.plan_id, updated_at = EXCLUDED.updated_at,
    payment_subscription_id = EXCLUDED.payment_subscription_id, pending_plan_id = NULL, pending_price_id = NULL;

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

-- name: PaidSubscription :one
SELECT payment_subscription_id FROM billing_subscriptions WHERE organization_id = $1;

-- name: StartPlanChange :execrows
UPDATE billing_subscriptions SET pending_plan_id = $3, pending_price_id = $4
WHERE organization_id = $1 AND payment_subscription_id = $2;

-- name: PendingPlanChange :one
SELECT pending_plan_id::text AS plan_id, pending_price_id::text AS price_id FROM billing_subscriptions
WHERE organization_id = $1 AND payment_subscription_id = $2 AND pending_plan_id IS NOT NULL;

-- name: CompletePlanChange :execrows
UPDATE billing_subscriptions SET pending_plan_id = NULL, pending_price_id = NULL
WHERE organization_id = $1 AND payment_subscription_id = $2 AND pending_plan_id = $3 AND pending_price_id = $4;
