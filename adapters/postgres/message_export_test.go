package postgres

import (
	"context"

	"github.com/postmill/postmill/ports"
)

// SendResult is one answer of WriteSendGroup.
type SendResult struct {
	ports.Inserted
	Err error
}

// WriteSendGroup writes sends as one group, as InsertMessage does for concurrent calls, so that tests can
// build the groups whose outcomes depend on each other instead of hoping concurrency builds them.
func (s *Messages) WriteSendGroup(ctx context.Context, sends ...ports.NewMessage) ([]SendResult, error) {
	group := make([]*pendingSend, len(sends))
	for i, nm := range sends {
		p, err := newPendingSend(ctx, nm)
		if err != nil {
			return nil, err
		}
		group[i] = p
	}
	s.writeSends(group, false)
	out := make([]SendResult, len(group))
	for i, p := range group {
		r := <-p.done
		out[i] = SendResult{Inserted: r.ins, Err: r.err}
	}
	return out, nil
}
