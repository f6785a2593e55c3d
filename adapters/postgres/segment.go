package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

var _ ports.SegmentStore = (*Marketing)(nil)

const segmentSelect = `s.id, s.organization_id, s.name, s.description, s.rule, s.created_at, s.updated_at`

func scanSegment(row pgx.Row) (ports.Segment, error) {
	var s ports.Segment
	var rule []byte
	err := row.Scan(&s.ID, &s.OrganizationID, &s.Name, &s.Description, &rule, &s.CreatedAt, &s.UpdatedAt)
	s.Rule = json.RawMessage(rule)
	return s, err
}

// CreateSegment implements ports.SegmentStore. The compiled plan is kept beside the rule.
func (s *Marketing) CreateSegment(ctx context.Context, seg ports.Segment) (ports.Segment, error) {
	plan, err := json.Marshal(seg.Plan)
	if err != nil || seg.Plan == nil {
		return ports.Segment{}, errBadPlan
	}
	out, err := scanSegment(s.pool.QueryRow(ctx, `INSERT INTO segments AS s (id, organization_id, name, description,
		rule, plan, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+segmentSelect,
		seg.ID, seg.OrganizationID, seg.Name, seg.Description, string(seg.Rule), string(plan), seg.CreatedAt, seg.UpdatedAt))
	return out, interpretErrorFor("segment", err)
}

// GetSegment implements ports.SegmentStore.
func (s *Marketing) GetSegment(ctx context.Context, orgID, id string) (ports.Segment, error) {
	seg, err := scanSegment(s.pool.QueryRow(ctx, `SELECT `+segmentSelect+` FROM segments s
		WHERE s.organization_id = $1 AND s.id = $2`, orgID, id))
	return seg, interpretErrorFor("segment", err)
}

// ListSegments implements ports.SegmentStore: limit segments from offset, newest first.
func (s *Marketing) ListSegments(ctx context.Context, orgID string, limit, offset int) ([]ports.Segment, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+segmentSelect+` FROM segments s WHERE s.organization_id = $1
		ORDER BY s.created_at DESC, s.id DESC LIMIT $2 OFFSET $3`, orgID, limit, offset)
	if err != nil {
		return nil, listError(err)
	}
	defer rows.Close()
	out := []ports.Segment{}
	for rows.Next() {
		seg, err := scanSegment(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, seg)
	}
	return out, listError(rows.Err())
}

// UpdateSegment implements ports.SegmentStore.
func (s *Marketing) UpdateSegment(ctx context.Context, orgID, id string, in ports.SegmentInput, now time.Time) (ports.Segment, error) {
	var rule, plan *string
	if len(in.Rule) > 0 {
		if in.Plan == nil {
			return ports.Segment{}, errBadPlan
		}
		b, err := json.Marshal(in.Plan)
		if err != nil {
			return ports.Segment{}, errBadPlan
		}
		r, p := string(in.Rule), string(b)
		rule, plan = &r, &p
	}
	seg, err := scanSegment(s.pool.QueryRow(ctx, `UPDATE segments AS s SET name = coalesce($3, s.name),
		description = coalesce($4, s.description), rule = coalesce($5::jsonb, s.rule), plan = coalesce($6::jsonb, s.plan),
		updated_at = $7 WHERE s.organization_id = $1 AND s.id = $2 RETURNING `+segmentSelect,
		orgID, id, in.Name, in.Description, rule, plan, now))
	return seg, interpretErrorFor("segment", err)
}

// DeleteSegment implements ports.SegmentStore.
func (s *Marketing) DeleteSegment(ctx context.Context, orgID, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM segments WHERE organization_id = $1 AND id = $2`, orgID, id)
	if err != nil {
		return interpretErrorFor("segment", err)
	}
	if tag.RowsAffected() == 0 {
		return ports.NotFound("segment not found")
	}
	return nil
}

// previewIDCap is how many matching ids PreviewPlan reads before it stops and counts instead. Up to the cap,
// one scan answers both the count and the sample; a variable so that a test can reach the other path.
var previewIDCap = 10000

// PreviewPlan implements ports.SegmentStore: the count and a sample of the matches, in one repeatable-read
// snapshot so the sample agrees with the count.
//
// The matches are found by a statement planned to read them all (a materialized CTE, whatever plan the
// planner finds cheapest: index bitmaps, a parallel scan) and read from it up to previewIDCap + 1 ids,
// which stops it there. It never walks the organization's contacts in id order hoping to meet limit
// matches early: for a rule with few matches that walk reads every contact at random, and ids are
// time-ordered, so a rule on recent contacts would meet its matches last. When the rule matches at most
// previewIDCap contacts, that one statement gives the count and the sample is the first limit matches by
// id; when it matches more, the sample is the first limit by id of the ids read and a count(*) with the
// same WHERE counts them all.
//
// parallel_tuple_cost is lowered for the transaction: the planner's default charges every row it
// estimates to cross from a parallel worker, and for a condition whose selectivity it can only guess (a
// third of the rows for a numeric range on a property) that makes a single-process scan of every
// contact look cheaper than a parallel one, although at most previewIDCap + 1 narrow rows ever cross.
func (s *Marketing) PreviewPlan(ctx context.Context, orgID string, plan ports.PlanNode, limit int) (ports.SegmentPreview, error) {
	limit = min(max(limit, 1), ports.MaxListLimit)
	out := ports.SegmentPreview{Sample: []ports.Contact{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		topics, err := resolveTopics(ctx, tx, orgID, plan)
		if err != nil {
			return err
		}
		b := &sqlBuilder{args: []any{orgID}, now: time.Now(), topics: topics}
		where, err := b.node(plan, 0)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL parallel_tuple_cost = 0.01`); err != nil {
			return err
		}
		q := ` FROM contacts c WHERE c.organization_id = $1 AND (` + where + `)`
		rows, err := tx.Query(ctx, `WITH m AS MATERIALIZED (SELECT c.id`+q+`) SELECT id FROM m LIMIT `+itoa(previewIDCap+1), b.args...)
		if err != nil {
			return err
		}
		var ids [][16]byte
		for rows.Next() {
			var id [16]byte
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		out.Count = len(ids)
		if len(ids) > previewIDCap {
			if err := tx.QueryRow(ctx, `SELECT count(*)`+q, b.args...).Scan(&out.Count); err != nil {
				return err
			}
		}
		if len(ids) == 0 {
			return nil
		}
		// PostgreSQL orders uuids by their bytes.
		slices.SortFunc(ids, func(x, y [16]byte) int { return bytes.Compare(x[:], y[:]) })
		ids = ids[:min(limit, len(ids))]
		sample, err := tx.Query(ctx, `SELECT `+contactColumns+` FROM contacts c
			WHERE c.organization_id = $1 AND c.id = ANY($2::uuid[]) ORDER BY c.id`, orgID, ids)
		if err != nil {
			return err
		}
		out.Sample, err = collectContacts(sample)
		return err
	})
	return out, interpretError(err)
}
