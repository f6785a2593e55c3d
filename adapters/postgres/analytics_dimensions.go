package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

var _ ports.MessageDimensionSource = (*Analytics)(nil)

// messageDimensionsSQL finds each (organization, message) pair's message by its primary key and keeps it
// only when it is the organization's, then its sending domain by (organization_id, id), so a message id
// of one organization named with another's id finds nothing. The message's organization is compared with
// IS NOT DISTINCT FROM (the same as = here: neither side is NULL), which no index serves, so the message
// is always found through the primary key: with = the planner may instead walk the organization's
// messages in messages_org_idempotency_key when its statistics are stale (see LockMessage in
// queries/delivery.sql). The tags are built as ReadEvents builds them. WITH ORDINALITY hands back which
// pair a row answers, so the caller's strings key the result as given.
const messageDimensionsSQL = `
SELECT k.n, coalesce(d.name, ''),
    ARRAY(SELECT t.k || ':' || t.v FROM jsonb_each_text(m.tags) AS t (k, v) ORDER BY t.k)
FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS k (organization_id, id, n)
JOIN messages m ON m.id = k.id AND m.organization_id IS NOT DISTINCT FROM k.organization_id
LEFT JOIN domains d ON d.organization_id = m.organization_id AND d.id = m.domain_id`

// MessageDimensions implements ports.MessageDimensionSource in one round trip: ProbePlans, then one
// statement over the refs as two arrays, in one implicit transaction. ProbePlans keeps it an index probe
// per pair: a batch of a thousand pairs would otherwise be planned, once the generic plan is cached, as a
// hash join against a sequential scan of messages whenever the statistics make messages look small. Refs
// whose ids are not UUIDs are left out (they name no message).
func (s *Analytics) MessageDimensions(ctx context.Context, refs []ports.MessageRef) (map[ports.MessageRef]ports.MessageDimensions, error) {
	out := make(map[ports.MessageRef]ports.MessageDimensions, len(refs))
	asked := make([]ports.MessageRef, 0, len(refs))
	orgs, ids := make([]string, 0, len(refs)), make([]string, 0, len(refs))
	for _, r := range refs {
		if !isUUID(r.OrganizationID) || !isUUID(r.MessageID) {
			continue
		}
		asked = append(asked, r)
		orgs, ids = append(orgs, r.OrganizationID), append(ids, r.MessageID)
	}
	if len(asked) == 0 {
		return out, nil
	}
	var b pgx.Batch
	b.Queue(probePlansSQL)
	b.Queue(messageDimensionsSQL, orgs, ids)
	br := s.pool.SendBatch(ctx, &b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, interpretError(err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			n int64
			d ports.MessageDimensions
		)
		if err := rows.Scan(&n, &d.Domain, &d.Tags); err != nil {
			return nil, interpretError(err)
		}
		if n < 1 || int(n) > len(asked) {
			continue
		}
		out[asked[n-1]] = d
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err)
	}
	return out, nil
}
