package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

const (
	// maxReceivedGroup bounds the received emails of one transaction.
	maxReceivedGroup = 64
	// receivedLanes is how many groups of received emails are written at once.
	receivedLanes = 2
	// receivedGroupTimeout bounds a group's transaction, which runs detached from its callers' contexts.
	receivedGroupTimeout = 30 * time.Second
)

// newInbound returns the inbound store with its combiner of received emails: the concurrent SMTP sessions
// of the MX listener share a commit.
func newInbound(sh shared) *Inbound {
	s := &Inbound{shared: sh}
	s.received = combiner[*pendingReceived]{
		max:   maxReceivedGroup,
		write: func(group []*pendingReceived) { writeReceivedGroup(s.shared, group, false) },
		key:   func(p *pendingReceived) string { return p.lane },
	}
	return s
}

func (s *Inbound) receivedCombiner() *combiner[*pendingReceived] { return &s.received }

// pendingReceived is one InsertReceived call waiting for its group's commit.
type pendingReceived struct {
	ctx     context.Context
	e       ports.ReceivedEmail
	events  []ports.Event
	headers []byte
	// lane is the combiner queue of the email, one of receivedLanes chosen by its dedupe constraint's key:
	// two groups are written at once (PostgreSQL folds their commits into one WAL flush when they meet),
	// and copies of one message always share a lane, so two groups never wait for each other's key.
	lane string
	done chan receivedResult
}

type receivedResult struct {
	inserted bool
	existing string
	err      error
}

func newPendingReceived(ctx context.Context, e ports.ReceivedEmail, events []ports.Event) (*pendingReceived, error) {
	headers, err := json.Marshal(e.Headers)
	if err != nil {
		return nil, fmt.Errorf("postgres: received headers: %w", err)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(e.OrganizationID + "\x00" + e.To + "\x00" + e.DedupeKey))
	return &pendingReceived{ctx: ctx, e: e, events: eventsAbout(events, e.OrganizationID, e.ID, ""), headers: headers,
		lane: strconv.Itoa(int(h.Sum32() % receivedLanes)), done: make(chan receivedResult, 1)}, nil
}

// InsertReceived implements ports.InboundStore: the email, its attachments and the events in one
// transaction, unless the organization holds the same recipient's copy of the same message already.
// Concurrent calls share the transaction (and so the commit's WAL flush): the call returns once the group
// holding its email has committed, so a nil error still means the email is durable.
func (s *Inbound) InsertReceived(ctx context.Context, e ports.ReceivedEmail, events []ports.Event) (bool, string, error) {
	p, err := newPendingReceived(ctx, e, events)
	if err != nil {
		return false, "", err
	}
	s.receivedCombiner().add(p)
	select {
	case r := <-p.done:
		return r.inserted, r.existing, r.err
	case <-ctx.Done():
		// The group may still commit the email; a retry finds it by its dedupe key.
		return false, "", ctx.Err()
	}
}

// writeReceivedGroup writes one group in one transaction and answers each call. When the transaction fails,
// each email is written alone, so that one bad email does not fail the others; alone is true for such a
// retry, which is not retried again.
func writeReceivedGroup(sh shared, group []*pendingReceived, alone bool) {
	live := make([]*pendingReceived, 0, len(group))
	for _, p := range group {
		if err := p.ctx.Err(); err != nil {
			p.done <- receivedResult{err: err} // the caller has gone; nothing is written for it
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), receivedGroupTimeout)
	defer cancel()
	results, err := insertReceivedGroup(ctx, sh, live)
	if err != nil {
		if len(live) == 1 || alone {
			for _, p := range live {
				p.done <- receivedResult{err: interpretError(err)}
			}
			return
		}
		for _, p := range live {
			writeReceivedGroup(sh, []*pendingReceived{p}, true)
		}
		return
	}
	for i, p := range live {
		p.done <- results[i]
	}
}

