package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

var _ ports.TopicStore = (*Marketing)(nil)

const topicColumns = `t.id, t.organization_id, t.key, t.name, t.description, t.double_opt_in, t.confirm_from,
	t.created_at, t.updated_at`

func scanTopic(row pgx.Row) (ports.Topic, error) {
	var t ports.Topic
	err := row.Scan(&t.ID, &t.OrganizationID, &t.Key, &t.Name, &t.Description, &t.DoubleOptIn, &t.ConfirmFrom,
		&t.CreatedAt, &t.UpdatedAt)
	return t, err
}

// CreateTopic implements ports.TopicStore.
func (s *Marketing) CreateTopic(ctx context.Context, t ports.Topic) (ports.Topic, error) {
	out, err := scanTopic(s.pool.QueryRow(ctx, `INSERT INTO topics AS t (id, organization_id, key, name, description,
		double_opt_in, confirm_from, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING `+topicColumns,
		t.ID, t.OrganizationID, t.Key, t.Name, t.Description, t.DoubleOptIn, t.ConfirmFrom, t.CreatedAt, t.UpdatedAt))
	return out, interpretErrorFor("topic", err)
}

// GetTopic implements ports.TopicStore.
func (s *Marketing) GetTopic(ctx context.Context, orgID, id string) (ports.Topic, error) {
	t, err := scanTopic(s.pool.QueryRow(ctx, `SELECT `+topicColumns+` FROM topics t
		WHERE t.organization_id = $1 AND t.id = $2`, orgID, id))
	return t, interpretErrorFor("topic", err)
}

