-- name: InsertDNSRecords :exec
-- Set-returning functions in one select list advance in lockstep: element i of each array describes
-- record i.
INSERT INTO dns_records (id, domain_id, organization_id, position, type, host, value, ttl, required, verified, checked_at)
SELECT r.id, @domain_id, @organization_id, r.position, r.type, r.host, r.value, r.ttl, r.required, r.verified,
    CASE WHEN r.checked THEN r.checked_at END
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@positions::int[]) AS position,
        unnest(@types::text[]) AS type,
        unnest(@hosts::text[]) AS host,
        unnest(@record_values::text[]) AS value,
        unnest(@ttls::int[]) AS ttl,
        unnest(@required::bool[]) AS required,
        unnest(@verified::bool[]) AS verified,
        unnest(@checked::bool[]) AS checked,
        unnest(@checked_at::timestamptz[]) AS checked_at) AS r;

-- name: LockOrganizationDomains :exec
-- Serialises domain creation within one organization until the transaction ends, so the count that
-- InsertDomainWithin checks cannot change before its insert commits (lock class 7303, see accounts.sql).
SELECT pg_advisory_xact_lock(7303, hashtext(sqlc.arg(organization_id)::text));

-- name: InsertDomainWithin :execrows
-- The domain, unless the organization already holds max_domains domains (below 1: no bound). Runs after
-- LockOrganizationDomains in the same transaction, so its snapshot sees every domain committed before.
INSERT INTO domains (id, organization_id, name, status, region, dkim_selector, dkim_private_key, dkim_public_key,
    verified_at, created_at)
SELECT @id::uuid, @organization_id::uuid, @name::text, @status::text, COALESCE(NULLIF(@region::text, ''), 'us-east-1'),
    @dkim_selector::text, @dkim_private_key::bytea, @dkim_public_key::text, sqlc.narg(verified_at)::timestamptz,
    @created_at::timestamptz
WHERE @max_domains::int < 1
   OR (SELECT count(*) FROM domains WHERE organization_id = @organization_id::uuid) < @max_domains::int;

-- name: ListDomains :many
-- Keyset paging newest first; the first page passes a cursor after every row.
SELECT * FROM domains
WHERE organization_id = @organization_id
  AND (created_at, id) < (@before_created_at::timestamptz, @before_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;

-- name: DomainByID :one
SELECT * FROM domains WHERE organization_id = @organization_id AND id = @id;

-- name: DomainByName :one
SELECT * FROM domains WHERE organization_id = @organization_id AND name = @name;

-- name: DNSRecordsByDomain :many
SELECT * FROM dns_records
WHERE organization_id = @organization_id AND domain_id = @domain_id
ORDER BY position;

-- name: SaveDomainVerification :execrows
-- verified_at is set once: a later run never overwrites it (SPEC §2). A domain suspended while the run was
-- under way stays suspended unless the run verified it (SPEC §3: suspended leaves only through a verify
-- that finds every required record), so a verify racing a suspend cannot undo it.
UPDATE domains SET
    status = CASE WHEN status = 'suspended' AND @status::text <> 'verified' THEN status ELSE @status::text END,
    verified_at = COALESCE(verified_at, @verified_at)
WHERE organization_id = @organization_id AND id = @id;

-- name: SaveDNSRecordChecks :exec
-- checked[i] false keeps record i's previous checked_at.
UPDATE dns_records AS r SET verified = c.verified, checked_at = CASE WHEN c.checked THEN c.checked_at ELSE r.checked_at END
FROM (SELECT
        unnest(@ids::uuid[]) AS id,
        unnest(@verified::bool[]) AS verified,
        unnest(@checked::bool[]) AS checked,
        unnest(@checked_at::timestamptz[]) AS checked_at) AS c
WHERE r.organization_id = @organization_id AND r.domain_id = @domain_id AND r.id = c.id;

-- name: SetDomainStatus :one
UPDATE domains SET status = @status
WHERE organization_id = @organization_id AND id = @id
RETURNING *;
