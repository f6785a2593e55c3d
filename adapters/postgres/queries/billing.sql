-- name: SubscribedPlan :one
SELECT plan_id FROM billing_subscriptions WHERE organization_id = $1;

-- name: UpsertSubscribedPlan :exec
INSERT INTO billing_subscriptions (organization_id, plan_id, updated_at)
VALUES ($1, $2, $3)
ON CONFLICT (organization_id) DO UPDATE SET plan_id = EXCLUDED.plan_id, updated_at = EXCLUDED.updated_at;
