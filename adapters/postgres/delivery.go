package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.DeliveryStore = (*Store)(nil)

// OutboundData implements ports.DeliveryStore: the message with all its recipients (in request order) and
// attachments, and its From domain with the sealed DKIM key, in one round trip. The caller picks the
// job's recipients and decides what a cancelled message means. Errors: not_found.
func (s *Store) OutboundData(ctx context.Context, orgID, messageID string) (ports.Message, ports.Domain, error) {
	var m ports.Message
	var d ports.Domain
	err := runPipeline(ctx, s.pool,
		func(q *db.Queries) error {
			row, err := q.OutboundMessage(ctx, db.OutboundMessageParams{OrganizationID: orgID, ID: messageID})
			m, d = messageFromRow(row.Message), domainFromRow(row.Domain)
			return err
		},
		func(q *db.Queries) error {
			rows, err := q.RecipientsByMessage(ctx, db.RecipientsByMessageParams{OrganizationID: orgID, MessageID: messageID})
			m.Recipients = recipientsFromRows(rows)
			return err
		},
		func(q *db.Queries) error {
			rows, err := q.AttachmentsByMessage(ctx, db.AttachmentsByMessageParams{OrganizationID: orgID, MessageID: messageID})
			m.Attachments = attachmentsFromRows(rows)
			return err
		},
	)
	if err != nil {
		return ports.Message{}, ports.Domain{}, interpretErrorFor("message", err)
	}
	return m, d, nil
}

// errAlreadyApplied rolls back an application whose job id was applied before.
var errAlreadyApplied = errors.New("postgres: delivery already applied")

// ApplyDelivery implements ports.DeliveryStore in one transaction, once per job id: the job id goes into
// applied_jobs first, and when it is already there (a redelivered job, or a concurrent application of the
// same job, which this one waits for) nothing is written and applied is false.
//
// The message row is then locked, so applications of different jobs of one message (one job per
// recipient domain) run one after the other. That is what makes a.MessageStatus == "" safe: the store then
// reads every recipient's state after this job's updates, under the lock, and derives the message status
// with messageStatusOf. A status the caller computed before the transaction may be stale when another job
// of the same message is applied concurrently.
//
// Then recipient statuses, the message status, events, suppressions (idempotent as in AddSuppression) and
// the retry job are written. Errors: not_found when the message is not the organization's.
func (s *Store) ApplyDelivery(ctx context.Context, a ports.DeliveryApplication) (bool, error) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var inserted int64
		err := runPipeline(ctx, tx,
			func(q *db.Queries) (err error) {
				inserted, err = q.InsertAppliedJob(ctx, a.JobID)
				return err
			},
			func(q *db.Queries) error {
				_, err := q.LockMessage(ctx, db.LockMessageParams{OrganizationID: a.OrganizationID, ID: a.MessageID})
				return err
			},
		)
		if err != nil {
			return err
		}
		if inserted == 0 {
			return errAlreadyApplied
		}

		var steps []pipelineStep
		if len(a.Recipients) > 0 {
			p := db.SetRecipientStatusesParams{OrganizationID: a.OrganizationID, MessageID: a.MessageID}
			for id, status := range a.Recipients {
				p.Ids = append(p.Ids, id)
				p.Statuses = append(p.Statuses, string(status))
			}
			steps = append(steps, func(q *db.Queries) error { return q.SetRecipientStatuses(ctx, p) })
		}
		if a.MessageStatus != "" {
			steps = append(steps, setMessageStatusStep(ctx, a, a.MessageStatus))
		}
		var recipientStatuses []string
		if a.MessageStatus == "" {
			steps = append(steps, func(q *db.Queries) (err error) {
				recipientStatuses, err = q.RecipientStatuses(ctx, db.RecipientStatusesParams{OrganizationID: a.OrganizationID, MessageID: a.MessageID})
				return err
			})
		}
		if len(a.Events) > 0 {
			p := insertEventsParams(eventsAbout(a.Events, a.OrganizationID, a.MessageID, ""))
			steps = append(steps, func(q *db.Queries) error { return q.InsertEvents(ctx, p) })
		}
		if len(a.Suppressions) > 0 {
			p := insertSuppressionsParams(a.Suppressions)
			steps = append(steps, func(q *db.Queries) error { return q.InsertSuppressions(ctx, p) })
		}
		if a.Retry != nil {
			p := insertOutboxParams([]ports.DeliveryJob{jobOf(*a.Retry, a.OrganizationID, a.MessageID)})
			steps = append(steps, func(q *db.Queries) error { return q.InsertOutboxJobs(ctx, p) })
		}
		if len(steps) > 0 {
			if err := runPipeline(ctx, tx, steps...); err != nil {
				return err
			}
		}
		if a.MessageStatus == "" {
			statuses := make([]ports.MessageStatus, len(recipientStatuses))
			for i, st := range recipientStatuses {
				statuses[i] = ports.MessageStatus(st)
			}
			if derived := ports.DeriveMessageStatus(statuses); derived != "" {
				return runPipeline(ctx, tx, setMessageStatusStep(ctx, a, derived))
			}
		}
		return nil
	})
	if errors.Is(err, errAlreadyApplied) {
		return false, nil
	}
	if err != nil {
		return false, interpretErrorFor("message", err)
	}
	return true, nil
}

func setMessageStatusStep(ctx context.Context, a ports.DeliveryApplication, status ports.MessageStatus) pipelineStep {
	return func(q *db.Queries) error {
		return q.SetMessageStatus(ctx, db.SetMessageStatusParams{Status: string(status), OrganizationID: a.OrganizationID, ID: a.MessageID})
	}
}


