package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagTopics is the OpenAPI tag of the topic routes (SPEC §4.8).
const tagTopics = "Topics"

type topicResponse struct {
	ID          string    `json:"id" format:"uuid" doc:"Topic id"`
	Key         string    `json:"key" doc:"1-64 characters matching ^[a-z0-9][a-z0-9_-]*$; immutable; segments name it as topic.<key>"`
	Name        string    `json:"name" doc:"Name shown on the preference page"`
	Description string    `json:"description" doc:"Description shown on the preference page"`
	DoubleOptIn bool      `json:"doubleOptIn" doc:"When true a subscription is pending until the contact confirms it"`
	ConfirmFrom string    `json:"confirmFrom" doc:"The From address of the confirmation mail Postmill sends a pending subscription; empty: none is sent"`
	CreatedAt   time.Time `json:"createdAt" doc:"When the topic was created"`
	UpdatedAt   time.Time `json:"updatedAt" doc:"When the topic last changed"`
}

func toTopic(t ports.Topic) topicResponse {
	return topicResponse{ID: t.ID, Key: t.Key, Name: t.Name, Description: t.Description, DoubleOptIn: t.DoubleOptIn,
		ConfirmFrom: t.ConfirmFrom, CreatedAt: utc(t.CreatedAt), UpdatedAt: utc(t.UpdatedAt)}
}

type createTopicRequest struct {
	_           struct{} `json:"-" additionalProperties:"true"`
	Key         string   `json:"key" doc:"1-64 characters matching ^[a-z0-9][a-z0-9_-]*$, unique in the organization"`
	Name        *string  `json:"name" doc:"1-200 characters"`
	Description *string  `json:"description,omitempty" doc:"At most 2000 characters"`
	DoubleOptIn *bool    `json:"doubleOptIn,omitempty" doc:"Require a confirmation click before a subscription counts; default false"`
	ConfirmFrom *string  `json:"confirmFrom,omitempty" doc:"With doubleOptIn: the From address (at a verified sending domain) of the confirmation mail Postmill sends each pending subscription; absent or empty: the application mails the link"`
}

type patchTopicRequest struct {
	_           struct{} `json:"-" additionalProperties:"true"`
	Key         *string  `json:"key,omitempty" doc:"Immutable: any value is refused with 400"`
	Name        *string  `json:"name,omitempty" doc:"1-200 characters"`
	Description *string  `json:"description,omitempty" doc:"At most 2000 characters"`
	DoubleOptIn *bool    `json:"doubleOptIn,omitempty" doc:"Require confirmation of new subscriptions"`
	ConfirmFrom *string  `json:"confirmFrom,omitempty" doc:"The From address of the confirmation mail, at a verified sending domain; empty stops the mails"`
}

type patchTopicInput struct {
	ID   string `path:"id" format:"uuid" doc:"Topic id"`
	Body patchTopicRequest
}

type topicSubscriptionRequest struct {
	_             struct{} `json:"-" additionalProperties:"true"`
	ContactID     string   `json:"contactId,omitempty" doc:"The contact, by id; exactly one of contactId and email"`
	Email         string   `json:"email,omitempty" doc:"The contact, by email; an email that is not a contact yet creates one"`
	ConsentSource string   `json:"consentSource,omitempty" doc:"How consent was given, at most 128 characters"`
	ConsentIP     string   `json:"consentIp,omitempty" doc:"The IP address consent came from, at most 64 characters"`
}

type topicSubscriptionInput struct {
	ID   string `path:"id" format:"uuid" doc:"Topic id"`
	Body topicSubscriptionRequest
}

