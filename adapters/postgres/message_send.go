package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
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
func (s *Messages) InsertMessage(ctx context.Context, nm ports.NewMessage) (string, ports.MessageStatus, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", "", false, err
	}
	p, err := newPendingSend(ctx, nm)
	if err != nil {
		return "", "", false, err
	}
	s.sends.add(p)
	select {
	case r := <-p.done:
		return r.id, r.status, r.existing, r.err
	case <-ctx.Done():
		return "", "", false, ctx.Err()
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
	key           string    // organization and day: the sends that share a group
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
	p.key = m.OrganizationID + "|" + p.day.Format(time.DateOnly)
	return p, nil
}

// writeSends writes one group and answers each of its sends. alone is true when the group is a single send
// being retried, which must not be retried again.
func (s *Messages) writeSends(group []*pendingSend, alone bool) {
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
func (s *Messages) insertSendGroup(ctx context.Context, group []*pendingSend) (map[string]db.AcceptMessagesRow, error) {
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
			recipients.Names = append(recipients.Names, r.Name)
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
