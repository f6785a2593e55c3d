-- name: OrganizationsOwningDomain :many
SELECT DISTINCT organization_id FROM domains WHERE name = $1 ORDER BY organization_id;

-- name: InsertDMARCReport :execrows
INSERT INTO dmarc_reports (id, organization_id, reporter_org, reporter_email, report_id, domain, policy, begin_at, end_at, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (organization_id, reporter_org, report_id) DO NOTHING;

-- name: InsertDMARCRecord :exec
INSERT INTO dmarc_records (report_id, position, source_ip, count, disposition, dkim_aligned, spf_aligned, header_from, dkim_result, spf_result)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- name: DMARCSummary :many
SELECT r.domain, r.reporter_org, c.source_ip,
    sum(c.count)::bigint AS messages,
    COALESCE(sum(c.count) FILTER (WHERE c.dkim_aligned), 0)::bigint AS dkim_aligned,
    COALESCE(sum(c.count) FILTER (WHERE c.spf_aligned), 0)::bigint AS spf_aligned,
    COALESCE(sum(c.count) FILTER (WHERE c.dkim_aligned OR c.spf_aligned), 0)::bigint AS dmarc_pass,
    COALESCE(sum(c.count) FILTER (WHERE c.dkim_result = 'pass'), 0)::bigint AS dkim_pass,
    COALESCE(sum(c.count) FILTER (WHERE c.spf_result = 'pass'), 0)::bigint AS spf_pass,
    COALESCE(sum(c.count) FILTER (WHERE c.disposition = 'none'), 0)::bigint AS disposition_none,
    COALESCE(sum(c.count) FILTER (WHERE c.disposition = 'quarantine'), 0)::bigint AS disposition_quarantine,
    COALESCE(sum(c.count) FILTER (WHERE c.disposition = 'reject'), 0)::bigint AS disposition_reject
FROM dmarc_reports r JOIN dmarc_records c ON c.report_id = r.id
WHERE r.organization_id = @organization_id AND r.end_at >= @since AND (@domain::text = '' OR r.domain = @domain::text)
GROUP BY r.domain, r.reporter_org, c.source_ip
ORDER BY r.domain, messages DESC, r.reporter_org, c.source_ip;
