package postgres

import (
	"context"
	"time"

	"github.com/postmill/postmill/ports"
)

var _ ports.HeldDeliveries = (*Delivery)(nil)

// The held-delivery statements belong in queries/delivery.sql beside the other delivery queries; they are
// written here while the sqlc queries are being reorganised, so that generated files other work
// regenerates stay untouched.
const (
	holdSQL = `
INSERT INTO delivery_held (id, organization_id, message_id, domain, recipient_ids, attempt, first_queued_at,
    not_before, domain_id, reason, held_at, bulk)
VALUES ($1, $2, $3, $4, $5::uuid[], $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (id) DO NOTHING`

	heldGroupsSQL = `
SELECT organization_id::text, domain_id::text, count(*)
FROM delivery_held
GROUP BY organization_id, domain_id
ORDER BY min(held_at), organization_id, domain_id
LIMIT $1`

	// releaseSQL moves the oldest held jobs of one organization and sending domain to the outbox in one
	// statement: SKIP LOCKED lets releases in several processes take disjoint rows, and a job id the
	// outbox still holds (a relay that published without committing) is not written twice.
	releaseSQL = `
WITH moved AS (
    DELETE FROM delivery_held
    WHERE id IN (
        SELECT h.id FROM delivery_held h
        WHERE h.organization_id = $1 AND h.domain_id = $2
        ORDER BY h.held_at, h.id
        LIMIT $4
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id, organization_id, message_id, domain, recipient_ids, attempt, first_queued_at, held_at, bulk
), released AS (
    INSERT INTO delivery_outbox (id, organization_id, message_id, domain, recipient_ids, attempt, first_queued_at, not_before, bulk)
    SELECT m.id, m.organization_id, m.message_id, m.domain, m.recipient_ids, m.attempt,
        m.first_queued_at + GREATEST($3::timestamptz - m.held_at, interval '0'), $3::timestamptz, m.bulk
    FROM moved m
    ON CONFLICT (id) DO NOTHING
)
SELECT count(*) FROM moved`
)

// HoldDelivery implements ports.HeldDeliveries. A job id already held is kept as it is; a job keeps its
// lane (Bulk) through the hold.
func (s *Delivery) HoldDelivery(ctx context.Context, h ports.HeldJob) error {
	j := h.Job
	ids := j.RecipientIDs
	if ids == nil {
		ids = []string{}
	}
	_, err := s.pool.Exec(ctx, holdSQL, j.ID, j.OrganizationID, j.MessageID, j.Domain, ids, int32(max(j.Attempt, 1)),
		j.FirstQueuedAt, j.NotBefore, h.DomainID, string(h.Reason), h.HeldAt, j.Bulk)
	return interpretError(err)
}

// HeldGroups implements ports.HeldDeliveries.
func (s *Delivery) HeldGroups(ctx context.Context, limit int) ([]ports.HeldGroup, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, heldGroupsSQL, clampInt32(limit))
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var out []ports.HeldGroup
	for rows.Next() {
		var g ports.HeldGroup
		var n int64
		if err := rows.Scan(&g.OrganizationID, &g.DomainID, &n); err != nil {
			return nil, interpretError(err)
		}
		g.Jobs = int(n)
		out = append(out, g)
	}
	return out, interpretError(rows.Err())
}

// ReleaseHeld implements ports.HeldDeliveries.
func (s *Delivery) ReleaseHeld(ctx context.Context, orgID, domainID string, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int64
	if err := s.pool.QueryRow(ctx, releaseSQL, orgID, domainID, now, clampInt32(limit)).Scan(&n); err != nil {
		return 0, interpretError(err)
	}
	return int(n), nil
}
