package postgres

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.MessageStore = (*Messages)(nil)

// Messages is the PostgreSQL store of messages, their recipients, attachments' metadata and timelines, the
// usage they meter and the suppressions the send path checks (ports.MessageStore). Concurrent sends share
// transactions (message_send.go). Safe for concurrent use.
type Messages struct {
	shared
	// sends groups concurrent InsertMessage calls of one organization and day into shared transactions.
	sends combiner[*pendingSend]
	// suppressed groups concurrent SuppressedAmong calls, of any organizations, into shared queries.
	suppressed combiner[*pendingSuppressed]
	// queue, when set, is the PostgreSQL delivery queue the send path writes its jobs into instead of
	// delivery_outbox (Store.EnqueueSendsOn).
	queue atomic.Pointer[Queue]
	// outboxAdded is the Store's Outbox.OutboxAdded channel: signalled after jobs were committed to
	// delivery_outbox (nil in a Messages made without New).
	outboxAdded chan struct{}
}

func newMessages(sh shared) *Messages {
	s := &Messages{shared: sh}
	s.sends = combiner[*pendingSend]{
		max:   maxSendGroup,
		write: func(group []*pendingSend) { s.writeSends(group, false) },
		key:   func(p *pendingSend) string { return p.key },
	}
	s.suppressed = combiner[*pendingSuppressed]{max: maxSuppressedGroup, write: s.readSuppressed}
	return s
}

// MessageByIdempotencyKey implements ports.MessageStore.
func (s *Messages) MessageByIdempotencyKey(ctx context.Context, orgID, key string) (string, ports.MessageStatus, error) {
	row, err := s.queries.MessageByIdempotencyKey(ctx, db.MessageByIdempotencyKeyParams{OrganizationID: orgID, IdempotencyKey: key})
	if err != nil {
		return "", "", interpretErrorFor("message", err)
	}
	return row.ID, ports.MessageStatus(row.Status), nil
}

// GetMessage implements ports.MessageStore: the message, its recipients (in request order), attachments
// and timeline (oldest first) are read in one round trip.
func (s *Messages) GetMessage(ctx context.Context, orgID, id string) (ports.Message, error) {
	var m ports.Message
	err := runPipeline(ctx, s.pool, readMessageSteps(ctx, orgID, id, &m)...)
	if err != nil {
		return ports.Message{}, interpretErrorFor("message", err)
	}
	return m, nil
}

// ListMessages implements ports.MessageStore: newest first by (createdAt, id), which stays stable while new
// messages arrive because the cursor names the last row seen rather than an offset. Items carry no bodies
// or headers but do carry their recipients' states. Errors: invalid_argument for a limit outside 1-100 or
// a cursor this store did not issue.
func (s *Messages) ListMessages(ctx context.Context, orgID string, q ports.ListEmailsQuery) (ports.EmailPage, error) {
	limit, beforeAt, beforeID, err := pageBounds(ports.PageQuery{Limit: q.Limit, Cursor: q.Cursor})
	if err != nil {
		return ports.EmailPage{}, err
	}
	rows, err := s.queries.ListMessages(ctx, db.ListMessagesParams{
		OrganizationID:  orgID,
		BeforeCreatedAt: beforeAt,
		BeforeID:        beforeID,
		Status:          string(q.Status),
		RowLimit:        int32(limit + 1), // one more tells whether another page exists
	})
	if err := listError(err); err != nil {
		return ports.EmailPage{}, err
	}
	var page ports.EmailPage
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = encodeCursor(last.CreatedAt, last.ID)
	}
	if len(rows) == 0 {
		page.Data = []ports.Message{}
		return page, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	recipients, err := s.queries.RecipientsOfMessages(ctx, db.RecipientsOfMessagesParams{OrganizationID: orgID, MessageIds: ids})
	if err != nil {
		return ports.EmailPage{}, interpretError(err)
	}
	byMessage := groupRecipients(recipients)
	page.Data = make([]ports.Message, len(rows))
	for i, r := range rows {
		page.Data[i] = ports.Message{
			ID:             r.ID,
			OrganizationID: r.OrganizationID,
			DomainID:       r.DomainID,
			Status:         ports.MessageStatus(r.Status),
			From:           r.FromAddress,
			ReplyTo:        r.ReplyTo,
			Subject:        r.Subject,
			Tags:           stringMap(r.Tags),
			Metadata:       rawJSON(r.Metadata),
			Sandbox:        r.Sandbox,
			ScheduledAt:    utcPtr(r.ScheduledAt),
			IdempotencyKey: r.IdempotencyKey.String,
			CreatedAt:      r.CreatedAt.UTC(),
			Recipients:     byMessage[r.ID],
		}
	}
	return page, nil
}

