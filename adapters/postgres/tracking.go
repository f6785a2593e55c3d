package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.TrackingStore = (*Tracking)(nil)

// Tracking is the PostgreSQL store of open and click engagement (ports.TrackingStore). Safe for concurrent
// use.
type Tracking struct{ shared }

// MessageHTML implements ports.TrackingStore. Errors: not_found.
func (s *Tracking) MessageHTML(ctx context.Context, orgID, messageID string) (string, error) {
	if !isUUID(orgID) || !isUUID(messageID) {
		return "", ports.NotFound("message not found")
	}
	html, err := s.queries.MessageHTML(ctx, db.MessageHTMLParams{OrganizationID: orgID, ID: messageID})
	if err != nil {
		return "", interpretErrorFor("message", err)
	}
	return html, nil
}

// RecordEngagement implements ports.TrackingStore. Under the message's lock (the one delivery outcomes and
// feedback take) it checks "once" against earlier events of the type, moves the recipient forward when
// ports.EngagementAdvances allows, derives the message status again and writes the event, in one
// transaction. Two opens racing for the first place are serialised by the lock: exactly one is recorded.
func (s *Tracking) RecordEngagement(ctx context.Context, ev ports.Event, once bool) (bool, error) {
	if !isUUID(ev.OrganizationID) || !isUUID(ev.MessageID) {
		return false, ports.NotFound("message not found")
	}
	status, ok := strings.CutPrefix(ev.Type, "email.")
	if !ok {
		return false, ports.Errorf(ports.CodeInvalidArgument, "not an engagement event: %q", ev.Type)
	}
	next := ports.MessageStatus(status)
	recorded := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			current []ports.Recipient
			seen    bool
		)
		steps := []pipelineStep{
			func(q *db.Queries) error {
				_, err := q.LockMessage(ctx, db.LockMessageParams{OrganizationID: ev.OrganizationID, ID: ev.MessageID})
				return err
			},
			func(q *db.Queries) error {
				rows, err := q.RecipientsByMessage(ctx, db.RecipientsByMessageParams{OrganizationID: ev.OrganizationID, MessageID: ev.MessageID})
				current = recipientsFromRows(rows)
				return err
			},
		}
		if once {
			steps = append(steps, func(q *db.Queries) (err error) {
				seen, err = q.MessageHasEvent(ctx, db.MessageHasEventParams{OrganizationID: ev.OrganizationID, MessageID: ev.MessageID, Type: ev.Type})
				return err
			})
		}
		if err := runPipeline(ctx, tx, steps...); err != nil {
			return err
		}
		// The event is written once per message when once is set; the recipient's own state still moves, so
		// that a message whose every recipient opened is "opened" although only the first open made an event.
		steps = nil
		if !seen {
			steps = append(steps, func(q *db.Queries) error {
				return q.InsertEvents(ctx, insertEventsParams([]ports.Event{ev}))
			})
		}
		statuses := make([]ports.MessageStatus, len(current))
		moved := false
		for i, r := range current {
			statuses[i] = r.Status
			if r.ID == ev.RecipientID && ports.EngagementAdvances(r.Status, next) {
				statuses[i], moved = next, true
			}
		}
		if moved {
			p := db.SetRecipientStatusesParams{
				OrganizationID: ev.OrganizationID, MessageID: ev.MessageID,
				Ids: []string{ev.RecipientID}, Statuses: []string{string(next)},
			}
			steps = append(steps, func(q *db.Queries) error { return q.SetRecipientStatuses(ctx, p) })
			if derived := ports.DeriveMessageStatus(statuses); derived != "" {
				steps = append(steps, func(q *db.Queries) error {
					return q.SetMessageStatus(ctx, db.SetMessageStatusParams{Status: string(derived), OrganizationID: ev.OrganizationID, ID: ev.MessageID})
				})
			}
		}
		if len(steps) == 0 {
			return nil
		}
		if err := runPipeline(ctx, tx, steps...); err != nil {
			return err
		}
		recorded = !seen
		return nil
	})
	if err != nil {
		return false, interpretErrorFor("message", err)
	}
	return recorded, nil
}
