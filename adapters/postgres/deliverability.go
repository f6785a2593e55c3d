package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.DeliverabilityStore = (*Deliverability)(nil)

// Deliverability is the PostgreSQL store of suppressions, bounces, complaints and the feedback applied to
// messages (ports.DeliverabilityStore). Safe for concurrent use.
type Deliverability struct{ shared }

// InsertSuppression implements ports.DeliverabilityStore. A row of the same organization (or none, for
// global), address and scope is returned unchanged instead of a second one.
func (s *Deliverability) InsertSuppression(ctx context.Context, sup ports.Suppression) (ports.Suppression, error) {
	p := insertSuppressionsParams([]ports.Suppression{sup})
	row, err := s.queries.InsertSuppressionReturning(ctx, db.InsertSuppressionReturningParams{
		ID:             p.Ids[0],
		OrganizationID: p.OrganizationIds[0],
		Address:        p.Addresses[0],
		Scope:          p.Scopes[0],
		Reason:         p.Reasons[0],
		CreatedAt:      p.CreatedAt[0],
	})
	if err != nil {
		return ports.Suppression{}, interpretError(err)
	}
	return suppressionFromFields(row.ID, row.OrganizationID, row.Address, row.Scope, row.Reason, row.CreatedAt), nil
}

// DeleteSuppression implements ports.DeliverabilityStore; orgID "" deletes a global row only.
func (s *Deliverability) DeleteSuppression(ctx context.Context, orgID, id string) (bool, error) {
	if !isUUID(id) || (orgID != "" && !isUUID(orgID)) {
		return false, nil
	}
	n, err := s.queries.DeleteSuppression(ctx, db.DeleteSuppressionParams{OrganizationID: orgID, ID: id})
	if err != nil {
		return false, interpretError(err)
	}
	return n > 0, nil
}

// ListBounces implements ports.DeliverabilityStore with keyset paging on (created_at, id).
func (s *Deliverability) ListBounces(ctx context.Context, orgID string, q ports.PageQuery) (ports.BouncePage, error) {
	limit, beforeAt, beforeID, err := pageBounds(q)
	if err != nil {
		return ports.BouncePage{}, err
	}
	rows, err := s.queries.ListBounces(ctx, db.ListBouncesParams{
		OrganizationID: orgID, BeforeCreatedAt: beforeAt, BeforeID: beforeID, RowLimit: int32(limit + 1),
	})
	if err := listError(err); err != nil {
		return ports.BouncePage{}, err
	}
	page := ports.BouncePage{Data: []ports.Bounce{}}
	if len(rows) > limit {
		rows = rows[:limit]
		page.NextCursor = encodeCursor(rows[limit-1].CreatedAt, rows[limit-1].ID)
	}
	for _, r := range rows {
		page.Data = append(page.Data, ports.Bounce{
			ID: r.ID, OrganizationID: r.OrganizationID, MessageID: r.MessageID, RecipientID: r.RecipientID,
			Address: r.Address, Type: r.Type, Class: r.Class, Status: r.Status, Action: r.Action, DiagnosticCode: r.DiagnosticCode,
			RemoteMTA: r.RemoteMta, ReportingMTA: r.ReportingMta, CreatedAt: r.CreatedAt.UTC(),
		})
	}
	return page, nil
}

// ListComplaints implements ports.DeliverabilityStore with keyset paging on (created_at, id).
func (s *Deliverability) ListComplaints(ctx context.Context, orgID string, q ports.PageQuery) (ports.ComplaintPage, error) {
	limit, beforeAt, beforeID, err := pageBounds(q)
	if err != nil {
		return ports.ComplaintPage{}, err
	}
	rows, err := s.queries.ListComplaints(ctx, db.ListComplaintsParams{
		OrganizationID: orgID, BeforeCreatedAt: beforeAt, BeforeID: beforeID, RowLimit: int32(limit + 1),
	})
	if err := listError(err); err != nil {
		return ports.ComplaintPage{}, err
	}
	page := ports.ComplaintPage{Data: []ports.Complaint{}}
	if len(rows) > limit {
		rows = rows[:limit]
		page.NextCursor = encodeCursor(rows[limit-1].CreatedAt, rows[limit-1].ID)
	}
	for _, r := range rows {
		page.Data = append(page.Data, ports.Complaint{
			ID: r.ID, OrganizationID: r.OrganizationID, MessageID: r.MessageID, RecipientID: r.RecipientID,
			Address: r.Address, FeedbackType: r.FeedbackType, UserAgent: r.UserAgent,
			ReportedDomain: r.ReportedDomain, SourceIP: r.SourceIp, ArrivalDate: utcPtr(r.ArrivalDate),
			CreatedAt: r.CreatedAt.UTC(),
		})
	}
	return page, nil
}

