package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

var _ ports.InboundStore = (*Inbound)(nil)

// Inbound is the PostgreSQL store of inbound domains, routes and received mail (ports.InboundStore). Every
// tenant statement names the organization. Safe for concurrent use.
type Inbound struct {
	shared
	received combiner[*pendingReceived] // InsertReceived's group commit (inbound_group.go)
}

const inboundDomainCols = `id, organization_id, name, status, mx_host, mx_priority, verified_at, last_checked_at, created_at`

func scanInboundDomain(row pgx.Row) (ports.InboundDomain, error) {
	var d ports.InboundDomain
	var status string
	err := row.Scan(&d.ID, &d.OrganizationID, &d.Name, &status, &d.MXHost, &d.MXPriority, &d.VerifiedAt,
		&d.LastCheckedAt, &d.CreatedAt)
	d.Status = ports.InboundDomainStatus(status)
	d.VerifiedAt, d.LastCheckedAt, d.CreatedAt = utcPtr(d.VerifiedAt), utcPtr(d.LastCheckedAt), d.CreatedAt.UTC()
	return d, err
}

// InsertInboundDomain implements ports.InboundStore. Errors: already_exists (inbound_domains_name_key).
func (s *Inbound) InsertInboundDomain(ctx context.Context, d ports.InboundDomain) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO inbound_domains (`+inboundDomainCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`,
		d.ID, d.OrganizationID, d.Name, string(d.Status), d.MXHost, d.MXPriority, d.VerifiedAt, d.LastCheckedAt, d.CreatedAt)
	return interpretError(err)
}

// ListInboundDomains implements ports.InboundStore: newest first.
func (s *Inbound) ListInboundDomains(ctx context.Context, orgID string) ([]ports.InboundDomain, error) {
	out := []ports.InboundDomain{}
	if !isUUID(orgID) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+inboundDomainCols+` FROM inbound_domains WHERE organization_id = $1
		ORDER BY created_at DESC, id DESC LIMIT $2`, orgID, ports.MaxUnpagedListRows)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	for rows.Next() {
		d, err := scanInboundDomain(rows)
		if err != nil {
			return nil, interpretError(err)
		}
		out = append(out, d)
	}
	return out, interpretError(rows.Err())
}

// GetInboundDomain implements ports.InboundStore. Errors: not_found.
func (s *Inbound) GetInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	d, err := scanInboundDomain(s.pool.QueryRow(ctx, `SELECT `+inboundDomainCols+` FROM inbound_domains
		WHERE organization_id = $1 AND id = $2`, orgID, id))
	return d, interpretErrorFor("inbound domain", err)
}

// InboundDomainByName implements ports.InboundStore across organizations. Errors: not_found.
func (s *Inbound) InboundDomainByName(ctx context.Context, name string) (ports.InboundDomain, error) {
	d, err := scanInboundDomain(s.pool.QueryRow(ctx, `SELECT `+inboundDomainCols+` FROM inbound_domains WHERE name = $1`, name))
	return d, interpretErrorFor("inbound domain", err)
}

// SaveInboundCheck implements ports.InboundStore: verified_at is kept once set.
func (s *Inbound) SaveInboundCheck(ctx context.Context, d ports.InboundDomain) (ports.InboundDomain, error) {
	out, err := scanInboundDomain(s.pool.QueryRow(ctx, `UPDATE inbound_domains SET status = $3, last_checked_at = $4,
		verified_at = COALESCE(verified_at, $5) WHERE organization_id = $1 AND id = $2 RETURNING `+inboundDomainCols,
		d.OrganizationID, d.ID, string(d.Status), d.LastCheckedAt, d.VerifiedAt))
	return out, interpretErrorFor("inbound domain", err)
}

// SetInboundDomainStatus implements ports.InboundStore. Errors: not_found.
func (s *Inbound) SetInboundDomainStatus(ctx context.Context, orgID, id string, st ports.InboundDomainStatus) (ports.InboundDomain, error) {
	out, err := scanInboundDomain(s.pool.QueryRow(ctx, `UPDATE inbound_domains SET status = $3
		WHERE organization_id = $1 AND id = $2 RETURNING `+inboundDomainCols, orgID, id, string(st)))
	return out, interpretErrorFor("inbound domain", err)
}