// ListTopics implements ports.TopicStore: limit topics from offset, newest first.
func (s *Marketing) ListTopics(ctx context.Context, orgID string, limit, offset int) ([]ports.Topic, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+topicColumns+` FROM topics t WHERE t.organization_id = $1
		ORDER BY t.created_at DESC, t.id DESC LIMIT $2 OFFSET $3`, orgID, limit, offset)
	if err != nil {
		return nil, listError(err)
	}
	defer rows.Close()
	out := []ports.Topic{}
	for rows.Next() {
		t, err := scanTopic(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, listError(rows.Err())
}

// UpdateTopic implements ports.TopicStore; the key never changes.
func (s *Marketing) UpdateTopic(ctx context.Context, orgID, id string, in ports.TopicInput, now time.Time) (ports.Topic, error) {
	t, err := scanTopic(s.pool.QueryRow(ctx, `UPDATE topics AS t SET name = coalesce($3, t.name),
		description = coalesce($4, t.description), double_opt_in = coalesce($5, t.double_opt_in),
		confirm_from = coalesce($7, t.confirm_from), updated_at = $6
		WHERE t.organization_id = $1 AND t.id = $2 RETURNING `+topicColumns,
		orgID, id, in.Name, in.Description, in.DoubleOptIn, now, in.ConfirmFrom))
	return t, interpretErrorFor("topic", err)
}

// DeleteTopic implements ports.TopicStore; its subscriptions go with it.
func (s *Marketing) DeleteTopic(ctx context.Context, orgID, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM topics WHERE organization_id = $1 AND id = $2`, orgID, id)
	if err != nil {
		return interpretErrorFor("topic", err)
	}
	if tag.RowsAffected() == 0 {
		return ports.NotFound("topic not found")
	}
	return nil
}

const subscriptionColumns = `ts.topic_id, ts.contact_id, c.email, ts.status, ts.consent_source, ts.consent_ip,
	ts.created_at, ts.updated_at, ts.confirmed_at`

func scanSubscription(row pgx.Row) (ports.TopicSubscription, error) {
	var s ports.TopicSubscription
	err := row.Scan(&s.TopicID, &s.ContactID, &s.Email, &s.Status, &s.ConsentSource, &s.ConsentIP, &s.CreatedAt,
		&s.UpdatedAt, &s.ConfirmedAt)
	return s, err
}

// SetSubscription implements ports.TopicStore. A double opt-in subscribe (status pending) leaves a
// subscription that is already subscribed as it is. A subscription that becomes subscribed moves a
// pending or unsubscribed contact's consent to subscribed: subscribing is consent.
func (s *Marketing) SetSubscription(ctx context.Context, orgID, topicID string, r ports.SubscriptionRequest, contact ports.Contact, status string, now time.Time) (ports.TopicSubscription, error) {
	var out ports.TopicSubscription
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		contactID := r.ContactID
		if contactID == "" {
			err := tx.QueryRow(ctx, `INSERT INTO contacts (id, organization_id, email, source, consent_status,
				consent_source, consent_ip, consent_at, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
				ON CONFLICT (organization_id, email) DO UPDATE SET email = EXCLUDED.email
				RETURNING id`, contact.ID, orgID, contact.Email, contact.Source, contact.ConsentStatus,
				contact.ConsentSource, contact.ConsentIP, contact.ConsentAt, now).Scan(&contactID)
			if err != nil {
				return err
			}
		}
		var confirmed *time.Time
		if status == ports.ConsentSubscribed {
			confirmed = &now
		}
		err := tx.QueryRow(ctx, `INSERT INTO topic_subscriptions AS ts (organization_id, topic_id, contact_id,
			status, consent_source, consent_ip, created_at, updated_at, confirmed_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)
			ON CONFLICT (topic_id, contact_id) DO UPDATE SET
				status = CASE WHEN EXCLUDED.status = 'pending' AND ts.status = 'subscribed' THEN ts.status
				              ELSE EXCLUDED.status END,
				consent_source = EXCLUDED.consent_source, consent_ip = EXCLUDED.consent_ip,
				confirmed_at = coalesce(EXCLUDED.confirmed_at, ts.confirmed_at), updated_at = EXCLUDED.updated_at
			RETURNING ts.status`, orgID, topicID, contactID, status, r.ConsentSource, r.ConsentIP, now, confirmed).
			Scan(&status)
		if err != nil {
			return err
		}
		if status == ports.ConsentSubscribed {
			if _, err := tx.Exec(ctx, `UPDATE contacts SET consent_status = 'subscribed', consent_at = $3,
				consent_source = $4, consent_ip = $5, updated_at = $3
				WHERE organization_id = $1 AND id = $2 AND consent_status <> 'subscribed'`,
				orgID, contactID, now, r.ConsentSource, r.ConsentIP); err != nil {
				return err
			}
		}
		out, err = scanSubscription(tx.QueryRow(ctx, `SELECT `+subscriptionColumns+` FROM topic_subscriptions ts
			JOIN contacts c ON c.organization_id = ts.organization_id AND c.id = ts.contact_id
			WHERE ts.organization_id = $1 AND ts.topic_id = $2 AND ts.contact_id = $3`, orgID, topicID, contactID))
		return err
	})
	if ports.ErrorCode(interpretError(err)) == ports.CodeInvalidArgument {
		// A foreign key failed: the topic or the contact is not the organization's.
		return out, ports.NotFound("contact not found")
	}
	return out, interpretErrorFor("subscription", err)
}

// GetSubscription implements ports.TopicStore.
func (s *Marketing) GetSubscription(ctx context.Context, orgID, topicID, contactID string) (ports.TopicSubscription, error) {
	sub, err := scanSubscription(s.pool.QueryRow(ctx, `SELECT `+subscriptionColumns+` FROM topic_subscriptions ts
		JOIN contacts c ON c.organization_id = ts.organization_id AND c.id = ts.contact_id
		WHERE ts.organization_id = $1 AND ts.topic_id = $2 AND ts.contact_id = $3`, orgID, topicID, contactID))
	return sub, interpretErrorFor("subscription", err)
}

// ConfirmSubscription implements ports.TopicStore; a pending contact's consent is confirmed with it.
func (s *Marketing) ConfirmSubscription(ctx context.Context, orgID, topicID, contactID, ip string, now time.Time) (ports.TopicSubscription, error) {
	var out ports.TopicSubscription
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var status string
		err := tx.QueryRow(ctx, `UPDATE topic_subscriptions SET
			status = 'subscribed', confirmed_at = CASE WHEN status = 'pending' THEN $4 ELSE confirmed_at END,
			consent_ip = CASE WHEN status = 'pending' AND $5 <> '' THEN $5 ELSE consent_ip END,
			updated_at = CASE WHEN status = 'pending' THEN $4 ELSE updated_at END
			WHERE organization_id = $1 AND topic_id = $2 AND contact_id = $3 AND status IN ('pending', 'subscribed')
			RETURNING status`, orgID, topicID, contactID, now, ip).Scan(&status)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE contacts SET consent_status = 'subscribed', consent_at = $3,
			consent_source = 'double-opt-in', updated_at = $3
			WHERE organization_id = $1 AND id = $2 AND consent_status = 'pending'`, orgID, contactID, now); err != nil {
			return err
		}
		out, err = scanSubscription(tx.QueryRow(ctx, `SELECT `+subscriptionColumns+` FROM topic_subscriptions ts
			JOIN contacts c ON c.organization_id = ts.organization_id AND c.id = ts.contact_id
			WHERE ts.organization_id = $1 AND ts.topic_id = $2 AND ts.contact_id = $3`, orgID, topicID, contactID))
		return err
	})
	return out, interpretErrorFor("subscription", err)
}