// RecipientByID implements ports.DeliverabilityStore. Errors: not_found.
func (s *Deliverability) RecipientByID(ctx context.Context, recipientID string) (ports.RecipientRef, error) {
	if !isUUID(recipientID) {
		return ports.RecipientRef{}, ports.NotFound("recipient not found")
	}
	r, err := s.queries.RecipientByID(ctx, recipientID)
	if err != nil {
		return ports.RecipientRef{}, interpretErrorFor("recipient", err)
	}
	return ports.RecipientRef{OrganizationID: r.OrganizationID, MessageID: r.MessageID, RecipientID: r.ID, Address: r.Address}, nil
}

// MessageOrganization implements ports.DeliverabilityStore. Errors: not_found.
func (s *Deliverability) MessageOrganization(ctx context.Context, messageID string) (string, error) {
	if !isUUID(messageID) {
		return "", ports.NotFound("message not found")
	}
	org, err := s.queries.MessageOrganization(ctx, messageID)
	if err != nil {
		return "", interpretErrorFor("message", err)
	}
	return org, nil
}

// ApplyFeedback implements ports.DeliverabilityStore: the message row is locked (the same lock delivery
// outcomes take, so a DSN and a delivery report of one message never interleave), decide sees the
// recipients as they are, and its result is written in the same transaction. An empty result writes
// nothing.
func (s *Deliverability) ApplyFeedback(ctx context.Context, orgID, messageID string, decide func([]ports.Recipient) ports.FeedbackApplication) error {
	if !isUUID(messageID) || !isUUID(orgID) {
		return ports.NotFound("message not found")
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var current []ports.Recipient
		err := runPipeline(ctx, tx,
			func(q *db.Queries) error {
				_, err := q.LockMessage(ctx, db.LockMessageParams{OrganizationID: orgID, ID: messageID})
				return err
			},
			func(q *db.Queries) error {
				rows, err := q.RecipientsByMessage(ctx, db.RecipientsByMessageParams{OrganizationID: orgID, MessageID: messageID})
				current = recipientsFromRows(rows)
				return err
			})
		if err != nil {
			return err
		}
		a := decide(current)
		if len(a.Recipients) == 0 && len(a.Events) == 0 && len(a.Bounces) == 0 && len(a.Complaints) == 0 && len(a.Suppressions) == 0 {
			return nil
		}
		if a.ReportID != "" {
			// Report ids share applied_jobs with delivery job ids (both UUIDs, both pruned after a day).
			inserted, err := s.queries.WithTx(tx).InsertAppliedJob(ctx, a.ReportID)
			if err != nil || inserted == 0 {
				return err
			}
		}
		var steps []pipelineStep
		if len(a.Recipients) > 0 {
			p := db.SetRecipientStatusesParams{OrganizationID: orgID, MessageID: messageID}
			statuses := make([]ports.MessageStatus, len(current))
			for i, r := range current {
				statuses[i] = r.Status
				if st, ok := a.Recipients[r.ID]; ok {
					p.Ids = append(p.Ids, r.ID)
					p.Statuses = append(p.Statuses, string(st))
					statuses[i] = st
				}
			}
			steps = append(steps, func(q *db.Queries) error { return q.SetRecipientStatuses(ctx, p) })
			if derived := ports.DeriveMessageStatus(statuses); derived != "" {
				steps = append(steps, func(q *db.Queries) error {
					return q.SetMessageStatus(ctx, db.SetMessageStatusParams{Status: string(derived), OrganizationID: orgID, ID: messageID})
				})
			}
		}
		if len(a.Events) > 0 {
			p := insertEventsParams(eventsAbout(a.Events, orgID, messageID, ""))
			steps = append(steps, func(q *db.Queries) error { return q.InsertEvents(ctx, p) })
		}
		if len(a.Suppressions) > 0 {
			p := insertSuppressionsParams(a.Suppressions)
			steps = append(steps, func(q *db.Queries) error { return q.InsertSuppressions(ctx, p) })
		}
		if len(a.Bounces) > 0 {
			p := insertBouncesParams(a.Bounces, orgID, messageID)
			steps = append(steps, func(q *db.Queries) error { return q.InsertBounces(ctx, p) })
		}
		if len(a.Complaints) > 0 {
			p := insertComplaintsParams(a.Complaints, orgID, messageID)
			steps = append(steps, func(q *db.Queries) error { return q.InsertComplaints(ctx, p) })
		}
		return runPipeline(ctx, tx, steps...)
	})
	return interpretErrorFor("message", err)
}