// DeleteInboundDomain implements ports.InboundStore; its routes go with it. Errors: not_found.
func (s *Inbound) DeleteInboundDomain(ctx context.Context, orgID, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM inbound_domains WHERE organization_id = $1 AND id = $2`, orgID, id)
	if err != nil {
		return interpretErrorFor("inbound domain", err)
	}
	if tag.RowsAffected() == 0 {
		return ports.NotFound("inbound domain not found")
	}
	return nil
}

const routeCols = `id, organization_id, inbound_domain_id, match_type, match_value, action, destination, enabled, priority, created_at`

func scanRoute(row pgx.Row, extra ...any) (ports.InboundRoute, error) {
	var r ports.InboundRoute
	err := row.Scan(append([]any{&r.ID, &r.OrganizationID, &r.InboundDomainID, &r.MatchType, &r.MatchValue, &r.Action,
		&r.Destination, &r.Enabled, &r.Priority, &r.CreatedAt}, extra...)...)
	r.CreatedAt = r.CreatedAt.UTC()
	return r, err
}

// InsertRoute implements ports.InboundStore. Errors: not_found (no such domain in the organization).
func (s *Inbound) InsertRoute(ctx context.Context, r ports.InboundRoute) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO inbound_routes (`+routeCols+`, secret) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`,
		r.ID, r.OrganizationID, r.InboundDomainID, r.MatchType, r.MatchValue, r.Action, r.Destination, r.Enabled,
		r.Priority, r.CreatedAt, r.Secret)
	if err := interpretError(err); ports.ErrorCode(err) == ports.CodeInvalidArgument {
		// The domain went away between the core's check and the insert.
		return ports.NotFound("inbound domain not found")
	} else if err != nil {
		return err
	}
	return nil
}

// UpdateRoute implements ports.InboundStore: only the fields the patch sets change. Errors: not_found.
func (s *Inbound) UpdateRoute(ctx context.Context, orgID, id string, p ports.InboundRoutePatch) (ports.InboundRoute, error) {
	r, err := scanRoute(s.pool.QueryRow(ctx, `UPDATE inbound_routes SET enabled = COALESCE($3, enabled),
		priority = COALESCE($4, priority), destination = COALESCE($5, destination)
		WHERE organization_id = $1 AND id = $2 RETURNING `+routeCols, orgID, id, p.Enabled, p.Priority, p.Destination))
	return r, interpretErrorFor("inbound route", err)
}

// DeleteRoute implements ports.InboundStore and returns the deleted route. Errors: not_found.
func (s *Inbound) DeleteRoute(ctx context.Context, orgID, id string) (ports.InboundRoute, error) {
	r, err := scanRoute(s.pool.QueryRow(ctx, `DELETE FROM inbound_routes WHERE organization_id = $1 AND id = $2
		RETURNING `+routeCols, orgID, id))
	return r, interpretErrorFor("inbound route", err)
}

// GetRoute implements ports.InboundStore. Errors: not_found.
func (s *Inbound) GetRoute(ctx context.Context, orgID, id string) (ports.InboundRoute, error) {
	r, err := scanRoute(s.pool.QueryRow(ctx, `SELECT `+routeCols+` FROM inbound_routes WHERE organization_id = $1 AND id = $2`, orgID, id))
	return r, interpretErrorFor("inbound route", err)
}

// ListRoutes implements ports.InboundStore: oldest first.
func (s *Inbound) ListRoutes(ctx context.Context, orgID, domainID string) ([]ports.InboundRoute, error) {
	out := []ports.InboundRoute{}
	if !isUUID(orgID) || !isUUID(domainID) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+routeCols+` FROM inbound_routes WHERE organization_id = $1
		AND inbound_domain_id = $2 ORDER BY created_at, id`, orgID, domainID)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRoute(rows)
		if err != nil {
			return nil, interpretError(err)
		}
		out = append(out, r)
	}
	return out, interpretError(rows.Err())
}

// publishedInbound is local mode's view of the inbound domains among names: each with its MX pointing at the
// inbound MX host, so that verifying an inbound domain against local mode's DNS server passes.
func (s *LocalDNS) publishedInbound(ctx context.Context, names []string) ([]ports.PublishedDomain, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, mx_host, mx_priority FROM inbound_domains WHERE name = ANY($1)`, names)
	if err != nil {
		return nil, listError(err)
	}
	defer rows.Close()
	var out []ports.PublishedDomain
	for rows.Next() {
		var name, host string
		var prio int
		if err := rows.Scan(&name, &host, &prio); err != nil {
			return nil, interpretError(err)
		}
		out = append(out, ports.PublishedDomain{Name: name, MX: []ports.MX{{Host: host, Preference: uint16(prio)}}})
	}
	return out, listError(rows.Err())
}