// insertReceivedGroup writes a group in one pipelined batch, which PostgreSQL runs as one implicit
// transaction in one round trip: the emails (in order of their dedupe constraint's key, so that two
// processes inserting the same keys wait for each other in one order and never deadlock), then the id
// holding each email's key (its own when it was inserted), then the attachments and events of the emails
// inserted by this batch. Two calls of one group with the same key insert the first and find it for the
// second.
func insertReceivedGroup(ctx context.Context, sh shared, group []*pendingReceived) ([]receivedResult, error) {
	order := make([]int, len(group))
	for i := range order {
		order[i] = i
	}
	dedupe := func(p *pendingReceived) string {
		return p.e.OrganizationID + "\x00" + p.e.To + "\x00" + p.e.DedupeKey
	}
	sort.SliceStable(order, func(a, b int) bool { return dedupe(group[order[a]]) < dedupe(group[order[b]]) })
	results := make([]receivedResult, len(group))
	b := &pgx.Batch{}
	for _, i := range order {
		e, p, r := group[i].e, group[i], &results[i]
		b.Queue(`INSERT INTO received_emails (id, organization_id, inbound_domain_id, rcpt, mail_from,
			header_from, header_from_name, to_addresses, cc_addresses, subject, message_id, in_reply_to, refs, size_bytes,
			spam_status, scan_status, status, route_id, route_action, forward_status, received_at, text_body, html_body,
			headers, raw_key, dedupe_key, action_event_id, action_next_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23,$24,$25,$26,
			NULLIF($27, '')::uuid, $28)
			ON CONFLICT ON CONSTRAINT received_emails_dedupe_key DO NOTHING RETURNING id`,
			e.ID, e.OrganizationID, e.InboundDomainID, e.To, e.From, e.HeaderFrom, e.HeaderFromName, nonNilStrings(e.ToAddresses),
			nonNilStrings(e.CcAddresses), e.Subject, e.MessageID, e.InReplyTo, e.References, e.SizeBytes, e.SpamStatus,
			e.ScanStatus, e.Status, e.RouteID, e.RouteAction, e.ForwardStatus, e.ReceivedAt, e.Text, e.HTML, p.headers,
			e.RawKey, e.DedupeKey, e.ActionEventID, e.ActionDue).QueryRow(func(row pgx.Row) error {
			err := row.Scan(new(string))
			if err == pgx.ErrNoRows {
				return nil
			}
			r.inserted = err == nil
			return err
		})
	}
	for _, i := range order {
		e, r := group[i].e, &results[i]
		b.Queue(`SELECT id FROM received_emails WHERE organization_id = $1 AND rcpt = $2 AND dedupe_key = $3`,
			e.OrganizationID, e.To, e.DedupeKey).QueryRow(func(row pgx.Row) error { return row.Scan(&r.existing) })
	}
	for _, i := range order {
		e, p := group[i].e, group[i]
		for pos, a := range e.Attachments {
			b.Queue(`INSERT INTO received_attachments (id, organization_id, received_email_id, position, filename,
				content_type, size_bytes, inline, content_id, scan_status, scan_signature, scanned_at, blob_key, part_path, sha256)
				SELECT $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15
				WHERE EXISTS (SELECT 1 FROM received_emails WHERE organization_id = $2 AND id = $3)`,
				a.ID, e.OrganizationID, e.ID, pos, a.Filename, a.ContentType, a.Size, a.Inline, a.ContentID, a.ScanStatus,
				a.ScanSignature, a.ScannedAt, a.BlobKey, a.PartPath, a.SHA256)
		}
		for _, ev := range p.events {
			b.Queue(`INSERT INTO events (id, organization_id, type, message_id, occurred_at)
				SELECT $1, $2, $3, NULLIF($4, '')::uuid, $5
				WHERE EXISTS (SELECT 1 FROM received_emails WHERE organization_id = $2 AND id = $6)`,
				idOrNew(ev.ID), ev.OrganizationID, ev.Type, ev.MessageID, ev.OccurredAt, e.ID)
		}
	}
	if err := sh.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	for i := range results {
		if results[i].inserted {
			results[i].existing = ""
		}
	}
	return results, nil
}
