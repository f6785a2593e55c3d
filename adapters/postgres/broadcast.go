package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

var _ ports.BroadcastStore = (*Broadcasts)(nil)

// Broadcasts stores broadcasts and the recipients their expander wrote (SPEC §4.10). Every statement is
// scoped by organization, except ClaimBroadcasts, the expander's work list across organizations.
//
// The statements are written here rather than generated: they are few, and each reads or writes the one
// broadcasts row shape below.
type Broadcasts struct{ shared }

const broadcastColumns = `id, organization_id, name, subject, from_address, reply_to, html_body, text_body,
	coalesce(template_id::text, ''), coalesce(segment_id::text, ''), coalesce(topic_id::text, ''), scheduled_at,
	status, cursor, paused_until, failure_reason, started_at, completed_at, created_at, updated_at`

func scanBroadcast(row pgx.Row, extra ...any) (ports.Broadcast, error) {
	var b ports.Broadcast
	var status string
	err := row.Scan(append([]any{&b.ID, &b.OrganizationID, &b.Name, &b.Subject, &b.From, &b.ReplyTo, &b.HTML, &b.Text,
		&b.TemplateID, &b.SegmentID, &b.TopicID, &b.ScheduledAt, &status, &b.Cursor, &b.PausedUntil,
		&b.FailureReason, &b.StartedAt, &b.CompletedAt, &b.CreatedAt, &b.UpdatedAt}, extra...)...)
	b.Status = ports.BroadcastStatus(status)
	return b, err
}

