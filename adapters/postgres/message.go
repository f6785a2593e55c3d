package postgres

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.MessageStore = (*Store)(nil)

// MetricEmailsSentDaily is the usage meter of the daily warm-up cap: one row per organization and UTC day,
// next to ports.MetricEmailsSent's row per calendar month.
const MetricEmailsSentDaily = "emails_sent_daily"

// Pagination bounds of GET /v1/emails (SPEC §8).
const (
	defaultListLimit = 25
	maxListLimit     = 100
)

// InsertMessage implements ports.MessageStore: the message, its recipients, attachment metadata, events and
// delivery jobs are written and its units metered in one transaction, or, when a limit would be passed,
// nothing is written and the error is payment_required (plan_limit_exceeded, Fields metric and limit) or
// resource_exhausted (warmup_cap_reached) as SPEC §7 words them.
//
// Every send of an organization must lock that organization's usage rows (the month's and the day's) until
// its transaction commits, which includes the WAL flush; one send per flush would cap an organization's
// send rate at the disk's fsync rate. So concurrent sends of one organization and day are written together:
// while one transaction is in flight, the sends arriving queue up and go into the next transaction as a
// group, which costs one round trip (one pipelined batch, one implicit transaction) however large it is.
// Inside it, accept_messages (migration 00005) settles each send on its own: a refused send is removed
// again and its recipients, events and jobs are not written, so one send's refusal never affects another's.
// A group that fails as a whole (an unexpected error, such as an unknown domain) is retried one send at a
// time so that each caller gets its own error.
//
// Idempotency: the message insert skips a message whose key is taken, waiting for a concurrent
// transaction holding the key, and the existing message's id and status come back with existing=true;
// the skipped send is not metered (SPEC §4.2 rules 3 and 4).
//
// Once queued, a send is written even if ctx ends while it waits; InsertMessage then returns ctx's error.
func (s *Store) InsertMessage(ctx context.Context, nm ports.NewMessage) (string, ports.MessageStatus, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", "", false, err
	}
	p, err := newPendingSend(ctx, nm)
	if err != nil {
		return "", "", false, err
	}
	key := nm.Message.OrganizationID + "|" + p.day.Format(time.DateOnly)
	if s.sends.add(key, p) {
		// No writer serves key: this caller writes the first group (its own send is in it) without a hand-off,
		// and leaves what queued meanwhile to a new writer.
		s.writeSends(s.sends.next(key), false)
		if more := s.sends.next(key); more != nil {
			go func() {
				s.writeSends(more, false)
				s.writeSendGroups(key)
			}()
		}
	}
	select {
	case r := <-p.done:
		return r.id, r.status, r.existing, r.err
	case <-ctx.Done():
		return "", "", false, ctx.Err()
	}
}

// MessageByIdempotencyKey implements ports.MessageStore.
func (s *Store) MessageByIdempotencyKey(ctx context.Context, orgID, key string) (string, ports.MessageStatus, error) {
	row, err := s.queries.MessageByIdempotencyKey(ctx, db.MessageByIdempotencyKeyParams{OrganizationID: orgID, IdempotencyKey: key})
	if err != nil {
		return "", "", interpretErrorFor("message", err)
	}
	return row.ID, ports.MessageStatus(row.Status), nil
}

