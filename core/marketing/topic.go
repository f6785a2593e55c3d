package marketing

import (
	"context"
	"regexp"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

const (
	msgTopicKey  = "must be 1 to 64 characters matching ^[a-z0-9][a-z0-9_-]*$"
	msgOneOfWho  = "exactly one of contactId and email is required"
	msgContactID = "must be a uuid"
)

var topicKeyPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func validTopicKey(k string) bool { return topicKeyPattern.MatchString(k) }

// checkTopic checks a topic body; create requires key and name.
func checkTopic(in ports.TopicInput, create bool) violations {
	var v violations
	if create {
		if !validTopicKey(in.Key) {
			v.add("key", msgTopicKey)
		}
		if in.Name == nil {
			v.add("name", msgRequired)
		}
	} else if in.Key != "" {
		v.add("key", msgImmutable)
	}
	if in.Name != nil && (*in.Name == "" || !storable(*in.Name) || utf8.RuneCountInString(*in.Name) > ports.MaxTopicNameLen) {
		v.add("name", "must be 1 to 200 characters")
	}
	v.checkText("description", in.Description, ports.MaxTopicDescriptionLen)
	v.checkConfirmFromSyntax(in.ConfirmFrom)
	return v
}

// CreateTopic stores a new topic. Errors: already_exists (topics_organization_id_key_key) for a key in use.
func (s *Topics) CreateTopic(ctx context.Context, orgID string, in ports.TopicInput) (ports.Topic, error) {
	if err := checkTopic(in, true).err(); err != nil {
		return ports.Topic{}, err
	}
	if err := s.checkConfirmFromDomain(ctx, orgID, in.ConfirmFrom); err != nil {
		return ports.Topic{}, err
	}
	now := s.now()
	t := ports.Topic{ID: newID(), OrganizationID: orgID, Key: in.Key, Name: *in.Name, CreatedAt: now, UpdatedAt: now}
	if in.Description != nil {
		t.Description = *in.Description
	}
	if in.DoubleOptIn != nil {
		t.DoubleOptIn = *in.DoubleOptIn
	}
	if in.ConfirmFrom != nil {
		t.ConfirmFrom = *in.ConfirmFrom
	}
	return s.topics.CreateTopic(ctx, t)
}

// GetTopic returns one of the organization's topics.
func (s *Topics) GetTopic(ctx context.Context, orgID, id string) (ports.Topic, error) {
	if !validID(id) {
		return ports.Topic{}, notFound("topic")
	}
	return s.topics.GetTopic(ctx, orgID, id)
}

// ListTopics checks the page (limit 1-100, default 25; offset from 0) and returns it, newest first.
func (s *Topics) ListTopics(ctx context.Context, orgID string, limit, offset int) ([]ports.Topic, error) {
	limit, err := ports.CheckOffsetPage(limit, offset)
	if err != nil {
		return nil, err
	}
	return s.topics.ListTopics(ctx, orgID, limit, offset)
}

// UpdateTopic changes everything but the key.
func (s *Topics) UpdateTopic(ctx context.Context, orgID, id string, in ports.TopicInput) (ports.Topic, error) {
	if err := checkTopic(in, false).err(); err != nil {
		return ports.Topic{}, err
	}
	if !validID(id) {
		return ports.Topic{}, notFound("topic")
	}
	if err := s.checkConfirmFromDomain(ctx, orgID, in.ConfirmFrom); err != nil {
		return ports.Topic{}, err
	}
	return s.topics.UpdateTopic(ctx, orgID, id, in, s.now())
}

// DeleteTopic removes a topic and its subscriptions.
func (s *Topics) DeleteTopic(ctx context.Context, orgID, id string) error {
	if !validID(id) {
		return notFound("topic")
	}
	return s.topics.DeleteTopic(ctx, orgID, id)
}

// checkSubscription checks a subscribe or unsubscribe body and normalises its email.
func checkSubscription(r *ports.SubscriptionRequest) error {
	var v violations
	r.Email = NormalizeEmail(r.Email)
	switch {
	case (r.ContactID == "") == (r.Email == ""):
		v.add("", msgOneOfWho)
	case r.ContactID != "" && !validID(r.ContactID):
		v.add("contactId", msgContactID)
	case r.Email != "":
		v.checkEmail("email", r.Email)
	}
	v.checkText("consentSource", &r.ConsentSource, ports.MaxConsentSourceLen)
	v.checkText("consentIp", &r.ConsentIP, ports.MaxConsentIPLen)
	return v.err()
}

// SubscribeTopic subscribes a contact (by id, or by email, creating the contact) to the topic. On a double
// opt-in topic a new subscription is pending and the answer carries a confirm token for
// POST /p/confirm/{token}; a subscription already confirmed stays subscribed.
func (s *Topics) SubscribeTopic(ctx context.Context, orgID, topicID string, r ports.SubscriptionRequest) (ports.SubscriptionResult, error) {
	return s.set(ctx, orgID, topicID, r, true)
}

// UnsubscribeTopic records that the contact left the topic.
func (s *Topics) UnsubscribeTopic(ctx context.Context, orgID, topicID string, r ports.SubscriptionRequest) (ports.SubscriptionResult, error) {
	return s.set(ctx, orgID, topicID, r, false)
}

func (s *Topics) set(ctx context.Context, orgID, topicID string, r ports.SubscriptionRequest, subscribe bool) (ports.SubscriptionResult, error) {
	if err := checkSubscription(&r); err != nil {
		return ports.SubscriptionResult{}, err
	}
	if !validID(topicID) {
		return ports.SubscriptionResult{}, notFound("topic")
	}
	topic, err := s.topics.GetTopic(ctx, orgID, topicID)
	if err != nil {
		return ports.SubscriptionResult{}, err
	}
	now := s.now()
	status := ports.ConsentUnsubscribed
	if subscribe {
		status = ports.ConsentSubscribed
		if topic.DoubleOptIn {
			status = ports.ConsentPending
		}
	}
	// The contact a new email creates: pending until it confirms on a double opt-in topic.
	contact := ports.Contact{ID: newID(), OrganizationID: orgID, Email: r.Email, Source: "subscribe",
		Properties: map[string]any{}, ConsentStatus: status, ConsentSource: r.ConsentSource, ConsentIP: r.ConsentIP,
		ConsentAt: &now, CreatedAt: now, UpdatedAt: now}
	sub, err := s.topics.SetSubscription(ctx, orgID, topicID, r, contact, status, now)
	if err != nil {
		return ports.SubscriptionResult{}, err
	}
	res := ports.SubscriptionResult{Subscription: sub}
	if sub.Status == ports.ConsentPending {
		res.ConfirmToken, err = SealPublicToken(s.keyring, PurposeConfirm, PublicToken{
			OrganizationID: orgID, ContactID: sub.ContactID, TopicID: topicID, IssuedAt: now})
		if err != nil {
			return ports.SubscriptionResult{}, err
		}
		if err := s.mailConfirmation(ctx, orgID, topic, &res); err != nil {
			return ports.SubscriptionResult{}, err
		}
	}
	return res, nil
}
