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
// delivery jobs are written and nm.Usage is metered in one transaction, or, when the units do not fit under
// one of the usage's limits, nothing is written or metered and Inserted.OverLimit names that limit. What a
// send counts and under which limits is the core's decision; this store only meters it atomically.
//
// A send locks the usage rows it meters (an organization's month and day rows) until its transaction
// commits, which includes the WAL flush; one send per flush would cap an organization's send rate at the
// disk's fsync rate. So concurrent sends metering the same rows are written together: while one transaction
// is in flight, the sends arriving queue up and go into the next transaction as a group, which costs one
// round trip (one pipelined batch, one implicit transaction) however large it is. Inside it, the group's
// rows are locked once (LockUsageMeters) and metered by one statement (MeterSends) that has the effect of a
// conditional update per send in arrival order, adding its units to every meter or to none; a send that
// does not fit is removed again and its recipients, events and jobs are not written, so one send's refusal
// never affects another's. A group that fails as a whole (an unexpected error, such as an unknown domain) is retried one
// send at a time so that each caller gets its own error.
//
// Idempotency: the message insert skips a message whose key is taken, waiting for a concurrent
// transaction holding the key, and the existing message's id and status come back with Existing; the
// skipped send is not metered (SPEC §4.2 rules 3 and 4).
//
// Once queued, a send is written even if ctx ends while it waits; InsertMessage then returns ctx's error.
func (s *Messages) InsertMessage(ctx context.Context, nm ports.NewMessage) (ports.Inserted, error) {
	if err := ctx.Err(); err != nil {
		return ports.Inserted{}, err
	}
	p, err := newPendingSend(ctx, nm)
	if err != nil {
		return ports.Inserted{}, err
	}
	s.sends.add(p)
	select {
	case r := <-p.done:
		return r.ins, r.err
	case <-ctx.Done():
		return ports.Inserted{}, ctx.Err()
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
	key           string   // the organization and the meters: sends of one key share a group
	headers, tags []byte   // encoded JSON objects
	metadata      []byte   // nil for none
	meter         bool     // nm.Usage meters something
	metrics       []string // nm.Usage.Limits' meters, periods and maxima, in its order
	periods       []time.Time
	maxes         []int64
	done          chan sendResult
}

type sendResult struct {
	ins ports.Inserted
	err error
}

func newPendingSend(ctx context.Context, nm ports.NewMessage) (*pendingSend, error) {
	m := nm.Message
	if m.ID == "" || m.OrganizationID == "" {
		return nil, errors.New("postgres: InsertMessage: message id and organization id are required")
	}
	p := &pendingSend{ctx: ctx, nm: nm, key: m.OrganizationID, done: make(chan sendResult, 1)}
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
	u := nm.Usage
	if u.Units <= 0 || len(u.Limits) == 0 {
		return p, nil
	}
	p.meter = true
	seen := make(map[string]bool, len(u.Limits))
	for _, l := range u.Limits {
		// A period is a calendar date, taken as written in its own location (as Organizations.Usage reads it).
		y, mo, d := l.Period.Date()
		period := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
		meter := l.Metric + "@" + period.Format(time.DateOnly)
		if l.Metric == "" || seen[meter] {
			return nil, fmt.Errorf("postgres: InsertMessage: usage limit %q of %s is unnamed or given twice", l.Metric, period.Format(time.DateOnly))
		}
		seen[meter] = true
		p.key += "|" + meter
		p.metrics = append(p.metrics, l.Metric)
		p.periods = append(p.periods, period)
		p.maxes = append(p.maxes, l.Max)
	}
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
		switch {
		case o.written:
			p.done <- sendResult{ins: ports.Inserted{ID: m.ID, Status: m.Status}}
		case o.overLimit > 0 && o.overLimit <= len(p.nm.Usage.Limits):
			limit := p.nm.Usage.Limits[o.overLimit-1]
			p.done <- sendResult{ins: ports.Inserted{OverLimit: &limit}}
		case o.existingID != "":
			p.done <- sendResult{ins: ports.Inserted{ID: o.existingID, Status: o.existingStatus, Existing: true}}
		case alone:
			p.done <- sendResult{err: fmt.Errorf("postgres: InsertMessage: message %s was neither written, refused nor found by its key", m.ID)}
		default: // the message owning its key was refused within this very group: the key is free again
			s.writeSends([]*pendingSend{p}, true)
		}
	}
}

