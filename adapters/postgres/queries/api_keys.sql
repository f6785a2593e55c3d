-- name: LockOrganizationAPIKeys :exec
-- Serialises key creation within one organization until the transaction ends, so the count that
-- InsertAPIKeyWithin checks cannot change before its insert commits (lock class 7305).
SELECT pg_advisory_xact_lock(7305, hashtext(sqlc.arg(organization_id)::text));

-- name: InsertAPIKeyWithin :execrows
-- The key, unless the organization already holds max_keys keys that are not revoked (below 1: no bound).
INSERT INTO api_keys (organization_id, id, name, prefix, token_hash, scopes, scopes_enforced, last_used_at, revoked_at, created_at)
SELECT @organization_id::uuid, @id::uuid, @name::text, @prefix::text, @token_hash::bytea, @scopes::text[],
    @scopes_enforced::boolean, sqlc.narg(last_used_at)::timestamptz, sqlc.narg(revoked_at)::timestamptz,
    @created_at::timestamptz
WHERE @max_keys::int < 1
   OR (SELECT count(*) FROM api_keys WHERE organization_id = @organization_id::uuid AND revoked_at IS NULL) < @max_keys::int;

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
