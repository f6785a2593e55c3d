package webhook

import (
	"context"
	"fmt"

	"github.com/postmill/postmill/core/poll"
	"github.com/postmill/postmill/ports"
)

// RunFanOut turns outbox events into deliveries until ctx ends, then returns nil. Each round hands up to
// FanOutBatch events to the store, which writes one pending delivery per enabled endpoint subscribed to the
// event's type, with the body Payload builds, in the same transaction that marks the events done; the
// events are also published to the Stream, if any, inside that transaction's callback, so a failed publish
// leaves them to the next round (at least once). email.cancelled gets a body like every event but no
// endpoint can subscribe to it, so it makes no delivery. The loop goes again at once after a full batch and
// otherwise sleeps FanOutInterval; several processes may run it together (SKIP LOCKED). A failing round is
// logged and retried after a growing pause.
func (s *Service) RunFanOut(ctx context.Context) error {
	return poll.Run(ctx, s.logger, "webhook fan-out", s.cfg.FanOutInterval, func(ctx context.Context) (bool, error) {
		n, err := s.store.FanOut(ctx, s.now(), s.cfg.FanOutBatch, s.payloads)
		return n >= s.cfg.FanOutBatch, err
	})
}

// payloads is FanOut's callback: the webhook body of every event by event id, after publishing the events
// to the stream.
func (s *Service) payloads(ctx context.Context, events []ports.Event) (map[string][]byte, error) {
	if s.stream != nil && len(events) > 0 {
		if err := s.stream.Publish(ctx, events); err != nil {
			return nil, fmt.Errorf("webhook: publish events: %w", err)
		}
	}
	out := make(map[string][]byte, len(events))
	for _, ev := range events {
		out[ev.ID] = Payload(ev)
	}
	return out, nil
}
