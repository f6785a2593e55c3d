-- name: SuppressedAmong :many
-- The suppressed addresses of many sends at once, each checked for its own organization: an address is
-- suppressed by a row for itself or for its domain (the part after the last "@"), held by its send's
-- organization (any scope) or platform-wide (organization_id NULL). Each answer names the send (n) it
-- belongs to. The COALESCE matches the unique index suppressions_org_address_scope_key, which serves the
-- lookup.
SELECT DISTINCT a.n::int AS n, a.address::text AS address
FROM (SELECT unnest(@ns::int[]) AS n, unnest(@organization_ids::uuid[]) AS organization_id,
        unnest(@addresses::text[]) AS address) AS a
JOIN suppressions s
  ON COALESCE(s.organization_id, '00000000-0000-0000-0000-000000000000'::uuid)
         IN (a.organization_id, '00000000-0000-0000-0000-000000000000'::uuid)
 AND s.address IN (lower(a.address), lower(substring(a.address FROM '[^@]*$')));

-- name: InsertSuppressions :exec
-- Idempotent on (organization, address, scope): an existing row is kept as it is.
INSERT INTO suppressions (id, organization_id, address, scope, reason, created_at)
SELECT s.id, NULLIF(s.organization_id, '')::uuid, lower(s.address), s.scope, s.reason, s.created_at
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@organization_ids::text[]) AS organization_id,
        unnest(@addresses::text[]) AS address,
        unnest(@scopes::text[]) AS scope,
        unnest(@reasons::text[]) AS reason,
        unnest(@created_at::timestamptz[]) AS created_at) AS s
ON CONFLICT DO NOTHING;

-- name: ListSuppressions :many
-- Keyset paging newest first over one organization's rows; the first page passes a cursor after every row.
SELECT id, organization_id::text AS organization_id, address, scope, reason, created_at
FROM suppressions
WHERE organization_id = @organization_id::uuid
  AND (created_at, id) < (@before_created_at::timestamptz, @before_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;

-- name: ListGlobalSuppressions :many
-- The platform-wide rows (no organization), paged like ListSuppressions.
SELECT id, ''::text AS organization_id, address, scope, reason, created_at
FROM suppressions
WHERE organization_id IS NULL
  AND (created_at, id) < (@before_created_at::timestamptz, @before_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;
