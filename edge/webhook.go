package edge

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagWebhooks is the OpenAPI tag of the webhook routes (SPEC §4.6).
const tagWebhooks = "Webhooks"

// maskedSecret is what listings show in place of an endpoint's secret (SPEC §2): the plaintext exists
// only in the create and rotate answers, and the sealed form never leaves the core.
const maskedSecret = "whsec_***"

// webhookEventType is one entry of eventTypes. Its schema's enum is ports.WebhookEventTypes itself, so
// the documented and validated list cannot drift from the one the core fans out.
type webhookEventType string

// Schema documents and validates the event list of SPEC §6.
func (webhookEventType) Schema(huma.Registry) *huma.Schema {
	enum := make([]any, 0, len(ports.WebhookEventTypes))
	for _, t := range ports.WebhookEventTypes {
		enum = append(enum, t)
	}
	return &huma.Schema{Type: huma.TypeString, Enum: enum}
}

// Endpoint and delivery shapes of SPEC §2. The endpoint response types have a secret field only as a
// string the edge fills in (masked or the one-time plaintext), so the sealed secret cannot leak.

type webhookEndpointResponse struct {
	ID         string    `json:"id" format:"uuid" doc:"Endpoint id"`
	URL        string    `json:"url" format:"uri" doc:"Where events are POSTed"`
	Enabled    bool      `json:"enabled" doc:"true on creation; no route toggles it"`
	EventTypes []string  `json:"eventTypes" nullable:"false" doc:"Event types of SPEC §6 the endpoint receives"`
	Secret     string    `json:"secret" enum:"whsec_***" doc:"Always masked in listings"`
	CreatedAt  time.Time `json:"createdAt" doc:"When the endpoint was created"`
}

// createdWebhookEndpointResponse repeats webhookEndpointResponse's fields rather than embedding it, for
// the same reason as createdAPIKeyResponse: huma documents only exported embedded types.
type createdWebhookEndpointResponse struct {
	ID         string    `json:"id" format:"uuid" doc:"Endpoint id"`
	URL        string    `json:"url" format:"uri" doc:"Where events are POSTed"`
	Enabled    bool      `json:"enabled" doc:"true on creation; no route toggles it"`
	EventTypes []string  `json:"eventTypes" nullable:"false" doc:"Event types of SPEC §6 the endpoint receives"`
	Secret     string    `json:"secret" pattern:"^whsec_[0-9a-f]{64}$" doc:"whsec_ and 64 hex characters, the HMAC-SHA256 key of x-service-signature; shown only in this response"`
	CreatedAt  time.Time `json:"createdAt" doc:"When the endpoint was created"`
}

type createWebhookRequest struct {
	_          struct{}           `json:"-" additionalProperties:"true"`
	URL        string             `json:"url" format:"uri" pattern:"^[Hh][Tt][Tt][Pp][Ss]?://" patternDescription:"an http or https URL" doc:"Absolute http or https URL; every attempt resolves it and refuses private, loopback, link-local and reserved addresses"`
	EventTypes []webhookEventType `json:"eventTypes" minItems:"1" nullable:"false" doc:"Event types to receive, from SPEC §6"`
}

type webhookDeliveryResponse struct {
	ID           string     `json:"id" format:"uuid" doc:"Delivery id; what replay takes"`
	EndpointID   string     `json:"endpointId" format:"uuid" doc:"The endpoint it was sent to"`
	EventID      string     `json:"eventId" doc:"The event's id, or evt_test_<uuid> / evt_replay_<uuid>; the x-service-event-id header and body id of the request"`
	EventType    string     `json:"eventType" doc:"Event type, such as email.delivered"`
	Status       string     `json:"status" enum:"pending,delivered,failed,dead,blocked" doc:"pending (not yet tried), delivered, failed (will be retried), dead (attempts used up) or blocked (address refused, never retried)"`
	Attempts     int        `json:"attempts" doc:"Attempts so far, at most 5"`
	ResponseCode int        `json:"responseCode" doc:"HTTP status of the last attempt; 0 when none arrived (network error, timeout, blocked)"`
	NextRetryAt  *time.Time `json:"nextRetryAt" doc:"When the next attempt is due; null unless failed with attempts left"`
	DeliveredAt  *time.Time `json:"deliveredAt" doc:"When a 2xx answered; null until then"`
	CreatedAt    time.Time  `json:"createdAt" doc:"When the delivery was created"`
	// BlockedReason is an addition to SPEC §2's delivery fields: a blocked delivery otherwise says nothing
	// about what to fix.
	BlockedReason *string `json:"blockedReason" example:"hooks.acme.example resolves to 10.0.0.5, a private address (10.0.0.0/8, RFC 1918); an operator can allow it with POSTMILL_WEBHOOK_ALLOW_NETS=10.0.0.5" doc:"Why the endpoint's address was refused (which address, which rule, how an operator allows it); null unless status is blocked"`
}

