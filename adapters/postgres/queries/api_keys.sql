-- name: InsertAPIKey :exec
INSERT INTO api_keys (organization_id, id, name, prefix, token_hash, scopes, scopes_enforced, last_used_at, revoked_at, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- name: ListAPIKeys :many
SELECT * FROM api_keys
WHERE organization_id = $1
ORDER BY created_at DESC, id DESC;

-- name: RevokeAPIKey :execrows
UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $3)
WHERE organization_id = $1 AND id = $2;

-- name: APIKeyByPrefix :one
SELECT * FROM api_keys WHERE prefix = $1;

-- name: TouchAPIKeys :exec
-- Two set-returning functions in one select list advance in lockstep, pairing ids[i] with used_at[i].
-- GREATEST ignores NULL and keeps the later time, so batches flushed out of order never move
-- last_used_at backwards.
UPDATE api_keys SET last_used_at = GREATEST(api_keys.last_used_at, touched.used_at)
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@used_at::timestamptz[]) AS used_at) AS touched
WHERE api_keys.id = touched.id;