type topicSubscriptionResponse struct {
	TopicID       string     `json:"topicId" format:"uuid" doc:"The topic"`
	ContactID     string     `json:"contactId" format:"uuid" doc:"The contact"`
	Email         string     `json:"email" doc:"The contact's email"`
	Status        string     `json:"status" enum:"pending,subscribed,unsubscribed" doc:"pending until confirmed on a double opt-in topic; only subscribed counts for audiences and topic rules"`
	ConsentSource string     `json:"consentSource" doc:"How consent was given or withdrawn"`
	ConsentIP     string     `json:"consentIp" doc:"The IP address consent came from"`
	ConfirmedAt   *time.Time `json:"confirmedAt" doc:"When the subscription became subscribed; null while pending"`
	CreatedAt     time.Time  `json:"createdAt" doc:"When the contact first subscribed"`
	UpdatedAt     time.Time  `json:"updatedAt" doc:"When the subscription last changed"`
}

type topicSubscriptionResult struct {
	Subscription topicSubscriptionResponse `json:"subscription" doc:"The contact's subscription to the topic"`
	ConfirmToken *string                   `json:"confirmToken" doc:"While pending: the token of the confirmation link {base_url}/p/confirm/<token> to mail the contact; null otherwise"`
	// The confirmation mail of a topic with confirmFrom: additions to SPEC §4.8's answer.
	ConfirmationEmailID *string    `json:"confirmationEmailId,omitempty" doc:"While pending on a topic with confirmFrom: the id of the message that mailed the confirmation link (GET /v1/emails/{id})"`
	ConfirmationError   *errorBody `json:"confirmationError,omitempty" doc:"While pending on a topic with confirmFrom: why the confirmation mail was refused (a suppressed address, the plan's allowance, ...); the subscription is recorded, pending"`
}

func (s *Server) registerTopicRoutes() {
	if s.core.Topics == nil {
		return
	}
	read := access{kind: authKey, scopes: []string{ports.ScopeTopicsRead}}
	list := access{kind: authKey, scopes: []string{ports.ScopeTopicsRead, ports.ScopeTopicsWrite}}
	write := access{kind: authKey, scopes: []string{ports.ScopeTopicsWrite}}
	op := func(id, method, path string, status int, summary, desc string) huma.Operation {
		return huma.Operation{OperationID: id, Method: method, Path: path, DefaultStatus: status,
			Tags: []string{tagTopics}, Summary: summary, Description: desc}
	}
	register(s, op("create-topic", http.MethodPost, "/v1/topics", http.StatusCreated, "Create a topic",
		"A topic contacts subscribe to. A key in use is 409 with constraint topics_organization_id_key_key."),
		write, s.createTopic, http.StatusBadRequest, http.StatusConflict)
	register(s, op("list-topics", http.MethodGet, "/v1/topics", http.StatusOK, "List topics",
		"One page of the organization's topics, newest first, as a bare array: limit 1-100 (default 25) from offset."),
		list, s.listTopics, http.StatusBadRequest)
	register(s, op("get-topic", http.MethodGet, "/v1/topics/{id}", http.StatusOK, "Get a topic", "One topic."),
		read, s.getTopic, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("update-topic", http.MethodPatch, "/v1/topics/{id}", http.StatusOK, "Update a topic",
		"Changes everything but the key."), write, s.updateTopic, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("delete-topic", http.MethodDelete, "/v1/topics/{id}", http.StatusOK, "Delete a topic",
		"Deletes the topic and its subscriptions."), write, s.deleteTopic, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("subscribe-topic", http.MethodPost, "/v1/topics/{id}/subscribe", http.StatusOK, "Subscribe a contact",
		"Subscribes a contact, by id or email (a new email creates the contact), recording the consent source "+
			"and IP. On a double opt-in topic the subscription is pending and the answer carries confirmToken for "+
			"POST /p/confirm/{token}; a confirmed subscription stays subscribed."),
		write, s.subscribeTopic, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("unsubscribe-topic", http.MethodPost, "/v1/topics/{id}/unsubscribe", http.StatusOK,
		"Unsubscribe a contact", "Records that the contact left the topic; same body as subscribe."),
		write, s.unsubscribeTopic, http.StatusBadRequest, http.StatusNotFound)
}