type replayPath struct {
	ID         string `path:"id" format:"uuid" doc:"Endpoint id"`
	DeliveryID string `path:"deliveryId" format:"uuid" doc:"Delivery to re-send"`
}

func (s *Server) registerWebhookRoutes() {
	// SPEC §5 rule 9: list routes for writers accept either scope.
	read := access{kind: authKey, scopes: []string{ports.ScopeWebhooksRead, ports.ScopeWebhooksWrite}}
	write := access{kind: authKey, scopes: []string{ports.ScopeWebhooksWrite}}

	register(s, huma.Operation{
		OperationID: "list-webhooks", Method: http.MethodGet, Path: "/v1/webhooks",
		Tags: []string{tagWebhooks}, Summary: "List webhook endpoints",
		Description: "The organization's endpoints, newest first, with secrets masked as whsec_***: a bare array " +
			"of the newest 1000, or with limit or cursor a page {data, nextCursor}.",
	}, read, s.listWebhooks, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "create-webhook", Method: http.MethodPost, Path: "/v1/webhooks", DefaultStatus: http.StatusCreated,
		Tags: []string{tagWebhooks}, Summary: "Create a webhook endpoint",
		Description: "Registers an http or https URL for the given event types. The answer carries the signing " +
			"secret (whsec_ and 64 hex characters) in plaintext: it is shown only here and on rotate-secret. An " +
			"organization holding as many endpoints as the deployment allows (20 unless the operator raised " +
			"POSTMILL_MAX_WEBHOOKS_PER_ORG) gets 403 resource_limit_reached.",
	}, write, s.createWebhook, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "delete-webhook", Method: http.MethodDelete, Path: "/v1/webhooks/{id}",
		Tags: []string{tagWebhooks}, Summary: "Delete a webhook endpoint",
		Description: "Deletes the endpoint and its deliveries.",
	}, write, s.deleteWebhook, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "test-webhook", Method: http.MethodPost, Path: "/v1/webhooks/{id}/test", DefaultStatus: http.StatusCreated,
		Tags: []string{tagWebhooks}, Summary: "Send a test event",
		Description: "Sends a sample email.delivered event (data {test: true, message_id: null}, event id " +
			"evt_test_<uuid>) now, whatever the endpoint subscribes to, and answers the delivery row after " +
			"the attempt.",
	}, write, s.testWebhook, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "rotate-webhook-secret", Method: http.MethodPost, Path: "/v1/webhooks/{id}/rotate-secret", DefaultStatus: http.StatusCreated,
		Tags: []string{tagWebhooks}, Summary: "Rotate a webhook secret",
		Description: "Replaces the signing secret at once and answers the endpoint with the new one in plaintext, " +
			"shown only here.",
	}, write, s.rotateWebhookSecret, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "replay-webhook-delivery", Method: http.MethodPost, Path: "/v1/webhooks/{id}/replay/{deliveryId}", DefaultStatus: http.StatusCreated,
		Tags: []string{tagWebhooks}, Summary: "Replay a delivery",
		Description: "Re-delivers a past delivery's event as a new delivery row, due now: event id " +
			"evt_replay_<uuid>, the original payload and created_at, and the original event id in " +
			"data.original_event_id and the x-service-original-event-id header. 404 when the delivery or " +
			"its endpoint is gone.",
	}, write, s.replayWebhookDelivery, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "list-webhook-events", Method: http.MethodGet, Path: "/v1/webhook-events",
		Tags: []string{tagWebhooks}, Summary: "List recent webhook deliveries",
		Description: "The 100 most recent deliveries across the organization's endpoints, newest first; no paging. " +
			"A blocked delivery says why in blockedReason.",
	}, read, s.listWebhookEvents)
}

func toWebhookEndpoint(e ports.WebhookEndpoint) webhookEndpointResponse {
	types := e.EventTypes
	if types == nil {
		types = []string{}
	}
	return webhookEndpointResponse{
		ID: e.ID, URL: maskURLPassword(e.URL), Enabled: e.Enabled, EventTypes: types, Secret: maskedSecret, CreatedAt: utc(e.CreatedAt),
	}
}

// maskURLPassword shows the password of a URL's userinfo (https://user:password@host/…, which an endpoint
// may use for HTTP Basic authentication) as ***, like the signing secret: it is a credential of the
// receiver and is never shown again after the create request that carried it. The rest of the URL is
// returned as stored.
func maskURLPassword(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !urlScheme(scheme) {
		return raw
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return raw
	}
	return scheme + "://" + user + ":***" + rest[at:]
}