// bouncesAbout fills in the organization and message a batch of bounces belongs to.
func bouncesAbout(bounces []ports.Bounce, orgID, messageID string) []ports.Bounce {
	out := make([]ports.Bounce, len(bounces))
	for i, b := range bounces {
		if b.OrganizationID == "" {
			b.OrganizationID = orgID
		}
		if b.MessageID == "" {
			b.MessageID = messageID
		}
		out[i] = b
	}
	return out
}

// insertBouncesParams lays bounces out as parallel arrays; empty organization and message ids are filled
// from orgID and messageID, missing ids and times generated.
func insertBouncesParams(bounces []ports.Bounce, orgID, messageID string) db.InsertBouncesParams {
	var p db.InsertBouncesParams
	for _, b := range bouncesAbout(bounces, orgID, messageID) {
		at := b.CreatedAt
		if at.IsZero() {
			at = time.Now()
		}
		p.Ids = append(p.Ids, idOrNew(b.ID))
		p.OrganizationIds = append(p.OrganizationIds, b.OrganizationID)
		p.MessageIds = append(p.MessageIds, b.MessageID)
		p.RecipientIds = append(p.RecipientIds, b.RecipientID)
		p.Addresses = append(p.Addresses, b.Address)
		p.Types = append(p.Types, b.Type)
		p.Classes = append(p.Classes, b.Class)
		p.Statuses = append(p.Statuses, b.Status)
		p.Actions = append(p.Actions, b.Action)
		p.DiagnosticCodes = append(p.DiagnosticCodes, b.DiagnosticCode)
		p.RemoteMtas = append(p.RemoteMtas, b.RemoteMTA)
		p.ReportingMtas = append(p.ReportingMtas, b.ReportingMTA)
		p.CreatedAt = append(p.CreatedAt, at)
	}
	return p
}

func insertComplaintsParams(complaints []ports.Complaint, orgID, messageID string) db.InsertComplaintsParams {
	var p db.InsertComplaintsParams
	for _, c := range complaints {
		if c.OrganizationID == "" {
			c.OrganizationID = orgID
		}
		if c.MessageID == "" {
			c.MessageID = messageID
		}
		at := c.CreatedAt
		if at.IsZero() {
			at = time.Now()
		}
		p.Ids = append(p.Ids, idOrNew(c.ID))
		p.OrganizationIds = append(p.OrganizationIds, c.OrganizationID)
		p.MessageIds = append(p.MessageIds, c.MessageID)
		p.RecipientIds = append(p.RecipientIds, c.RecipientID)
		p.Addresses = append(p.Addresses, c.Address)
		p.FeedbackTypes = append(p.FeedbackTypes, c.FeedbackType)
		p.UserAgents = append(p.UserAgents, c.UserAgent)
		p.ReportedDomains = append(p.ReportedDomains, c.ReportedDomain)
		p.SourceIps = append(p.SourceIps, c.SourceIP)
		if c.ArrivalDate != nil {
			p.HasArrivals = append(p.HasArrivals, true)
			p.ArrivalDates = append(p.ArrivalDates, *c.ArrivalDate)
		} else {
			p.HasArrivals = append(p.HasArrivals, false)
			p.ArrivalDates = append(p.ArrivalDates, time.Time{})
		}
		p.CreatedAt = append(p.CreatedAt, at)
	}
	return p
}
func suppressionFromFields(id, orgID, address, scope, reason string, at time.Time) ports.Suppression {
	return ports.Suppression{ID: id, OrganizationID: orgID, Address: address, Scope: scope, Reason: reason, CreatedAt: at.UTC()}
}
