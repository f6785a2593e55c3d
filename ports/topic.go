package ports

import (
	"context"
	"time"
)

// Topic bounds (SPEC §2 Topic).
const (
	MaxTopicKeyLen         = 64
	MaxTopicNameLen        = 200
	MaxTopicDescriptionLen = 2000
)

// Topic is a subject contacts subscribe to (SPEC §2). Key is immutable.
type Topic struct {
	ID             string
	OrganizationID string
	Key            string
	Name           string
	Description    string
	DoubleOptIn    bool
	// ConfirmFrom, when set on a double opt-in topic, is the From address of the confirmation mail a
	// pending subscription is sent; empty: the application mails the confirmation link itself.
	ConfirmFrom string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// TopicInput is a topic create or update body: nil fields are absent. Key is only read on create.
type TopicInput struct {
	Key         string
	Name        *string
	Description *string
	DoubleOptIn *bool
	ConfirmFrom *string
}

// SubscriptionRequest is the body of POST /v1/topics/{id}/subscribe and /unsubscribe: ContactID or Email.
type SubscriptionRequest struct {
	ContactID     string
	Email         string
	ConsentSource string
	ConsentIP     string
}

// TopicSubscription is one contact's state on one topic.
type TopicSubscription struct {
	TopicID       string
	ContactID     string
	Email         string
	Status        string
	ConsentSource string
	ConsentIP     string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	ConfirmedAt   *time.Time
}

// SubscriptionResult is the subscribe answer: ConfirmToken is set while the subscription is pending (a
// double opt-in topic) and names it for POST /p/confirm/{token}.
type SubscriptionResult struct {
	Subscription TopicSubscription
	ConfirmToken string
	// ConfirmationEmailID is the message that mailed the confirmation link, when the topic has a
	// ConfirmFrom and the subscription is pending; ConfirmationError says why that send was refused
	// instead (the subscription stays recorded, pending).
	ConfirmationEmailID string
	ConfirmationError   *Error
}

// TopicService is the topics use case (SPEC §4.8). Errors: invalid_argument with details, not_found,
// already_exists (topics_organization_id_key_key).
type TopicService interface {
	CreateTopic(ctx context.Context, orgID string, in TopicInput) (Topic, error)
	GetTopic(ctx context.Context, orgID, id string) (Topic, error)
	// ListTopics returns one page of the organization's topics, newest first: limit 1-MaxListLimit (0 means
	// DefaultListLimit) from offset (0 or more). Errors: invalid_argument (limit, offset).
	ListTopics(ctx context.Context, orgID string, limit, offset int) ([]Topic, error)
	UpdateTopic(ctx context.Context, orgID, id string, in TopicInput) (Topic, error)
	DeleteTopic(ctx context.Context, orgID, id string) error
	SubscribeTopic(ctx context.Context, orgID, topicID string, r SubscriptionRequest) (SubscriptionResult, error)
	UnsubscribeTopic(ctx context.Context, orgID, topicID string, r SubscriptionRequest) (SubscriptionResult, error)
}

// TopicStore is what the topics use case reads and writes, scoped by organization.
type TopicStore interface {
	CreateTopic(ctx context.Context, t Topic) (Topic, error)
	GetTopic(ctx context.Context, orgID, id string) (Topic, error)
	// ListTopics returns limit topics from offset, newest first.
	ListTopics(ctx context.Context, orgID string, limit, offset int) ([]Topic, error)
	UpdateTopic(ctx context.Context, orgID, id string, in TopicInput, now time.Time) (Topic, error)
	DeleteTopic(ctx context.Context, orgID, id string) error
	// SetSubscription writes the contact's subscription to the topic with status, creating the contact
	// first when the request names an email that is not one yet (contact is then its initial record).
	// Moving to subscribed sets confirmed_at. Errors: not_found (topic or contactId not the organization's).
	SetSubscription(ctx context.Context, orgID, topicID string, r SubscriptionRequest, contact Contact, status string, now time.Time) (TopicSubscription, error)
	// GetSubscription reads one subscription. Errors: not_found.
	GetSubscription(ctx context.Context, orgID, topicID, contactID string) (TopicSubscription, error)
	// ConfirmSubscription moves a pending subscription to subscribed; a subscribed one stays as it is.
	// Errors: not_found (none, or unsubscribed since).
	ConfirmSubscription(ctx context.Context, orgID, topicID, contactID, ip string, now time.Time) (TopicSubscription, error)
}
