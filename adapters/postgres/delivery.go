package postgres

import (
	"context"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.DeliveryStore = (*Delivery)(nil)

// Delivery is the PostgreSQL store of what the MTA's outcomes change (ports.DeliveryStore): it reads the
// messages jobs deliver and applies each job's outcome once. Concurrent reads share round trips and
// concurrent applications share transactions (delivery_apply.go). Safe for concurrent use.
type Delivery struct {
	shared
	// applies groups concurrent ApplyDelivery calls into shared transactions.
	applies combiner[*pendingApply]
	// reads groups concurrent OutboundData calls into shared round trips.
	reads combiner[*pendingRead]
}

func newDelivery(sh shared) *Delivery {
	s := &Delivery{shared: sh}
	s.applies = combiner[*pendingApply]{max: maxApplyGroup, write: s.writeApplies, linger: applyLinger}
	s.reads = combiner[*pendingRead]{max: maxReadGroup, write: s.readOutbound}
	return s
}

// OutboundData implements ports.DeliveryStore: the message with all its recipients (in request order) and
// attachments, and its From domain with the sealed DKIM key, in one round trip. The caller picks the
// job's recipients and decides what a cancelled message means. Errors: not_found.
//
// Concurrent calls share their round trip (see readOutbound): the MTA loads every job's message, and the
// core reads it again to apply the job's outcome, from many workers at once.
func (s *Delivery) OutboundData(ctx context.Context, orgID, messageID string) (ports.Message, ports.Domain, error) {
	if err := ctx.Err(); err != nil {
		return ports.Message{}, ports.Domain{}, err
	}
	p := &pendingRead{ctx: ctx, orgID: orgID, messageID: messageID, done: make(chan readResult, 1)}
	s.reads.add(p)
	select {
	case r := <-p.done:
		return r.m, r.d, r.err
	case <-ctx.Done():
		return ports.Message{}, ports.Domain{}, ctx.Err()
	}
}

// readOne is OutboundData for one message in a round trip of its own.
func (s *Delivery) readOne(ctx context.Context, orgID, messageID string) (ports.Message, ports.Domain, error) {
	var m ports.Message
	var d ports.Domain
	err := runPipeline(ctx, s.pool,
		func(q *db.Queries) error { return q.ProbePlans(ctx) },
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

// maxReadGroup bounds the messages of one grouped read.
const maxReadGroup = 64

// pendingRead is one OutboundData call waiting for its group to be read.
type pendingRead struct {
	ctx              context.Context
	orgID, messageID string
	done             chan readResult
}

type readResult struct {
	m   ports.Message
	d   ports.Domain
	err error
}

// readOutbound reads a group of messages with the statements of readOne, each over all of them, in one
// round trip, and answers each call (calls naming the same message get the same answer). A message that is
// not its organization's is not_found for its caller only; when the read fails as a whole (a malformed
// id, say), each message is read again on its own so that each caller gets its own answer.
func (s *Delivery) readOutbound(group []*pendingRead) {
	live := make([]*pendingRead, 0, len(group))
	for _, p := range group {
		if err := p.ctx.Err(); err != nil {
			p.done <- readResult{err: err}
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	if len(live) == 1 {
		p := live[0]
		m, d, err := s.readOne(p.ctx, p.orgID, p.messageID)
		p.done <- readResult{m: m, d: d, err: err}
		return
	}
	var pairs db.OutboundMessagesParams
	seen := make(map[[2]string]bool, len(live))
	for _, p := range live {
		k := [2]string{p.orgID, p.messageID}
		if !seen[k] {
			seen[k] = true
			pairs.OrganizationIds = append(pairs.OrganizationIds, p.orgID)
			pairs.Ids = append(pairs.Ids, p.messageID)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), applyGroupTimeout)
	defer cancel()
	var (
		messages    []db.OutboundMessagesRow
		recipients  []db.OutboundRecipientsRow
		attachments []db.OutboundAttachmentsRow
	)
	err := runPipeline(ctx, s.pool,
		func(q *db.Queries) error { return q.ProbePlans(ctx) },
		func(q *db.Queries) (err error) {
			messages, err = q.OutboundMessages(ctx, pairs)
			return err
		},
		func(q *db.Queries) (err error) {
			recipients, err = q.OutboundRecipients(ctx, db.OutboundRecipientsParams{OrganizationIds: pairs.OrganizationIds, MessageIds: pairs.Ids})
			return err
		},
		func(q *db.Queries) (err error) {
			attachments, err = q.OutboundAttachments(ctx, db.OutboundAttachmentsParams{OrganizationIds: pairs.OrganizationIds, MessageIds: pairs.Ids})
			return err
		},
	)
	if err != nil {
		for _, p := range live {
			m, d, err := s.readOne(p.ctx, p.orgID, p.messageID)
			p.done <- readResult{m: m, d: d, err: err}
		}
		return
	}
	// Message ids are unique across organizations, so the rows are keyed by message id alone; a message is
	// answered only to a caller of its own organization.
	byID := make(map[string]readResult, len(messages))
	for _, row := range messages {
		r := readResult{m: messageFromRow(row.Message), d: domainFromRow(row.Domain)}
		r.m.Recipients, r.m.Attachments = []ports.Recipient{}, []ports.StoredAttachment{}
		byID[row.Message.ID] = r
	}
	for _, row := range recipients {
		if r, ok := byID[row.Recipient.MessageID]; ok {
			r.m.Recipients = append(r.m.Recipients, recipientsFromRows([]db.Recipient{row.Recipient})...)
			byID[row.Recipient.MessageID] = r
		}
	}
	for _, row := range attachments {
		if r, ok := byID[row.Attachment.MessageID]; ok {
			r.m.Attachments = append(r.m.Attachments, attachmentsFromRows([]db.Attachment{row.Attachment})...)
			byID[row.Attachment.MessageID] = r
		}
	}
	for _, p := range live {
		r, ok := byID[p.messageID]
		if !ok || r.m.OrganizationID != p.orgID {
			p.done <- readResult{err: interpretErrorFor("message", pgx.ErrNoRows)}
			continue
		}
		// Each caller owns its slices: the core and the MTA may change what they are given.
		r.m.Recipients = slices.Clone(r.m.Recipients)
		r.m.Attachments = slices.Clone(r.m.Attachments)
		r.m.Headers, r.m.Tags = maps.Clone(r.m.Headers), maps.Clone(r.m.Tags)
		p.done <- r
	}
}
