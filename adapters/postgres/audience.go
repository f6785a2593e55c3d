package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

var _ ports.AudienceStore = (*Marketing)(nil)

// Marketing is the store of contacts, topics, segments and audiences (SPEC §4.7-§4.9). Every statement
// names the organization; references between the tables carry it too (see migration 00017).
type Marketing struct{ shared }

// maxAudiencePage bounds one PageAudience call.
const maxAudiencePage = 10000

// PageAudience implements ports.AudienceStore.
func (s *Marketing) PageAudience(ctx context.Context, orgID string, a ports.Audience, afterContactID string, limit int) ([]ports.AudienceContact, error) {
	if limit < 1 || limit > maxAudiencePage {
		limit = maxAudiencePage
	}
	if afterContactID == "" {
		afterContactID = "00000000-0000-0000-0000-000000000000"
	}
	const cols = `c.id, c.email, c.first_name, c.last_name, c.locale, c.timezone, c.properties`
	var rows pgx.Rows
	var err error
	switch {
	case (a.TopicID == "") == (a.SegmentID == ""):
		return nil, ports.ValidationError(ports.FieldViolation{Message: "exactly one of segmentId and topicId"})
	case a.TopicID != "":
		if err := s.topicExists(ctx, orgID, a.TopicID); err != nil {
			return nil, err
		}
		// Each subscription's contact is a probe by id (the OFFSET 0 keeps the lateral subquery from being
		// folded into a plain join): a join the planner may order otherwise walks the organization's
		// contacts for every subscription when their statistics are stale (a topic filled by an import
		// minutes ago), which made one page of 500 cost seconds at 100,000 subscribers.
		rows, err = s.pool.Query(ctx, `SELECT `+cols+`
			  FROM topic_subscriptions ts
			  CROSS JOIN LATERAL (SELECT `+cols+` FROM contacts c
			         WHERE c.organization_id = ts.organization_id AND c.id = ts.contact_id
			           AND c.consent_status = 'subscribed' AND NOT c.bounced
			        OFFSET 0) c
			 WHERE ts.organization_id = $1 AND ts.topic_id = $2 AND ts.status = 'subscribed'
			   AND ts.contact_id > $3
			 ORDER BY ts.contact_id
			 LIMIT $4`, orgID, a.TopicID, afterContactID, limit)
	default:
		var raw []byte
		err := s.pool.QueryRow(ctx, `SELECT plan FROM segments WHERE organization_id = $1 AND id = $2`,
			orgID, a.SegmentID).Scan(&raw)
		if err != nil {
			return nil, interpretErrorFor("segment", err)
		}
		var plan ports.PlanNode
		if err := json.Unmarshal(raw, &plan); err != nil {
			return nil, err
		}
		topics, err := resolveTopics(ctx, s.pool, orgID, plan)
		if err != nil {
			return nil, err
		}
		b := &sqlBuilder{args: []any{orgID}, now: time.Now(), topics: topics}
		where, err := b.node(plan, 0)
		if err != nil {
			return nil, err
		}
		b.args = append(b.args, afterContactID, limit)
		n := len(b.args)
		rows, err = s.pool.Query(ctx, `SELECT `+cols+` FROM contacts c
			 WHERE c.organization_id = $1 AND c.consent_status = 'subscribed' AND NOT c.bounced
			   AND c.id > $`+itoa(n-1)+` AND (`+where+`)
			 ORDER BY c.id LIMIT $`+itoa(n), b.args...)
	}
	if err != nil {
		return nil, listError(err)
	}
	defer rows.Close()
	var out []ports.AudienceContact
	for rows.Next() {
		var ac ports.AudienceContact
		var props []byte
		if err := rows.Scan(&ac.ID, &ac.Email, &ac.FirstName, &ac.LastName, &ac.Locale, &ac.Timezone, &props); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(props, &ac.Properties); err != nil {
			return nil, err
		}
		out = append(out, ac)
	}
	return out, listError(rows.Err())
}

// topicExists is not_found unless topicID is one of the organization's topics.
func (s *Marketing) topicExists(ctx context.Context, orgID, topicID string) error {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM topics WHERE organization_id = $1 AND id = $2`, orgID, topicID).Scan(&one)
	return interpretErrorFor("topic", err)
}

// UnsubscribeContact implements ports.AudienceStore.
func (s *Marketing) UnsubscribeContact(ctx context.Context, orgID, contactID, topicID, source string) error {
	var err error
	if topicID == "" {
		// Unsubscribed from all marketing: the topics go off too (ApplyPreferences' unsubscribeAll).
		_, err = s.pool.Exec(ctx, `WITH topics_off AS (
			UPDATE topic_subscriptions SET status = 'unsubscribed', consent_source = $3, updated_at = now()
			 WHERE organization_id = $1 AND contact_id = $2 AND status <> 'unsubscribed')
			UPDATE contacts
			   SET consent_status = 'unsubscribed', consent_source = $3, consent_at = now(), updated_at = now()
			 WHERE organization_id = $1 AND id = $2 AND consent_status <> 'unsubscribed'`,
			orgID, contactID, truncate(source, ports.MaxConsentSourceLen))
	} else {
		_, err = s.pool.Exec(ctx, `UPDATE topic_subscriptions
			   SET status = 'unsubscribed', consent_source = $4, updated_at = now()
			 WHERE organization_id = $1 AND topic_id = $2 AND contact_id = $3 AND status <> 'unsubscribed'`,
			orgID, topicID, contactID, truncate(source, ports.MaxConsentSourceLen))
	}
	return listError(err)
}

// truncate cuts s to at most n runes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return strings.Clone(string(r[:n]))
}