func nullUUID(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// InsertBroadcast implements ports.BroadcastStore.
func (s *Broadcasts) InsertBroadcast(ctx context.Context, b ports.Broadcast) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO broadcasts (id, organization_id, name, subject, from_address, reply_to,
		html_body, text_body, template_id, segment_id, topic_id, scheduled_at, status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)`,
		b.ID, b.OrganizationID, b.Name, b.Subject, b.From, b.ReplyTo, b.HTML, b.Text, nullUUID(b.TemplateID),
		nullUUID(b.SegmentID), nullUUID(b.TopicID), b.ScheduledAt, string(b.Status), b.CreatedAt)
	return interpretError(err)
}

// GetBroadcast implements ports.BroadcastStore.
func (s *Broadcasts) GetBroadcast(ctx context.Context, orgID, id string) (ports.Broadcast, error) {
	b, err := scanBroadcast(s.pool.QueryRow(ctx, `SELECT `+broadcastColumns+` FROM broadcasts
		WHERE organization_id = $1 AND id = $2`, orgID, id))
	if err != nil {
		return ports.Broadcast{}, interpretErrorFor("broadcast", err)
	}
	return b, nil
}

// ListBroadcasts implements ports.BroadcastStore: limit broadcasts from offset, newest first.
func (s *Broadcasts) ListBroadcasts(ctx context.Context, orgID string, limit, offset int) ([]ports.Broadcast, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+broadcastColumns+` FROM broadcasts WHERE organization_id = $1
		ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`, orgID, limit, offset)
	if err != nil {
		return nil, listError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ports.Broadcast, error) { return scanBroadcast(r) })
	return out, listError(err)
}

// UpdateBroadcast implements ports.BroadcastStore: one statement that changes the row only when its status
// is one of from, so two racing transitions cannot both win.
func (s *Broadcasts) UpdateBroadcast(ctx context.Context, b ports.Broadcast, from ...ports.BroadcastStatus) (ports.Broadcast, error) {
	allowed := make([]string, len(from))
	for i, st := range from {
		allowed[i] = string(st)
	}
	out, err := scanBroadcast(s.pool.QueryRow(ctx, `UPDATE broadcasts SET name = $3, subject = $4, from_address = $5,
		reply_to = $6, html_body = $7, text_body = $8, template_id = $9, segment_id = $10, topic_id = $11,
		scheduled_at = $12, status = $13, started_at = $14, completed_at = $15, updated_at = $16
		WHERE organization_id = $1 AND id = $2 AND status = ANY($17::text[])
		RETURNING `+broadcastColumns,
		b.OrganizationID, b.ID, b.Name, b.Subject, b.From, b.ReplyTo, b.HTML, b.Text, nullUUID(b.TemplateID),
		nullUUID(b.SegmentID), nullUUID(b.TopicID), b.ScheduledAt, string(b.Status), b.StartedAt, b.CompletedAt,
		b.UpdatedAt, allowed))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := s.GetBroadcast(ctx, b.OrganizationID, b.ID); gerr != nil {
			return ports.Broadcast{}, gerr
		}
		return ports.Broadcast{}, ports.Errorf(ports.CodeFailedPrecondition, "broadcast state does not allow this change")
	}
	if err != nil {
		return ports.Broadcast{}, interpretErrorFor("broadcast", err)
	}
	return out, nil
}

// DeleteBroadcast implements ports.BroadcastStore.
func (s *Broadcasts) DeleteBroadcast(ctx context.Context, orgID, id string) error {
	var status string
	err := s.pool.QueryRow(ctx, `WITH target AS (SELECT status FROM broadcasts WHERE organization_id = $1 AND id = $2
		FOR UPDATE), gone AS (DELETE FROM broadcasts b USING target WHERE b.organization_id = $1 AND b.id = $2
		AND target.status <> 'sending' RETURNING b.id) SELECT status FROM target`, orgID, id).Scan(&status)
	if err != nil {
		return interpretErrorFor("broadcast", err)
	}
	if status == string(ports.BroadcastSending) {
		return ports.Errorf(ports.CodeFailedPrecondition, "a sending broadcast cannot be deleted")
	}
	return nil
}

// ClaimBroadcasts implements ports.BroadcastStore. The claim is one statement: it locks the broadcasts it
// picks and skips those another claim has locked (FOR UPDATE SKIP LOCKED), so two processes claiming at
// once get disjoint broadcasts; a broadcast whose lease was just set by a claim that committed first is
// seen with that lease and left out. Leases are measured on the database's clock, the one clock every
// process shares.
func (s *Broadcasts) ClaimBroadcasts(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]ports.Broadcast, error) {
	if _, err := s.pool.Exec(ctx, `UPDATE broadcasts SET status = 'sending', started_at = coalesce(started_at, $1),
		updated_at = $1 WHERE status = 'scheduled' AND scheduled_at <= $1`, now); err != nil {
		return nil, interpretError(err)
	}
	type claimed struct {
		b         ports.Broadcast
		available time.Time
	}
	rows, err := s.pool.Query(ctx, `WITH picked AS (
			SELECT id AS picked_id, coalesce(expander_lease_until, started_at, created_at) AS available
			FROM broadcasts
			WHERE status = 'sending' AND (paused_until IS NULL OR paused_until <= $1)
				AND (expander_lease_until IS NULL OR expander_lease_until <= now())
			ORDER BY 2, started_at, id
			LIMIT $2
			FOR UPDATE SKIP LOCKED)
		UPDATE broadcasts SET expander_token = gen_random_uuid(),
			expander_lease_until = now() + $3::bigint * interval '1 microsecond'
		FROM picked WHERE id = picked_id
		RETURNING `+broadcastColumns+`, expander_token::text, available`, now, limit, lease.Microseconds())
	if err != nil {
		return nil, interpretError(err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		var token string
		var err error
		c.b, err = scanBroadcast(r, &token, &c.available)
		c.b.ExpanderToken = token
		return c, err
	})
	if err != nil {
		return nil, interpretError(err)
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].available.Equal(list[j].available) {
			return list[i].available.Before(list[j].available)
		}
		return list[i].b.ID < list[j].b.ID
	})
	out := make([]ports.Broadcast, len(list))
	for i, c := range list {
		out[i] = c.b
	}
	return out, nil
}

// RecordBatch implements ports.BroadcastStore: the cursor moves only from the value the expander read and
// only while the expander's claim is the stored one, in the transaction that records the batch, so a batch
// is recorded once however the expander is stopped, and an expander whose lease ran out and was taken by
// another records nothing. The same statement extends the lease.
func (s *Broadcasts) RecordBatch(ctx context.Context, b ports.Broadcast, cursor string, recipients []ports.BroadcastRecipient, lease time.Duration) (bool, error) {
	moved := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE broadcasts SET cursor = $3, paused_until = NULL, updated_at = now(),
			expander_lease_until = now() + $6::bigint * interval '1 microsecond'
			WHERE organization_id = $1 AND id = $2 AND cursor = $4 AND status = 'sending' AND expander_token = $5::uuid`,
			b.OrganizationID, b.ID, cursor, b.Cursor, nullUUID(b.ExpanderToken), lease.Microseconds())
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		moved = true
		if len(recipients) == 0 {
			return nil
		}
		n := len(recipients)
		contacts, emails, messages, statuses := make([]string, n), make([]string, n), make([]*string, n), make([]string, n)
		created := make([]time.Time, n)
		for i, r := range recipients {
			contacts[i], emails[i], statuses[i], created[i] = r.ContactID, r.Email, r.Status, r.CreatedAt
			if r.MessageID != "" {
				id := r.MessageID
				messages[i] = &id
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO broadcast_recipients (organization_id, broadcast_id, contact_id, email,
			message_id, status, created_at)
			SELECT $1, $2, c, e, m, st, t FROM unnest($3::uuid[], $4::text[], $5::uuid[], $6::text[], $7::timestamptz[])
				AS x(c, e, m, st, t)
			ON CONFLICT (broadcast_id, contact_id) DO NOTHING`,
			b.OrganizationID, b.ID, contacts, emails, messages, statuses, created)
		return err
	})
	if err != nil {
		return false, interpretError(err)
	}
	return moved, nil
}

// ReleaseBroadcast implements ports.BroadcastStore. The lease's end is kept as the time it ended, which
// orders the next claims.
func (s *Broadcasts) ReleaseBroadcast(ctx context.Context, b ports.Broadcast) error {
	if b.ExpanderToken == "" {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE broadcasts SET expander_token = NULL, expander_lease_until = now()
		WHERE organization_id = $1 AND id = $2 AND expander_token = $3::uuid`, b.OrganizationID, b.ID, b.ExpanderToken)
	return interpretError(err)
}

