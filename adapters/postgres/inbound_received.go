package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

const receivedCols = `id, organization_id, inbound_domain_id, rcpt, mail_from, header_from, header_from_name,
	to_addresses, cc_addresses, subject, message_id, in_reply_to, refs, size_bytes, spam_status, scan_status,
	status, route_id, route_action, forward_status, received_at`

func scanReceived(row pgx.Row) (ports.ReceivedEmail, error) {
	var e ports.ReceivedEmail
	err := row.Scan(receivedDest(&e)...)
	e.ReceivedAt = e.ReceivedAt.UTC()
	return e, err
}

func receivedDest(e *ports.ReceivedEmail) []any {
	return []any{&e.ID, &e.OrganizationID, &e.InboundDomainID, &e.To, &e.From, &e.HeaderFrom, &e.HeaderFromName,
		&e.ToAddresses, &e.CcAddresses, &e.Subject, &e.MessageID, &e.InReplyTo, &e.References, &e.SizeBytes,
		&e.SpamStatus, &e.ScanStatus, &e.Status, &e.RouteID, &e.RouteAction, &e.ForwardStatus, &e.ReceivedAt}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ListReceived implements ports.InboundStore: newest first, without bodies.
func (s *Inbound) ListReceived(ctx context.Context, orgID string, limit, offset int) ([]ports.ReceivedEmail, error) {
	out := []ports.ReceivedEmail{}
	if !isUUID(orgID) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+receivedCols+` FROM received_emails WHERE organization_id = $1
		ORDER BY received_at DESC, id DESC LIMIT $2 OFFSET $3`, orgID, limit, offset)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanReceived(rows)
		if err != nil {
			return nil, interpretError(err)
		}
		out = append(out, e)
	}
	return out, interpretError(rows.Err())
}

// GetReceived implements ports.InboundStore: the detail with attachments, read in one round trip.
// Errors: not_found.
func (s *Inbound) GetReceived(ctx context.Context, orgID, id string) (ports.ReceivedEmail, error) {
	var e ports.ReceivedEmail
	b := &pgx.Batch{}
	queueReceivedDetail(b, orgID, id, &e)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return e, interpretErrorFor("received email", err)
	}
	return e, nil
}

// queueReceivedDetail queues the reads of one received email's detail and attachments into e; the batch's
// Close reports pgx.ErrNoRows when there is no such email.
func queueReceivedDetail(b *pgx.Batch, orgID, id string, e *ports.ReceivedEmail) {
	b.Queue(`SELECT `+receivedCols+`, text_body, html_body, headers, raw_key, dedupe_key
		FROM received_emails WHERE organization_id = $1 AND id = $2`, orgID, id).QueryRow(func(row pgx.Row) error {
		var headers []byte
		if err := row.Scan(append(receivedDest(e), &e.Text, &e.HTML, &headers, &e.RawKey, &e.DedupeKey)...); err != nil {
			return err
		}
		e.ReceivedAt = e.ReceivedAt.UTC()
		if err := json.Unmarshal(headers, &e.Headers); err != nil {
			return fmt.Errorf("postgres: received headers: %w", err)
		}
		return nil
	})
	b.Queue(`SELECT id, filename, content_type, size_bytes, inline, content_id, scan_status,
		scan_signature, scanned_at, blob_key, part_path, sha256 FROM received_attachments WHERE organization_id = $1 AND received_email_id = $2
		ORDER BY position`, orgID, id).Query(func(rows pgx.Rows) error {
		e.Attachments = []ports.ReceivedAttachment{}
		for rows.Next() {
			var a ports.ReceivedAttachment
			if err := rows.Scan(&a.ID, &a.Filename, &a.ContentType, &a.Size, &a.Inline, &a.ContentID, &a.ScanStatus,
				&a.ScanSignature, &a.ScannedAt, &a.BlobKey, &a.PartPath, &a.SHA256); err != nil {
				return err
			}
			a.ScannedAt = utcPtr(a.ScannedAt)
			e.Attachments = append(e.Attachments, a)
		}
		return rows.Err()
	})
}

// SetForwardStatus implements ports.InboundStore; a forwarded message also counts as delivered once sent.
func (s *Inbound) SetForwardStatus(ctx context.Context, orgID, id, status string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE received_emails SET forward_status = $3,
		status = CASE WHEN $3 = 'sent' AND status = 'pending' THEN 'delivered' ELSE status END
		WHERE organization_id = $1 AND id = $2`, orgID, id, status)
	if err != nil {
		return interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return ports.NotFound("received email not found")
	}
	return nil
}

// ClaimDueActions implements ports.InboundStore: due rows are leased with SKIP LOCKED, so concurrent
// processes never attempt the same email at once; the lease also pushes the row's due time past now+lease,
// so a process that dies mid-attempt leaves it to be claimed again later.
func (s *Inbound) ClaimDueActions(ctx context.Context, now time.Time, lease time.Duration, max int) ([]ports.DueAction, error) {
	rows, err := s.pool.Query(ctx, `WITH due AS (
			SELECT id FROM received_emails WHERE action_next_at <= $1 ORDER BY action_next_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE received_emails r SET action_lease = gen_random_uuid(), action_next_at = $3
		FROM due WHERE r.id = due.id
		RETURNING r.id, r.organization_id, r.route_id, r.action_lease, r.action_attempts, r.action_event_id`,
		now, max, now.Add(lease))
	if err != nil {
		return nil, interpretError(err)
	}
	type claimed struct {
		id, org, lease, event string
		route                 *string
		attempts              int
	}
	var cs []claimed
	for rows.Next() {
		var c claimed
		var event *string
		if err := rows.Scan(&c.id, &c.org, &c.route, &c.lease, &c.attempts, &event); err != nil {
			rows.Close()
			return nil, interpretError(err)
		}
		if event != nil {
			c.event = *event
		}
		cs = append(cs, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, interpretError(err)
	}
	// The claimed emails' details and routes are read in one pipelined round trip.
	out := make([]ports.DueAction, len(cs))
	routes := make([]*ports.InboundRoute, len(cs))
	batch := &pgx.Batch{}
	for i, c := range cs {
		out[i] = ports.DueAction{Attempts: c.attempts, Lease: c.lease}
		queueReceivedDetail(batch, c.org, c.id, &out[i].Email)
		if c.route == nil {
			continue
		}
		batch.Queue(`SELECT `+routeCols+`, secret FROM inbound_routes WHERE organization_id = $1 AND id = $2`, c.org,
			*c.route).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var secret []byte
				r, err := scanRoute(rows, &secret)
				if err != nil {
					return err
				}
				r.Secret = secret
				routes[i] = &r
			}
			return rows.Err()
		})
	}
	if batch.Len() > 0 {
		if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
			return nil, interpretError(err)
		}
	}
	for i, c := range cs {
		out[i].Email.ActionEventID = c.event
		if routes[i] != nil { // a deleted route leaves the zero route
			out[i].Route = *routes[i]
		}
	}
	return out, nil
}

// RecordAction implements ports.InboundStore.
func (s *Inbound) RecordAction(ctx context.Context, id, lease, status string, attempts int, next *time.Time, code int, reason, forward string) error {
	_, err := s.pool.Exec(ctx, `UPDATE received_emails SET status = $3, action_attempts = $4, action_next_at = $5,
		action_response_code = $6, action_blocked_reason = $7, action_lease = NULL,
		forward_status = COALESCE(NULLIF($8, ''), forward_status)
		WHERE id = $1 AND action_lease = $2`, id, lease, status, attempts, next, code, reason, forward)
	return interpretError(err)
}