// GetMessage implements ports.MessageStore: the message, its recipients (in request order), attachments
// and timeline (oldest first) are read in one round trip.
func (s *Store) GetMessage(ctx context.Context, orgID, id string) (ports.Message, error) {
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
func (s *Store) ListMessages(ctx context.Context, orgID string, q ports.ListEmailsQuery) (ports.EmailPage, error) {
	limit := q.Limit
	if limit == 0 {
		limit = defaultListLimit
	}
	if limit < 1 || limit > maxListLimit {
		return ports.EmailPage{}, ports.ValidationError(ports.FieldViolation{Path: "limit", Message: "must be between 1 and 100"})
	}
	beforeAt, beforeID := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), "ffffffff-ffff-ffff-ffff-ffffffffffff"
	if q.Cursor != "" {
		var ok bool
		if beforeAt, beforeID, ok = decodeCursor(q.Cursor); !ok {
			return ports.EmailPage{}, ports.ValidationError(ports.FieldViolation{Path: "cursor", Message: "invalid cursor"})
		}
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
func (s *Store) CancelScheduled(ctx context.Context, orgID, id string, ev ports.Event) (ports.Message, error) {
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
func (s *Store) PromoteDue(ctx context.Context, now time.Time, limit int, decide func(ports.Message, ports.Organization, ports.Domain) (ports.MessageStatus, []ports.Event, []ports.DeliveryJob)) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	promoted := 0
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
		promoted = len(due)
		return nil
	})
	if err != nil {
		return 0, interpretError(err)
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

// Bounds of one group of sends written together.
const (
	// maxSendGroup bounds the sends of one transaction, so that one statement's arrays stay small.
	maxSendGroup = 128
	// sendGroupTimeout bounds a group's transaction, which runs detached from its callers' contexts.
	sendGroupTimeout = 30 * time.Second
)

// pendingSend is one InsertMessage call waiting for its group to be written.
type pendingSend struct {
	ctx           context.Context
	nm            ports.NewMessage
	day           time.Time // UTC day of the warm-up cap
	headers, tags []byte    // encoded JSON objects
	metadata      []byte    // nil for none
	done          chan sendResult
}

type sendResult struct {
	id       string
	status   ports.MessageStatus
	existing bool
	err      error
}

func newPendingSend(ctx context.Context, nm ports.NewMessage) (*pendingSend, error) {
	m := nm.Message
	if m.ID == "" || m.OrganizationID == "" {
		return nil, errors.New("postgres: InsertMessage: message id and organization id are required")
	}
	p := &pendingSend{ctx: ctx, nm: nm, done: make(chan sendResult, 1)}
	if len(m.Metadata) > 0 {
		if !json.Valid(m.Metadata) {
			return nil, errors.New("postgres: InsertMessage: metadata is not valid JSON")
		}
		p.metadata = m.Metadata
	}
	var err error
	if p.headers, err = jsonStringMap(m.Headers); err != nil {
		return nil, err
	}
	if p.tags, err = jsonStringMap(m.Tags); err != nil {
		return nil, err
	}
	day := nm.MeterDay
	if day.IsZero() {
		day = time.Now()
	}
	day = day.UTC()
	p.day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC)
	return p, nil
}

// sendCombiner queues concurrent sends per organization and day. A key is present in queues while a
// writer serves it; the zero value is ready to use.
type sendCombiner struct {
	mu     sync.Mutex
	queues map[string][]*pendingSend
}

// add queues p under key and reports whether the caller must start the key's writer.
func (c *sendCombiner) add(key string, p *pendingSend) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queues == nil {
		c.queues = make(map[string][]*pendingSend)
	}
	q, serving := c.queues[key]
	c.queues[key] = append(q, p)
	return !serving
}

// next takes up to maxSendGroup queued sends of key, in arrival order; when none is left the writer stops
// serving key.
func (c *sendCombiner) next(key string) []*pendingSend {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[key]
	if len(q) == 0 {
		delete(c.queues, key)
		return nil
	}
	if len(q) <= maxSendGroup {
		c.queues[key] = nil
		return q
	}
	c.queues[key] = append([]*pendingSend(nil), q[maxSendGroup:]...)
	return q[:maxSendGroup]
}

// writeSendGroups is the writer of key: it writes the queued sends group after group until none is left.
func (s *Store) writeSendGroups(key string) {
	for {
		group := s.sends.next(key)
		if group == nil {
			return
		}
		s.writeSends(group, false)
	}
}