func (s *Server) createTopic(ctx context.Context, in *body[createTopicRequest]) (*body[topicResponse], error) {
	r := in.Body
	t, err := s.core.Topics.CreateTopic(ctx, principalFrom(ctx).OrganizationID,
		ports.TopicInput{Key: r.Key, Name: r.Name, Description: r.Description, DoubleOptIn: r.DoubleOptIn, ConfirmFrom: r.ConfirmFrom})
	if err != nil {
		return nil, err
	}
	return &body[topicResponse]{toTopic(t)}, nil
}

func (s *Server) listTopics(ctx context.Context, in *offsetQuery) (*body[[]topicResponse], error) {
	ts, err := s.core.Topics.ListTopics(ctx, principalFrom(ctx).OrganizationID, in.Limit, in.Offset)
	if err != nil {
		return nil, err
	}
	return &body[[]topicResponse]{mapItems(ts, toTopic)}, nil
}

func (s *Server) getTopic(ctx context.Context, in *idPath) (*body[topicResponse], error) {
	t, err := s.core.Topics.GetTopic(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[topicResponse]{toTopic(t)}, nil
}

func (s *Server) updateTopic(ctx context.Context, in *patchTopicInput) (*body[topicResponse], error) {
	r := in.Body
	ti := ports.TopicInput{Name: r.Name, Description: r.Description, DoubleOptIn: r.DoubleOptIn, ConfirmFrom: r.ConfirmFrom}
	if r.Key != nil {
		ti.Key = *r.Key
		if ti.Key == "" {
			ti.Key = " "
		}
	}
	t, err := s.core.Topics.UpdateTopic(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), ti)
	if err != nil {
		return nil, err
	}
	return &body[topicResponse]{toTopic(t)}, nil
}

func (s *Server) deleteTopic(ctx context.Context, in *idPath) (*body[deletedResponse], error) {
	if err := s.core.Topics.DeleteTopic(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)); err != nil {
		return nil, err
	}
	return &body[deletedResponse]{deletedResponse{Deleted: true}}, nil
}

func (r topicSubscriptionRequest) port() ports.SubscriptionRequest {
	return ports.SubscriptionRequest{ContactID: r.ContactID, Email: r.Email, ConsentSource: r.ConsentSource, ConsentIP: r.ConsentIP}
}

func toSubscriptionResult(r ports.SubscriptionResult) *body[topicSubscriptionResult] {
	sub := r.Subscription
	out := topicSubscriptionResult{ConfirmToken: nullIfEmpty(r.ConfirmToken), ConfirmationEmailID: nullIfEmpty(r.ConfirmationEmailID),
		Subscription: topicSubscriptionResponse{
			TopicID: sub.TopicID, ContactID: sub.ContactID, Email: sub.Email, Status: sub.Status,
			ConsentSource: sub.ConsentSource, ConsentIP: sub.ConsentIP, ConfirmedAt: utcPtr(sub.ConfirmedAt),
			CreatedAt: utc(sub.CreatedAt), UpdatedAt: utc(sub.UpdatedAt)}}
	if r.ConfirmationError != nil {
		out.ConfirmationError = problemFor(r.ConfirmationError)
	}
	return &body[topicSubscriptionResult]{out}
}

func (s *Server) subscribeTopic(ctx context.Context, in *topicSubscriptionInput) (*body[topicSubscriptionResult], error) {
	r, err := s.core.Topics.SubscribeTopic(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), in.Body.port())
	if err != nil {
		return nil, err
	}
	return toSubscriptionResult(r), nil
}

func (s *Server) unsubscribeTopic(ctx context.Context, in *topicSubscriptionInput) (*body[topicSubscriptionResult], error) {
	r, err := s.core.Topics.UnsubscribeTopic(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), in.Body.port())
	if err != nil {
		return nil, err
	}
	return toSubscriptionResult(r), nil
}