// ContactPreferences implements ports.ContactStore.
func (s *Marketing) ContactPreferences(ctx context.Context, orgID, contactID string) (ports.Preferences, error) {
	p := ports.Preferences{ContactID: contactID, Topics: []ports.TopicPreference{}}
	err := s.pool.QueryRow(ctx, `SELECT consent_status FROM contacts WHERE organization_id = $1 AND id = $2`,
		orgID, contactID).Scan(&p.ConsentStatus)
	if err != nil {
		return p, interpretErrorFor("contact", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT t.id, t.key, t.name, t.description, coalesce(ts.status, '')
		FROM topics t
		LEFT JOIN topic_subscriptions ts ON ts.topic_id = t.id AND ts.contact_id = $2 AND ts.organization_id = $1
		WHERE t.organization_id = $1 ORDER BY t.key LIMIT $3`, orgID, contactID, ports.MaxUnpagedListRows)
	if err != nil {
		return p, listError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var t ports.TopicPreference
		if err := rows.Scan(&t.TopicID, &t.Key, &t.Name, &t.Description, &t.Status); err != nil {
			return p, err
		}
		t.Subscribed = t.Status == ports.ConsentSubscribed && p.ConsentStatus == ports.ConsentSubscribed
		p.Topics = append(p.Topics, t)
	}
	return p, listError(rows.Err())
}

// ApplyPreferences implements ports.ContactStore.
func (s *Marketing) ApplyPreferences(ctx context.Context, orgID, contactID string, u ports.PreferenceUpdate, now time.Time) error {
	return interpretErrorFor("contact", pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var consent string
		if err := tx.QueryRow(ctx, `SELECT consent_status FROM contacts WHERE organization_id = $1 AND id = $2
			FOR UPDATE`, orgID, contactID).Scan(&consent); err != nil {
			return err
		}
		subscribedAny := false
		for i, choice := range u.Topics {
			var topicID string
			err := tx.QueryRow(ctx, `SELECT id FROM topics WHERE organization_id = $1 AND key = $2`, orgID, choice.Key).Scan(&topicID)
			if err == pgx.ErrNoRows {
				return ports.ValidationError(ports.FieldViolation{Path: fmt.Sprintf("topics.%d.key", i), Message: "is not a topic"})
			}
			if err != nil {
				return err
			}
			status := ports.ConsentUnsubscribed
			var confirmed *time.Time
			if choice.Subscribed && !u.UnsubscribeAll {
				status, confirmed, subscribedAny = ports.ConsentSubscribed, &now, true
			}
			if _, err := tx.Exec(ctx, `INSERT INTO topic_subscriptions AS ts (organization_id, topic_id, contact_id,
				status, consent_source, consent_ip, created_at, updated_at, confirmed_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)
				ON CONFLICT (topic_id, contact_id) DO UPDATE SET status = EXCLUDED.status,
					consent_source = EXCLUDED.consent_source, consent_ip = EXCLUDED.consent_ip,
					confirmed_at = coalesce(EXCLUDED.confirmed_at, ts.confirmed_at), updated_at = EXCLUDED.updated_at
				WHERE ts.status IS DISTINCT FROM EXCLUDED.status`,
				orgID, topicID, contactID, status, u.Source, truncate(u.IP, ports.MaxConsentIPLen), now, confirmed); err != nil {
				return err
			}
		}
		next := consent
		switch {
		case u.UnsubscribeAll:
			next = ports.ConsentUnsubscribed
			// Every topic goes off with it, not only those named: a later subscription to one topic
			// brings the contact's consent back and must not bring back the topics left before.
			if _, err := tx.Exec(ctx, `UPDATE topic_subscriptions SET status = 'unsubscribed', consent_source = $3,
				updated_at = $4 WHERE organization_id = $1 AND contact_id = $2 AND status <> 'unsubscribed'`,
				orgID, contactID, u.Source, now); err != nil {
				return err
			}
		case subscribedAny:
			next = ports.ConsentSubscribed
		}
		if next != consent {
			_, err := tx.Exec(ctx, `UPDATE contacts SET consent_status = $3, consent_source = $4, consent_ip = $5,
				consent_at = $6, updated_at = $6 WHERE organization_id = $1 AND id = $2`,
				orgID, contactID, next, u.Source, truncate(u.IP, ports.MaxConsentIPLen), now)
			return err
		}
		return nil
	}))
}