// writeSends writes one group and answers each of its sends. alone is true when the group is a single send
// being retried, which must not be retried again.
func (s *Store) writeSends(group []*pendingSend, alone bool) {
	live := make([]*pendingSend, 0, len(group))
	for _, p := range group {
		if err := p.ctx.Err(); err != nil {
			p.done <- sendResult{err: err} // the caller has gone; nothing is written for it
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), sendGroupTimeout)
	defer cancel()
	outcomes, err := s.insertSendGroup(ctx, live)
	if err != nil {
		if len(live) == 1 {
			live[0].done <- sendResult{err: interpretError(err)}
			return
		}
		for _, p := range live {
			s.writeSends([]*pendingSend{p}, true)
		}
		return
	}
	for _, p := range live {
		m := p.nm.Message
		o := outcomes[m.ID]
		switch o.Outcome {
		case "created":
			p.done <- sendResult{id: m.ID, status: m.Status}
		case "existing":
			p.done <- sendResult{id: o.ExistingID, status: ports.MessageStatus(o.ExistingStatus), existing: true}
		case "plan_limit":
			p.done <- sendResult{err: &ports.Error{
				Code:    ports.CodePaymentRequired,
				Reason:  "plan_limit_exceeded",
				Message: "Plan limit reached for " + ports.MetricEmailsSent,
				Fields:  map[string]any{"metric": ports.MetricEmailsSent, "limit": p.nm.Plan.MonthlyLimit},
			}}
		case "warmup_cap":
			p.done <- sendResult{err: &ports.Error{
				Code:    ports.CodeResourceExhausted,
				Reason:  "warmup_cap_reached",
				Message: "warm-up daily send cap reached",
			}}
		default: // "retry": the message owning its key was refused within this very group
			if alone {
				p.done <- sendResult{err: fmt.Errorf("postgres: InsertMessage: outcome %q for message %s", o.Outcome, m.ID)}
				continue
			}
			s.writeSends([]*pendingSend{p}, true)
		}
	}
}

