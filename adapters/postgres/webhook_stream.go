package postgres

import (
	"context"
	"errors"
)

// RegisterEventStream records that the fan-out publishes every event to the stream name (the Kafka events
// topic). From then on the events trigger queues every new event for the fan-out, not only those an
// endpoint of its organization subscribes to (migration 00039), so the stream misses none. A process
// configured with a stream registers it when it starts, before it writes or fans out any event; the row is
// kept (registering again changes nothing), so a deployment that drops its stream keeps queueing every
// event until the row is deleted by hand.
func (s *Webhooks) RegisterEventStream(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("postgres: RegisterEventStream: the stream has no name")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO event_streams (name) VALUES ($1) ON CONFLICT DO NOTHING`, name)
	return interpretError(err)
}
