-- name: PublishedDomainRecords :many
-- Local mode's DNS server (ports.LocalDNSStore) reads the records of this instance's sending domains by
-- name. It is the one query that spans organizations on purpose: it is read-only, answers only names the
-- server is asked about, and runs only in local mode.
SELECT d.id AS domain_id, d.name AS domain_name, r.type, r.host, r.value, r.ttl
FROM domains AS d
JOIN dns_records AS r ON r.organization_id = d.organization_id AND r.domain_id = d.id
WHERE d.name = ANY(@names::text[])
ORDER BY d.name, d.created_at, d.id, r.position
LIMIT 1000;
