-- name: OrganizationByID :one
SELECT * FROM organizations WHERE id = $1;

-- name: ListOrganizations :many
SELECT * FROM organizations ORDER BY created_at DESC, id DESC;

-- name: SetOrganizationPaused :one
UPDATE organizations SET paused = $2 WHERE id = $1 RETURNING *;

-- name: SetOrganizationPlan :one
UPDATE organizations SET monthly_limit = $2, warmup_cap = $3 WHERE id = $1 RETURNING *;

-- name: Usage :one
SELECT value FROM usage_meters
WHERE organization_id = $1 AND metric = $2 AND period_start = $3;