// insertSendGroup writes a group of sends of one organization and day in one pipelined batch (one implicit
// transaction) and returns accept_messages' outcome per message id. The messages are inserted in order of
// their idempotency keys, so that two processes inserting the same keys wait for each other in the same
// order and never deadlock; they are metered in arrival order.
func (s *Store) insertSendGroup(ctx context.Context, group []*pendingSend) (map[string]db.AcceptMessagesRow, error) {
	orgID := group[0].nm.Message.OrganizationID
	day := group[0].day
	n := len(group)

	byKey := make([]*pendingSend, n)
	copy(byKey, group)
	sort.SliceStable(byKey, func(i, j int) bool {
		return byKey[i].nm.Message.IdempotencyKey < byKey[j].nm.Message.IdempotencyKey
	})
	msgs := db.InsertMessagesParams{
		OrganizationID:  orgID,
		Ids:             make([]string, n),
		DomainIds:       make([]string, n),
		Statuses:        make([]string, n),
		FromAddresses:   make([]string, n),
		ReplyTos:        make([]string, n),
		Subjects:        make([]string, n),
		HtmlBodies:      make([]string, n),
		TextBodies:      make([]string, n),
		Headers:         make([][]byte, n),
		Tags:            make([][]byte, n),
		Metadata:        make([][]byte, n),
		Sandbox:         make([]bool, n),
		Scheduled:       make([]bool, n),
		ScheduledAt:     make([]time.Time, n),
		IdempotencyKeys: make([]string, n),
		CreatedAt:       make([]time.Time, n),
	}
	for i, p := range byKey {
		m := p.nm.Message
		msgs.Ids[i] = m.ID
		msgs.DomainIds[i] = m.DomainID
		msgs.Statuses[i] = string(m.Status)
		msgs.FromAddresses[i] = m.From
		msgs.ReplyTos[i] = m.ReplyTo
		msgs.Subjects[i] = m.Subject
		msgs.HtmlBodies[i] = m.HTML
		msgs.TextBodies[i] = m.Text
		msgs.Headers[i] = p.headers
		msgs.Tags[i] = p.tags
		msgs.Metadata[i] = p.metadata
		msgs.Sandbox[i] = m.Sandbox
		if m.ScheduledAt != nil {
			msgs.Scheduled[i] = true
			msgs.ScheduledAt[i] = *m.ScheduledAt
		}
		msgs.IdempotencyKeys[i] = m.IdempotencyKey
		msgs.CreatedAt[i] = m.CreatedAt
	}

	accept := db.AcceptMessagesParams{
		OrganizationID:  orgID,
		Month:           time.Date(day.Year(), day.Month(), 1, 0, 0, 0, 0, time.UTC),
		Day:             day,
		Ids:             make([]string, n),
		IdempotencyKeys: make([]string, n),
		Units:           make([]int64, n),
		MonthlyLimits:   make([]int64, n),
		DailyCaps:       make([]int64, n),
	}
	var recipients db.InsertMessageRecipientsParams
	var attachments db.InsertMessageAttachmentsParams
	var events []ports.Event
	var owners []string
	var jobs []ports.DeliveryJob
	for i, p := range group {
		m := p.nm.Message
		accept.Ids[i] = m.ID
		accept.IdempotencyKeys[i] = m.IdempotencyKey
		accept.Units[i] = max(p.nm.Meter, 0)
		accept.MonthlyLimits[i] = p.nm.Plan.MonthlyLimit
		accept.DailyCaps[i] = p.nm.Plan.WarmupCap
		for pos, r := range m.Recipients {
			status := r.Status
			if status == "" {
				status = m.Status
			}
			recipients.Ids = append(recipients.Ids, r.ID)
			recipients.MessageIds = append(recipients.MessageIds, m.ID)
			recipients.Positions = append(recipients.Positions, int32(pos))
			recipients.Types = append(recipients.Types, r.Type)
			recipients.Addresses = append(recipients.Addresses, r.Address)
			recipients.Domains = append(recipients.Domains, addressDomain(r.Address))
			recipients.Statuses = append(recipients.Statuses, string(status))
		}
		for pos, a := range m.Attachments {
			attachments.Ids = append(attachments.Ids, idOrNew(a.ID))
			attachments.MessageIds = append(attachments.MessageIds, m.ID)
			attachments.Positions = append(attachments.Positions, int32(pos))
			attachments.Filenames = append(attachments.Filenames, a.Filename)
			attachments.ContentTypes = append(attachments.ContentTypes, a.ContentType)
			attachments.Sizes = append(attachments.Sizes, a.Size)
			attachments.Inline = append(attachments.Inline, a.Inline)
			attachments.ContentIds = append(attachments.ContentIds, a.ContentID)
			attachments.StorageKeys = append(attachments.StorageKeys, a.Key)
		}
		for _, e := range eventsAbout(p.nm.Events, orgID, m.ID, "") {
			events = append(events, e)
			owners = append(owners, m.ID)
		}
		for _, j := range p.nm.Outbox {
			jobs = append(jobs, jobOf(j, orgID, m.ID))
		}
	}

	var outcomes []db.AcceptMessagesRow
	steps := []pipelineStep{
		func(q *db.Queries) error { return q.PreferGenericPlans(ctx) },
		func(q *db.Queries) error { return q.InsertMessages(ctx, msgs) },
		func(q *db.Queries) (err error) {
			outcomes, err = q.AcceptMessages(ctx, accept)
			return err
		},
	}
	if len(recipients.Ids) > 0 {
		recipients.OrganizationID = orgID
		steps = append(steps, func(q *db.Queries) error { return q.InsertMessageRecipients(ctx, recipients) })
	}
	if len(attachments.Ids) > 0 {
		attachments.OrganizationID = orgID
		steps = append(steps, func(q *db.Queries) error { return q.InsertMessageAttachments(ctx, attachments) })
	}
	if len(events) > 0 {
		e := insertEventsParams(events)
		p := db.InsertSendEventsParams{
			OwnerIds: owners, Ids: e.Ids, OrganizationIds: e.OrganizationIds, Types: e.Types, MessageIds: e.MessageIds,
			RecipientIds: e.RecipientIds, DomainIds: e.DomainIds, HasResponses: e.HasResponses,
			ProviderResponses: e.ProviderResponses, OccurredAt: e.OccurredAt,
		}
		steps = append(steps, func(q *db.Queries) error { return q.InsertSendEvents(ctx, p) })
	}
	if len(jobs) > 0 {
		p := db.InsertSendJobsParams(jobArrays(jobs))
		steps = append(steps, func(q *db.Queries) error { return q.InsertSendJobs(ctx, p) })
	}
	if err := runPipeline(ctx, s.pool, steps...); err != nil {
		return nil, err
	}
	byID := make(map[string]db.AcceptMessagesRow, len(outcomes))
	for _, o := range outcomes {
		byID[o.MessageID] = o
	}
	return byID, nil
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
		out[i] = ports.Recipient{ID: r.ID, Type: r.Type, Address: r.Address, Status: ports.MessageStatus(r.Status)}
	}
	return out
}