// CancelScheduled implements ports.MessageStore. Only a scheduled message is cancelled (SPEC §3); its
// recipients become cancelled with it and ev joins the timeline, in one transaction. Errors: not_found,
// failed_precondition for a message in any other state.
func (s *Messages) CancelScheduled(ctx context.Context, orgID, id string, ev ports.Event) (ports.Message, error) {
	var m ports.Message
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		n, err := q.CancelScheduledMessage(ctx, db.CancelScheduledMessageParams{OrganizationID: orgID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			status, err := q.MessageStatus(ctx, db.MessageStatusParams{OrganizationID: orgID, ID: id})
			if err != nil {
				return err
			}
			return ports.Errorf(ports.CodeFailedPrecondition, "message is %s; only a scheduled message can be cancelled", status)
		}
		events := insertEventsParams(eventsAbout([]ports.Event{ev}, orgID, id, ""))
		steps := []pipelineStep{
			func(q *db.Queries) error {
				return q.SetRecipientsStatusOfMessage(ctx, db.SetRecipientsStatusOfMessageParams{
					Status: string(ports.StatusCancelled), OrganizationID: orgID, MessageID: id,
				})
			},
			func(q *db.Queries) error { return q.InsertEvents(ctx, events) },
		}
		return runPipeline(ctx, tx, append(steps, readMessageSteps(ctx, orgID, id, &m)...)...)
	})
	if err != nil {
		return ports.Message{}, interpretErrorFor("message", err)
	}
	return m, nil
}

// PromoteDue implements ports.MessageStore. One transaction locks up to limit due scheduled messages with
// FOR UPDATE SKIP LOCKED — so schedulers in several processes take disjoint sets and none promotes a
// message twice — reads their recipients and organizations, asks decide for each, and writes the decided
// statuses (to the message and all its recipients), events and delivery jobs. decide sees the From domain's
// id and tracking settings only. The messages handed to
// decide carry their recipients but not their attachments or timeline. A status of "" from decide counts
// as queued. It returns how many messages left the scheduled state.
func (s *Messages) PromoteDue(ctx context.Context, now time.Time, limit int, decide func(ports.Message, ports.Organization, ports.Domain) (ports.MessageStatus, []ports.Event, []ports.DeliveryJob)) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	promoted, queued := 0, false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		due, err := q.DueScheduledMessages(ctx, db.DueScheduledMessagesParams{Now: now, RowLimit: clampInt32(limit)})
		if err != nil || len(due) == 0 {
			return err
		}
		ids := make([]string, len(due))
		for i, d := range due {
			ids[i] = d.Message.ID
		}
		recipients, err := q.RecipientsOfMessagesAnyOrg(ctx, ids)
		if err != nil {
			return err
		}
		byMessage := groupRecipients(recipients)

		statuses := db.SetPromotedStatusesParams{Ids: ids, Statuses: make([]string, len(due))}
		var events []ports.Event
		var jobs []ports.DeliveryJob
		for i, d := range due {
			m := messageFromRow(d.Message)
			m.Recipients = byMessage[m.ID]
			dom := ports.Domain{ID: m.DomainID, OrganizationID: m.OrganizationID, OpenTracking: d.OpenTracking, ClickTracking: d.ClickTracking}
			status, evs, js := decide(m, organizationFromRow(d.Organization), dom)
			if status == "" {
				status = ports.StatusQueued
			}
			statuses.Statuses[i] = string(status)
			events = append(events, eventsAbout(evs, m.OrganizationID, m.ID, "")...)
			for _, j := range js {
				jobs = append(jobs, jobOf(j, m.OrganizationID, m.ID))
			}
		}
		steps := []pipelineStep{func(q *db.Queries) error { return q.SetPromotedStatuses(ctx, statuses) }}
		if len(events) > 0 {
			p := insertEventsParams(events)
			steps = append(steps, func(q *db.Queries) error { return q.InsertEvents(ctx, p) })
		}
		if len(jobs) > 0 {
			p := insertOutboxParams(jobs)
			steps = append(steps, func(q *db.Queries) error { return q.InsertOutboxJobs(ctx, p) })
		}
		if err := runPipeline(ctx, tx, steps...); err != nil {
			return err
		}
		promoted, queued = len(due), len(jobs) > 0
		return nil
	})
	if err != nil {
		return 0, interpretError(err)
	}
	if queued {
		signalOutbox(s.outboxAdded)
	}
	return promoted, nil
}

