package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.ReputationStore = (*Reputation)(nil)

// Reputation is the PostgreSQL store of reputation (ports.ReputationStore): it counts from the events,
// bounces and complaints tables as they are, with no rollup of its own, and keeps the protection and warm-up
// state in reputation_protection. Safe for concurrent use.
type Reputation struct{ shared }

// ReputationDays implements ports.ReputationStore.
func (s *Reputation) ReputationDays(ctx context.Context, orgID string, since time.Time) ([]ports.DomainDay, error) {
	rows, err := s.queries.ReputationDays(ctx, db.ReputationDaysParams{OrganizationID: orgID, Since: since})
	if err := listError(err); err != nil {
		return nil, err
	}
	out := make([]ports.DomainDay, 0, len(rows))
	for _, r := range rows {
		out = append(out, ports.DomainDay{Domain: r.Domain, ReputationDay: ports.ReputationDay{
			Date: r.Day.UTC(), Sent: r.Sent, Delivered: r.Delivered, HardBounced: r.HardBounced,
			SoftBounced: r.SoftBounced, Complained: r.Complained,
		}})
	}
	return out, nil
}

// BounceClassCounts implements ports.ReputationStore. Bounces recorded before classes existed count under
// their type (hard, soft).
func (s *Reputation) BounceClassCounts(ctx context.Context, orgID string, since time.Time) ([]ports.BounceClassCount, error) {
	rows, err := s.queries.BounceClassCounts(ctx, db.BounceClassCountsParams{OrganizationID: orgID, Since: since})
	if err := listError(err); err != nil {
		return nil, err
	}
	out := make([]ports.BounceClassCount, 0, len(rows))
	for _, r := range rows {
		out = append(out, ports.BounceClassCount{Domain: r.Domain, Class: r.Class, Count: r.Count})
	}
	return out, nil
}

// Protection implements ports.ReputationStore.
func (s *Reputation) Protection(ctx context.Context, orgID string) (ports.Protection, error) {
	r, err := s.queries.ReputationProtection(ctx, orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return ports.Protection{}, nil
	}
	if err := listError(err); err != nil {
		return ports.Protection{}, err
	}
	return ports.Protection{BroadcastsPaused: r.BroadcastsPaused, Reason: r.PausedReason, PausedAt: utcPtr(r.PausedAt)}, nil
}

// SetBroadcastsPaused implements ports.ReputationStore; an unknown organization is not_found.
func (s *Reputation) SetBroadcastsPaused(ctx context.Context, orgID string, paused bool, reason string, now time.Time) (ports.Protection, error) {
	p := db.SetBroadcastsPausedParams{OrganizationID: orgID, Paused: paused, Reason: reason, Now: now}
	if paused {
		p.PausedAt = &now
	}
	r, err := s.queries.SetBroadcastsPaused(ctx, p)
	if err != nil {
		return ports.Protection{}, missingOrganization(err)
	}
	return ports.Protection{BroadcastsPaused: r.BroadcastsPaused, Reason: r.PausedReason, PausedAt: utcPtr(r.PausedAt)}, nil
}

// OrganizationsHealth implements ports.ReputationStore.
func (s *Reputation) OrganizationsHealth(ctx context.Context, since time.Time) ([]ports.OrganizationHealth, error) {
	rows, err := s.queries.OrganizationsHealth(ctx, since)
	if err := listError(err); err != nil {
		return nil, err
	}
	out := make([]ports.OrganizationHealth, 0, len(rows))
	for _, r := range rows {
		h := ports.OrganizationHealth{
			OrganizationID: r.ID, Name: r.Name, Sent: r.Sent, Delivered: r.Delivered, HardBounced: r.HardBounced,
			Complained: r.Complained, WarmupCap: r.WarmupCap,
			Protection: ports.Protection{BroadcastsPaused: r.BroadcastsPaused, Reason: r.PausedReason, PausedAt: utcPtr(r.PausedAt)},
		}
		if r.WarmupStepOn.Valid {
			d := r.WarmupStepOn.Time.UTC()
			h.WarmupStepOn = &d
		}
		out = append(out, h)
	}
	return out, nil
}

// StepWarmup implements ports.ReputationStore: the step day and the cap change in one statement, and only
// when no step was recorded for day or later, so concurrent processes step an organization once a day.
// The cap's update is announced to every process's send path by the trigger on organizations.
func (s *Reputation) StepWarmup(ctx context.Context, orgID string, newCap int64, day, now time.Time) (bool, error) {
	n, err := s.queries.StepWarmup(ctx, db.StepWarmupParams{
		WarmupCap: newCap, OrganizationID: orgID, Day: pgtype.Date{Time: day.UTC(), Valid: true}, Now: now,
	})
	if err != nil {
		return false, missingOrganization(err)
	}
	return n > 0, nil
}

func missingOrganization(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateForeignKeyViolation {
		return ports.NotFound("organization not found")
	}
	return interpretErrorFor("organization", err)
}

// QueueDepths implements ports.ReputationStore. With the Kafka queue the delivery_queue table is empty and
// only the outbox is counted.
func (s *Reputation) QueueDepths(ctx context.Context, limit int) ([]ports.QueueDepth, error) {
	rows, err := s.queries.QueueDepths(ctx, int32(limit))
	if err := listError(err); err != nil {
		return nil, err
	}
	out := make([]ports.QueueDepth, 0, len(rows))
	for _, r := range rows {
		oldest := r.OldestQueuedAt.UTC()
		out = append(out, ports.QueueDepth{Domain: r.Domain, Queued: r.Queued, Leased: r.Leased, Outbox: r.Outbox, OldestQueuedAt: &oldest})
	}
	return out, nil
}