// groupRecipients splits rows ordered by (message_id, position) per message.
func groupRecipients(rows []db.Recipient) map[string][]ports.Recipient {
	out := make(map[string][]ports.Recipient)
	for _, r := range rows {
		out[r.MessageID] = append(out[r.MessageID], ports.Recipient{
			ID: r.ID, Type: r.Type, Address: r.Address, Status: ports.MessageStatus(r.Status),
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

// jsonStringMap encodes a string map as a JSON object; nil is {} so the column never holds JSON null.
func jsonStringMap(m map[string]string) ([]byte, error) {
	if len(m) == 0 {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("postgres: encode map: %w", err)
	}
	return b, nil
}

// stringMap decodes what jsonStringMap stored; an empty object reads as nil.
func stringMap(b []byte) map[string]string {
	var m map[string]string
	if len(b) == 0 || json.Unmarshal(b, &m) != nil || len(m) == 0 {
		return nil
	}
	return m
}

func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

func textPtr(t pgtype.Text) *string {
	if !t.Valid {
		return nil
	}
	s := t.String
	return &s
}

// idOrNew returns id, or a fresh UUIDv7 when the caller left it empty.
func idOrNew(id string) string {
	if id != "" {
		return id
	}
	return uuid.Must(uuid.NewV7()).String()
}

func clampInt32(n int) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

// encodeCursor makes the opaque page token: base64url of "<unix microseconds>.<id>" of the last row shown.
func encodeCursor(createdAt time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(createdAt.UnixMicro(), 10) + "." + id))
}

func decodeCursor(cursor string) (time.Time, string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return time.Time{}, "", false
	}
	micros, id, ok := strings.Cut(string(raw), ".")
	if !ok {
		return time.Time{}, "", false
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	if _, err := uuid.Parse(id); err != nil {
		return time.Time{}, "", false
	}
	return time.UnixMicro(us).UTC(), id, true
}

// pipelineStep calls exactly one generated query method on q.
type pipelineStep func(q *db.Queries) error

// batchSender sends a pgx.Batch: the pool (each batch is then one implicit transaction) or a pgx.Tx.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// runPipeline sends the statements of steps in one round trip while keeping sqlc in charge of both ends.
// Each step runs twice: first against a recorder, which queues the statement sqlc built (with its encoded
// arguments) into a pgx.Batch, then, once the batch is sent, against a replayer that hands each step its
// statement's results, which sqlc scans. Sent on the pool, the batch is one implicit transaction (the
// extended protocol's Sync ends it): a statement failing on the server rolls back every statement of the
// batch. The first error is returned, including pgx.ErrNoRows from a :one step.
func runPipeline(ctx context.Context, conn batchSender, steps ...pipelineStep) error {
	rec := &batchRecorder{}
	recorded := db.New(rec)
	for i, step := range steps {
		_ = step(recorded) // the recorder's answers are placeholders
		if len(rec.batch.QueuedQueries) != i+1 {
			return fmt.Errorf("postgres: pipeline step %d issued %d statements, want 1", i, len(rec.batch.QueuedQueries)-i)
		}
	}
	results := conn.SendBatch(ctx, &rec.batch)
	replay := db.New(&batchReplayer{results: results, queued: rec.batch.QueuedQueries})
	var err error
	for _, step := range steps {
		if err = step(replay); err != nil {
			break
		}
	}
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	return err
}

// errRecorded is what the recorder answers queries with: their results exist only once the batch is sent.
var errRecorded = errors.New("postgres: statement recorded for a batch")

// batchRecorder is a db.DBTX that queues statements instead of running them.
type batchRecorder struct{ batch pgx.Batch }

func (r *batchRecorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.batch.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (r *batchRecorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.batch.Queue(sql, args...)
	return nil, errRecorded
}

func (r *batchRecorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.batch.Queue(sql, args...)
	return errRow{errRecorded}
}

// batchReplayer is a db.DBTX answering each statement, in order, with its result from a sent batch. It
// checks that the statements come in the order they were queued.
type batchReplayer struct {
	results pgx.BatchResults
	queued  []*pgx.QueuedQuery
	next    int
}

func (r *batchReplayer) check(sql string) error {
	if r.next >= len(r.queued) || r.queued[r.next].SQL != sql {
		return errors.New("postgres: pipeline replayed a statement it did not record")
	}
	r.next++
	return nil
}

func (r *batchReplayer) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	if err := r.check(sql); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.results.Exec()
}

func (r *batchReplayer) Query(_ context.Context, sql string, _ ...any) (pgx.Rows, error) {
	if err := r.check(sql); err != nil {
		return nil, err
	}
	return r.results.Query()
}

func (r *batchReplayer) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	if err := r.check(sql); err != nil {
		return errRow{err}
	}
	return r.results.QueryRow()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