// readMessageSteps reads a whole message into m: the row, recipients, attachments and events. The message
// row comes first, so a missing message ends the pipeline with pgx.ErrNoRows.
func readMessageSteps(ctx context.Context, orgID, id string, m *ports.Message) []pipelineStep {
	return []pipelineStep{
		func(q *db.Queries) error {
			row, err := q.MessageByID(ctx, db.MessageByIDParams{OrganizationID: orgID, ID: id})
			*m = messageFromRow(row)
			return err
		},
		func(q *db.Queries) error {
			rows, err := q.RecipientsByMessage(ctx, db.RecipientsByMessageParams{OrganizationID: orgID, MessageID: id})
			m.Recipients = recipientsFromRows(rows)
			return err
		},
		func(q *db.Queries) error {
			rows, err := q.AttachmentsByMessage(ctx, db.AttachmentsByMessageParams{OrganizationID: orgID, MessageID: id})
			m.Attachments = attachmentsFromRows(rows)
			return err
		},
		func(q *db.Queries) error {
			rows, err := q.EventsByMessage(ctx, db.EventsByMessageParams{OrganizationID: orgID, MessageID: id})
			m.Events = make([]ports.Event, len(rows))
			for i, r := range rows {
				m.Events[i] = ports.Event{
					ID:               r.ID,
					OrganizationID:   r.OrganizationID,
					Type:             r.Type,
					MessageID:        r.MessageID,
					RecipientID:      r.RecipientID,
					DomainID:         r.DomainID,
					ProviderResponse: textPtr(r.ProviderResponse),
					OccurredAt:       r.OccurredAt.UTC(),
				}
			}
			return err
		},
	}
}

func messageFromRow(r db.Message) ports.Message {
	return ports.Message{
		ID:             r.ID,
		OrganizationID: r.OrganizationID,
		DomainID:       r.DomainID,
		Status:         ports.MessageStatus(r.Status),
		From:           r.FromAddress,
		Subject:        r.Subject,
		HTML:           r.HtmlBody,
		Text:           r.TextBody,
		ReplyTo:        r.ReplyTo,
		Headers:        stringMap(r.Headers),
		Tags:           stringMap(r.Tags),
		Metadata:       rawJSON(r.Metadata),
		Sandbox:        r.Sandbox,
		ScheduledAt:    utcPtr(r.ScheduledAt),
		IdempotencyKey: r.IdempotencyKey.String,
		CreatedAt:      r.CreatedAt.UTC(),
	}
}

func recipientsFromRows(rows []db.Recipient) []ports.Recipient {
	out := make([]ports.Recipient, len(rows))
	for i, r := range rows {
		out[i] = ports.Recipient{ID: r.ID, Type: r.Type, Address: r.Address, Name: r.Name, Status: ports.MessageStatus(r.Status)}
	}
	return out
}

// groupRecipients splits rows ordered by (message_id, position) per message.
func groupRecipients(rows []db.Recipient) map[string][]ports.Recipient {
	out := make(map[string][]ports.Recipient)
	for _, r := range rows {
		out[r.MessageID] = append(out[r.MessageID], ports.Recipient{
			ID: r.ID, Type: r.Type, Address: r.Address, Name: r.Name, Status: ports.MessageStatus(r.Status),
		})
	}
	return out
}

func attachmentsFromRows(rows []db.Attachment) []ports.StoredAttachment {
	out := make([]ports.StoredAttachment, len(rows))
	for i, a := range rows {
		out[i] = ports.StoredAttachment{
			ID:          a.ID,
			Filename:    a.Filename,
			ContentType: a.ContentType,
			Size:        a.Size,
			Inline:      a.Inline,
			ContentID:   a.ContentID,
			Key:         a.StorageKey,
		}
	}
	return out
}

// addressDomain is the lower-cased part after the last "@" (a quoted local part may itself hold "@").
func addressDomain(address string) string {
	return strings.ToLower(address[strings.LastIndexByte(address, '@')+1:])
}
