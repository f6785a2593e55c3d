package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postmill/postmill/ports"
)

// DefaultEventsTopic is the topic every event flows on for the analytics tier.
const DefaultEventsTopic = "postmill.events"

// EventStream publishes every event to a topic keyed by message id (domain id for domain events), so one
// message's events stay in order on one partition. It implements ports.EventStream for deployments that
// run the Kafka queue; with the PostgreSQL queue the events table itself is the stream.
type EventStream struct {
	topic    string
	producer *kgo.Client
}

var _ ports.EventStream = (*EventStream)(nil)

// NewEventStream connects to the brokers and creates the topic (Partitions from cfg) unless it exists.
// cfg.Topic defaults to DefaultEventsTopic; cfg.Group is unused.
func NewEventStream(ctx context.Context, cfg Config) (*EventStream, error) {
	if cfg.Topic == "" {
		cfg.Topic = DefaultEventsTopic
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	producer, err := newProducer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &EventStream{topic: cfg.Topic, producer: producer}, nil
}

// eventRecord is the JSON value of one event record.
type eventRecord struct {
	ID               string    `json:"id"`
	OrganizationID   string    `json:"organization_id"`
	Type             string    `json:"type"`
	MessageID        string    `json:"message_id,omitempty"`
	RecipientID      string    `json:"recipient_id,omitempty"`
	DomainID         string    `json:"domain_id,omitempty"`
	ProviderResponse *string   `json:"provider_response,omitempty"`
	URL              string    `json:"url,omitempty"`     // email.clicked
	LinkID           string    `json:"link_id,omitempty"` // email.clicked
	OccurredAt       time.Time `json:"occurred_at"`
}

// Publish writes one record per event and returns once the brokers acknowledged all of them. The caller
// marks events as published only after that, so a crash in between publishes them again (at least once;
// consumers deduplicate on the event id).
func (s *EventStream) Publish(ctx context.Context, events []ports.Event) error {
	if len(events) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, len(events))
	for i, e := range events {
		value, err := json.Marshal(eventRecord{
			ID: e.ID, OrganizationID: e.OrganizationID, Type: e.Type, MessageID: e.MessageID,
			RecipientID: e.RecipientID, DomainID: e.DomainID, ProviderResponse: e.ProviderResponse,
			URL: e.URL, LinkID: e.LinkID, OccurredAt: e.OccurredAt.UTC(),
		})
		if err != nil {
			return fmt.Errorf("kafka: encode event %s: %w", e.ID, err)
		}
		key := e.MessageID
		if key == "" {
			key = e.DomainID
		}
		recs[i] = &kgo.Record{Key: []byte(key), Value: value}
	}
	if err := s.producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("kafka: publish %d events: %w", len(events), err)
	}
	return nil
}

// Close flushes and closes the producer.
func (s *EventStream) Close() { s.producer.Close() }