// FinishBroadcast implements ports.BroadcastStore.
func (s *Broadcasts) FinishBroadcast(ctx context.Context, orgID, id string, status ports.BroadcastStatus, reason string, pausedUntil *time.Time, now time.Time) error {
	var completed *time.Time
	if status != ports.BroadcastSending {
		completed = &now
	}
	_, err := s.pool.Exec(ctx, `UPDATE broadcasts SET status = $3, failure_reason = $4, paused_until = $5,
		completed_at = $6, updated_at = $7, expander_token = NULL, expander_lease_until = now()
		WHERE organization_id = $1 AND id = $2 AND status = 'sending'`,
		orgID, id, string(status), reason, pausedUntil, completed, now)
	return interpretError(err)
}

// BroadcastStats implements ports.BroadcastStore: each recipient's message counts in every state its
// current status implies (a clicked message was delivered and opened too).
func (s *Broadcasts) BroadcastStats(ctx context.Context, orgID, id string) (ports.BroadcastStats, error) {
	if _, err := s.GetBroadcast(ctx, orgID, id); err != nil {
		return ports.BroadcastStats{}, err
	}
	var st ports.BroadcastStats
	err := s.pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE br.message_id IS NOT NULL),
		count(*) FILTER (WHERE m.status IN ('sent', 'delivered', 'delivery_delayed', 'bounced', 'complained', 'opened', 'clicked')),
		count(*) FILTER (WHERE m.status IN ('delivered', 'complained', 'opened', 'clicked')),
		count(*) FILTER (WHERE m.status = 'bounced'),
		count(*) FILTER (WHERE m.status = 'complained'),
		count(*) FILTER (WHERE m.status IN ('opened', 'clicked')),
		count(*) FILTER (WHERE m.status = 'clicked'),
		count(*) FILTER (WHERE br.unsubscribed_at IS NOT NULL),
		count(*) FILTER (WHERE m.status = 'failed')
		FROM broadcast_recipients br
		LEFT JOIN messages m ON m.id = br.message_id AND m.organization_id = br.organization_id
		WHERE br.organization_id = $1 AND br.broadcast_id = $2`, orgID, id).Scan(
		&st.Recipients, &st.Sent, &st.Delivered, &st.Bounced, &st.Complained, &st.Opened, &st.Clicked,
		&st.Unsubscribed, &st.Failed)
	return st, interpretError(err)
}

// BroadcastRecipients implements ports.BroadcastStore.
func (s *Broadcasts) BroadcastRecipients(ctx context.Context, orgID, id string, limit, offset int) ([]ports.BroadcastRecipient, int64, error) {
	if _, err := s.GetBroadcast(ctx, orgID, id); err != nil {
		return nil, 0, err
	}
	var total int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM broadcast_recipients WHERE organization_id = $1 AND broadcast_id = $2`,
		orgID, id).Scan(&total); err != nil {
		return nil, 0, interpretError(err)
	}
	rows, err := s.pool.Query(ctx, `SELECT br.contact_id::text, br.email, coalesce(br.message_id::text, ''),
		coalesce(m.status, br.status), br.created_at
		FROM broadcast_recipients br
		LEFT JOIN messages m ON m.id = br.message_id AND m.organization_id = br.organization_id
		WHERE br.organization_id = $1 AND br.broadcast_id = $2
		ORDER BY br.created_at, br.contact_id LIMIT $3 OFFSET $4`, orgID, id, limit, offset)
	if err != nil {
		return nil, 0, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ports.BroadcastRecipient, error) {
		var x ports.BroadcastRecipient
		err := r.Scan(&x.ContactID, &x.Email, &x.MessageID, &x.Status, &x.CreatedAt)
		return x, err
	})
	if err != nil {
		return nil, 0, interpretError(err)
	}
	return out, total, nil
}

// UnsubscribeSubject implements ports.BroadcastStore.
func (s *Broadcasts) UnsubscribeSubject(ctx context.Context, orgID, contactID, topicID string) (string, string, error) {
	var email, topic string
	err := s.pool.QueryRow(ctx, `SELECT c.email, coalesce((SELECT t.name FROM topics t WHERE t.organization_id = $1
		AND t.id = $3::uuid), '') FROM contacts c WHERE c.organization_id = $1 AND c.id = $2`,
		orgID, contactID, nullUUID(topicID)).Scan(&email, &topic)
	if err != nil {
		return "", "", interpretErrorFor("contact", err)
	}
	if topicID != "" && topic == "" {
		return "", "", ports.NotFound("topic not found")
	}
	return email, topic, nil
}

// NoteUnsubscribe implements ports.BroadcastStore.
func (s *Broadcasts) NoteUnsubscribe(ctx context.Context, orgID, broadcastID, contactID string, at time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE broadcast_recipients SET unsubscribed_at = $4 WHERE organization_id = $1
		AND broadcast_id = $2 AND contact_id = $3 AND unsubscribed_at IS NULL`, orgID, broadcastID, contactID, at)
	if err = listError(err); err != nil {
		return fmt.Errorf("postgres: note unsubscribe: %w", err)
	}
	return nil
}
