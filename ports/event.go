package ports

import "time"

// Event types (SPEC §6). The message timeline shows them without the "email." prefix.
const (
	EventEmailQueued          = "email.queued"
	EventEmailScheduled       = "email.scheduled"
	EventEmailSent            = "email.sent"
	EventEmailDelivered       = "email.delivered"
	EventEmailDeliveryDelayed = "email.delivery_delayed"
	EventEmailBounced         = "email.bounced"
	EventEmailComplained      = "email.complained"
	EventEmailOpened          = "email.opened"
	EventEmailClicked         = "email.clicked"
	EventEmailFailed          = "email.failed"
	EventEmailCancelled       = "email.cancelled" // timeline only; not a webhook event type
	EventEmailReceived        = "email.received"
	EventDomainCreated        = "domain.created"
	EventDomainVerified       = "domain.verified"
	EventDomainFailed         = "domain.failed"
)

// Event is one row of the event outbox: every message state change and every domain event, written in the
// same transaction as the change it records. The message timeline reads it; the webhook dispatcher and the
// analytics stream fan it out.
type Event struct {
	ID               string // UUIDv7
	OrganizationID   string
	Type             string
	MessageID        string // "" for domain events
	RecipientID      string // "" when the event is about the whole message
	DomainID         string // domain events
	ProviderResponse *string
	// BounceClass is what a refusal means (a BounceClass* value), on email.bounced and
	// email.delivery_delayed; "" on every other event.
	BounceClass string
	URL         string // email.clicked: the link followed
	LinkID      string // email.clicked: the link's position in the HTML body, from 0
	OccurredAt  time.Time
}