// urlScheme reports whether s is a URL scheme (RFC 3986 §3.1: a letter, then letters, digits, "+", "-" or
// "."), so that maskURLPassword leaves alone a text that merely contains a URL.
func urlScheme(s string) bool {
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

func toCreatedWebhookEndpoint(e ports.CreatedWebhookEndpoint) *body[createdWebhookEndpointResponse] {
	m := toWebhookEndpoint(e.WebhookEndpoint)
	return &body[createdWebhookEndpointResponse]{createdWebhookEndpointResponse{
		ID: m.ID, URL: m.URL, Enabled: m.Enabled, EventTypes: m.EventTypes, Secret: e.PlainSecret, CreatedAt: m.CreatedAt,
	}}
}

func toWebhookDelivery(d ports.WebhookDelivery) webhookDeliveryResponse {
	out := webhookDeliveryResponse{
		ID:           d.ID,
		EndpointID:   d.EndpointID,
		EventID:      d.EventID,
		EventType:    d.EventType,
		Status:       d.Status,
		Attempts:     d.Attempts,
		ResponseCode: d.ResponseCode,
		NextRetryAt:  utcPtr(d.NextRetryAt),
		DeliveredAt:  utcPtr(d.DeliveredAt),
		CreatedAt:    utc(d.CreatedAt),
	}
	if d.Status == ports.WebhookBlocked && d.BlockedReason != "" {
		out.BlockedReason = &d.BlockedReason
	}
	return out
}

// httpURL reports whether raw is an absolute http or https URL with a host: the pattern on the schema
// checks only the scheme, and url.Parse accepts relative and host-less forms.
func httpURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Hostname() == "" {
		return false
	}
	scheme := strings.ToLower(u.Scheme)
	return scheme == "http" || scheme == "https"
}

func (s *Server) listWebhooks(ctx context.Context, in *listQuery) (*body[listBody[webhookEndpointResponse]], error) {
	orgID := principalFrom(ctx).OrganizationID
	if !in.paged() {
		endpoints, err := s.core.Webhooks.ListEndpoints(ctx, orgID)
		if err != nil {
			return nil, err
		}
		return &body[listBody[webhookEndpointResponse]]{bareList(mapItems(endpoints, toWebhookEndpoint))}, nil
	}
	page, err := s.core.Webhooks.ListEndpointsPage(ctx, orgID, in.pageQuery())
	if err != nil {
		return nil, err
	}
	return &body[listBody[webhookEndpointResponse]]{pageList(mapItems(page.Data, toWebhookEndpoint), page.NextCursor)}, nil
}

func (s *Server) createWebhook(ctx context.Context, in *body[createWebhookRequest]) (*body[createdWebhookEndpointResponse], error) {
	if !httpURL(in.Body.URL) {
		return nil, ports.ValidationError(ports.FieldViolation{Path: "url", Message: "expected an absolute http or https URL with a host"})
	}
	types := make([]string, 0, len(in.Body.EventTypes))
	for _, t := range in.Body.EventTypes {
		types = append(types, string(t))
	}
	e, err := s.core.Webhooks.CreateEndpoint(ctx, principalFrom(ctx).OrganizationID, in.Body.URL, types)
	if err != nil {
		return nil, err
	}
	return toCreatedWebhookEndpoint(e), nil
}

func (s *Server) deleteWebhook(ctx context.Context, in *idPath) (*body[deletedResponse], error) {
	if err := s.core.Webhooks.DeleteEndpoint(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)); err != nil {
		return nil, err
	}
	return &body[deletedResponse]{deletedResponse{Deleted: true}}, nil
}

func (s *Server) testWebhook(ctx context.Context, in *idPath) (*body[webhookDeliveryResponse], error) {
	d, err := s.core.Webhooks.TestEndpoint(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[webhookDeliveryResponse]{toWebhookDelivery(d)}, nil
}

func (s *Server) rotateWebhookSecret(ctx context.Context, in *idPath) (*body[createdWebhookEndpointResponse], error) {
	e, err := s.core.Webhooks.RotateSecret(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return toCreatedWebhookEndpoint(e), nil
}

func (s *Server) replayWebhookDelivery(ctx context.Context, in *replayPath) (*body[webhookDeliveryResponse], error) {
	d, err := s.core.Webhooks.Replay(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), canonicalUUID(in.DeliveryID))
	if err != nil {
		return nil, err
	}
	return &body[webhookDeliveryResponse]{toWebhookDelivery(d)}, nil
}

func (s *Server) listWebhookEvents(ctx context.Context, _ *struct{}) (*body[[]webhookDeliveryResponse], error) {
	deliveries, err := s.core.Webhooks.ListDeliveries(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	out := make([]webhookDeliveryResponse, 0, len(deliveries))
	for _, d := range deliveries {
		out = append(out, toWebhookDelivery(d))
	}
	return &body[[]webhookDeliveryResponse]{out}, nil
}
