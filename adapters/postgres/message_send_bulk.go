package postgres

import (
	"context"
	"fmt"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

// MessagesByIdempotencyKeys implements sending.BulkStore: the messages holding any of keys in the
// organization, by key, in one query planned on each call (queries/messages.sql says why).
func (s *Messages) MessagesByIdempotencyKeys(ctx context.Context, orgID string, keys []string) (map[string]ports.SendResult, error) {
	if len(keys) == 0 {
		return map[string]ports.SendResult{}, nil
	}
	var rows []db.MessagesByIdempotencyKeysRow
	err := runPipeline(ctx, s.pool,
		func(q *db.Queries) error { return q.PlanEachCall(ctx) },
		func(q *db.Queries) (err error) {
			rows, err = q.MessagesByIdempotencyKeys(ctx, db.MessagesByIdempotencyKeysParams{OrganizationID: orgID, IdempotencyKeys: keys})
			return err
		})
	if err != nil {
		return nil, interpretError(err)
	}
	out := make(map[string]ports.SendResult, len(rows))
	for _, r := range rows {
		out[r.IdempotencyKey] = ports.SendResult{ID: r.ID, Status: ports.MessageStatus(r.Status)}
	}
	return out, nil
}

// InsertMessages implements sending.BulkStore: the sends are written by the group commit's own
// transaction (insertSendGroup, the one InsertMessage's concurrent sends share), in groups of up to
// maxSendGroup sends one after the other, on the caller's goroutine: each group is one pipelined batch
// with multi-row inserts of the messages, recipients, events and delivery jobs and one metering statement,
// in nms's order. Every rule of InsertMessage holds per send: a taken idempotency key answers Existing, a
// send over a limit is refused alone (OverLimit) and writes nothing, and a group that fails as a whole is
// retried one send at a time so each gets its own outcome. Sends of different organizations or meters
// (never the case for one broadcast's page) go in separate groups.
//
// The group bound is InsertMessage's: a group holds its organization's usage meters locked until it
// commits, and the organization's transactional sends wait for them meanwhile. A page of 500 written as
// one transaction held them long enough to put a transactional send's p99 near two seconds on a loaded
// machine; in groups of 128 each wait is a quarter of that.
func (s *Messages) InsertMessages(ctx context.Context, nms []ports.NewMessage) ([]ports.Inserted, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pending := make([]*pendingSend, len(nms))
	var order []string
	groups := map[string][]*pendingSend{}
	for i, nm := range nms {
		p, err := newPendingSend(ctx, nm)
		if err != nil {
			return nil, err
		}
		pending[i] = p
		if _, ok := groups[p.key]; !ok {
			order = append(order, p.key)
		}
		groups[p.key] = append(groups[p.key], p)
	}
	for _, k := range order {
		g := groups[k]
		for len(g) > 0 {
			n := min(len(g), maxSendGroup)
			s.writeSends(g[:n], false)
			g = g[n:]
		}
	}
	out := make([]ports.Inserted, len(nms))
	for i, p := range pending {
		r := <-p.done
		if r.err != nil {
			return nil, fmt.Errorf("postgres: InsertMessages: %w", r.err)
		}
		out[i] = r.ins
	}
	return out, nil
}
