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

// SuppressedCall is one call of ReadSuppressedGroup.
type SuppressedCall struct {
	OrgID     string
	Addresses []string
}

// SuppressedAnswer is one answer of ReadSuppressedGroup.
type SuppressedAnswer struct {
	Found map[string]bool
	Err   error
}

// ReadSuppressedGroup answers calls as one group, as SuppressedAmong does for concurrent calls, so that tests
// can put several organizations' calls into one query instead of hoping concurrency does.
func (s *Messages) ReadSuppressedGroup(ctx context.Context, calls ...SuppressedCall) []SuppressedAnswer {
	group := make([]*pendingSuppressed, len(calls))
	for i, c := range calls {
		group[i] = &pendingSuppressed{ctx: ctx, orgID: c.OrgID, addresses: c.Addresses, done: make(chan suppressedResult, 1)}
	}
	s.readSuppressed(group)
	out := make([]SuppressedAnswer, len(group))
	for i, p := range group {
		r := <-p.done
		out[i] = SuppressedAnswer{Found: r.found, Err: r.err}
	}
	return out
}