// sendOutcome is what a group's transaction did with one of its sends.
type sendOutcome struct {
	written bool
	// overLimit is the position (from 1) in the send's usage limits of the first its units did not fit
	// under; 0 when none.
	overLimit int
	// existingID and existingStatus name the message holding the key of a send that was not written; an
	// empty id when none does.
	existingID     string
	existingStatus ports.MessageStatus
}

// insertSendGroup writes a group of sends of one organization and one set of usage meters in one pipelined
// batch (one implicit transaction) and returns each send's outcome by message id. The messages are inserted
// in order of their idempotency keys, so that two processes inserting the same keys wait for each other in
// the same order and never deadlock; they are metered in arrival order, so earlier sends get a limit's
// room first.
func (s *Messages) insertSendGroup(ctx context.Context, group []*pendingSend) (map[string]sendOutcome, error) {
	orgID := group[0].nm.Message.OrganizationID
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

	outcomes := db.SendOutcomesParams{OrganizationID: orgID, Ids: make([]string, n), IdempotencyKeys: make([]string, n)}
	var recipients db.InsertMessageRecipientsParams
	var attachments db.InsertMessageAttachmentsParams
	var events []ports.Event
	var owners []string
	var jobs []ports.DeliveryJob
	for i, p := range group {
		m := p.nm.Message
		outcomes.Ids[i] = m.ID
		outcomes.IdempotencyKeys[i] = m.IdempotencyKey
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

	steps := []pipelineStep{
		func(q *db.Queries) error { return q.ProbePlans(ctx) },
		func(q *db.Queries) error { return q.InsertMessages(ctx, msgs) },
	}
	// A group's sends share their key, so either all of them meter the same meters or none meters anything.
	var metered []db.MeterSendsRow
	if first := group[0]; first.meter {
		lock := db.LockUsageMetersParams{OrganizationID: orgID, Metrics: first.metrics, Periods: first.periods}
		meter := db.MeterSendsParams{
			OrganizationID: orgID, Metrics: first.metrics, Periods: first.periods,
			Ids: make([]string, n), Units: make([]int64, n), Maxes: make([]int64, 0, n*len(first.maxes)),
		}
		for i, p := range group {
			meter.Ids[i], meter.Units[i] = p.nm.Message.ID, p.nm.Usage.Units
			meter.Maxes = append(meter.Maxes, p.maxes...)
		}
		steps = append(steps,
			func(q *db.Queries) error { return q.LockUsageMeters(ctx, lock) },
			func(q *db.Queries) (err error) {
				metered, err = q.MeterSends(ctx, meter)
				return err
			},
		)
	}
	var rows []db.SendOutcomesRow
	steps = append(steps, func(q *db.Queries) (err error) {
		rows, err = q.SendOutcomes(ctx, outcomes)
		return err
	})
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
	queue := s.queue.Load()
	switch {
	case len(jobs) == 0:
	case queue != nil: // the queue is this database's: the jobs go straight into it (queue_direct.go)
		p := db.InsertSendQueueJobsParams(jobArrays(jobs))
		steps = append(steps, func(q *db.Queries) error { return q.InsertSendQueueJobs(ctx, p) })
	default:
		p := db.InsertSendJobsParams(jobArrays(jobs))
		steps = append(steps, func(q *db.Queries) error { return q.InsertSendJobs(ctx, p) })
	}
	if err := runPipeline(ctx, s.pool, steps...); err != nil {
		return nil, err
	}
	switch {
	case len(jobs) == 0:
	case queue != nil:
		tx := hasTransactional(jobs)
		queue.wake(tx)
		if tx {
			queue.signalTransactional()
		}
	default:
		signalOutbox(s.outboxAdded)
	}
	byID := make(map[string]sendOutcome, n)
	for _, r := range rows {
		byID[r.MessageID] = sendOutcome{written: r.Written, existingID: r.ExistingID, existingStatus: ports.MessageStatus(r.ExistingStatus)}
	}
	for _, r := range metered {
		o := byID[r.MessageID]
		o.overLimit = int(r.OverLimit)
		byID[r.MessageID] = o
	}
	return byID, nil
}
