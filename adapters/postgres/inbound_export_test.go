package postgres

import (
	"context"

	"github.com/postmill/postmill/ports"
)

// ReceivedResult is one answer of WriteReceivedGroup.
type ReceivedResult struct {
	Inserted bool
	Existing string
	Err      error
}

// WriteReceivedGroup writes emails as one group, as InsertReceived does for concurrent calls, so that tests
// can build a group instead of hoping concurrency builds it.
func (s *Inbound) WriteReceivedGroup(ctx context.Context, emails ...ports.ReceivedEmail) []ReceivedResult {
	group := make([]*pendingReceived, len(emails))
	for i, e := range emails {
		p, err := newPendingReceived(ctx, e, []ports.Event{{Type: ports.EventEmailReceived, OccurredAt: e.ReceivedAt}})
		if err != nil {
			panic(err)
		}
		group[i] = p
	}
	writeReceivedGroup(s.shared, group, false)
	out := make([]ReceivedResult, len(group))
	for i, p := range group {
		r := <-p.done
		out[i] = ReceivedResult{Inserted: r.inserted, Existing: r.existing, Err: r.err}
	}
	return out
}

// QueuedReceived is how many InsertReceived calls wait for the group being written to commit.
func (s *Inbound) QueuedReceived() int {
	c := s.receivedCombiner()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, q := range c.queues {
		n += len(q)
	}
	return n
}

// ReceivedLane is the combiner queue InsertReceived puts e in.
func ReceivedLane(e ports.ReceivedEmail) string {
	p, err := newPendingReceived(context.Background(), e, nil)
	if err != nil {
		panic(err)
	}
	return p.lane
}
