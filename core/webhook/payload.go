package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/postmill/postmill/ports"
)

// body is the JSON document POSTed to an endpoint (SPEC §6). Its fields are encoded in declaration order, so
// the bytes are stable: the signature covers them, and a replay re-encodes a stored body without reordering.
type body struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"` // kept as text so a replay repeats the original byte for byte
	Data      data   `json:"data"`
}

// data is the body's data object. message_id is always present (null for domain and test events); the
// others only when the event has them. URL and LinkID are SPEC §6's click fields: the link followed, as the
// message's HTML had it at send time, and its position among the message's tracked links ("0" first).
// BounceClass is Postmill's addition to SPEC §6's fields on email.bounced and email.delivery_delayed: what
// the refusal means (bad_mailbox, spam_block, rate_limited, ...; docs/deliverability.md).
type data struct {
	Test             bool    `json:"test,omitempty"`
	MessageID        *string `json:"message_id"`
	ProviderResponse *string `json:"provider_response,omitempty"`
	BounceClass      string  `json:"bounce_class,omitempty"`
	RecipientID      string  `json:"recipient_id,omitempty"`
	DomainID         string  `json:"domain_id,omitempty"`
	URL              string  `json:"url,omitempty"`
	LinkID           string  `json:"link_id,omitempty"`
	OriginalEventID  string  `json:"original_event_id,omitempty"`
}

// timestampLayout formats created_at: RFC 3339 in UTC with the fraction the event has, the same form the
// REST edge gives timestamps.
const timestampLayout = time.RFC3339Nano

// Payload returns the webhook body for an outbox event: {id, type, created_at, data} with data.message_id
// (null for domain events), data.provider_response when the upstream server said something,
// data.bounce_class on a bounce or a delay,
// data.recipient_id when the event concerns one recipient (deliveries, bounces, opens, clicks),
// data.domain_id for domain events, and data.url and data.link_id for email.clicked. These bytes are stored
// with the delivery and sent unchanged on every attempt, so every retry carries the same signature input.
func Payload(ev ports.Event) []byte {
	b := body{
		ID:        ev.ID,
		Type:      ev.Type,
		CreatedAt: ev.OccurredAt.UTC().Format(timestampLayout),
		Data: data{
			ProviderResponse: ev.ProviderResponse,
			BounceClass:      ev.BounceClass,
			RecipientID:      ev.RecipientID,
			DomainID:         ev.DomainID,
			URL:              ev.URL,
			LinkID:           ev.LinkID,
		},
	}
	if ev.MessageID != "" {
		id := ev.MessageID
		b.Data.MessageID = &id
	}
	return encode(b)
}

// testPayload is the body of a test delivery (SPEC §6): email.delivered with data {test: true, message_id:
// null}.
func testPayload(eventID string, at time.Time) []byte {
	return encode(body{
		ID:        eventID,
		Type:      ports.EventEmailDelivered,
		CreatedAt: at.UTC().Format(timestampLayout),
		Data:      data{Test: true},
	})
}

// replayPayload rewrites a stored body for a replay (SPEC §6): the new event id, created_at and data as they
// were, and data.original_event_id naming the event re-sent.
func replayPayload(original []byte, eventID, originalEventID string) ([]byte, error) {
	var b body
	if err := json.Unmarshal(original, &b); err != nil {
		return nil, fmt.Errorf("webhook: stored payload: %w", err)
	}
	b.ID = eventID
	b.Data.OriginalEventID = originalEventID
	return encode(b), nil
}

// encode marshals a body without HTML escaping, so a provider response such as "<user@example.com>" reads
// as sent. A body holds only strings and a bool, which cannot fail to encode.
func encode(b body) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		panic("webhook: encode payload: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
