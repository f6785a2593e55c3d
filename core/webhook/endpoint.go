package webhook

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/postmill/postmill/ports"
)

// MaxURLLength bounds an endpoint URL: the length browsers and proxies reliably accept, far beyond any
// legitimate receiver address.
const MaxURLLength = 2048

// RecentDeliveries is SPEC §8's webhook-events window: the most recent deliveries listed, without paging.
const RecentDeliveries = 100

// DefaultMaxEndpoints is how many endpoints an organization may hold (POSTMILL_MAX_WEBHOOKS_PER_ORG): every
// event is fanned out to each subscribed endpoint, so the count multiplies the work of every send.
const DefaultMaxEndpoints = 20

// MaxEndpointsSetting names the configuration that raises Config.MaxEndpoints, for the refusal's message.
const MaxEndpointsSetting = "POSTMILL_MAX_WEBHOOKS_PER_ORG"

// Event id prefixes of deliveries that do not come from the outbox (SPEC §6).
const (
	TestEventPrefix   = "evt_test_"
	ReplayEventPrefix = "evt_replay_"
)

// CreateEndpoint registers a URL for the given event types, enabled, with a fresh signing secret sealed
// under the endpoint id. The answer is the only time the plaintext secret is shown. Duplicate event types
// are kept once. The store inserts it only while the organization holds fewer than Config.MaxEndpoints,
// decided atomically with the insert. Errors: invalid_argument (url: not an http or https URL with a host,
// or too long; eventTypes: empty; eventTypes.N: not an event type of SPEC §6), permission_denied
// (ports.ReasonResourceLimit).
func (s *Service) CreateEndpoint(ctx context.Context, orgID, rawURL string, eventTypes []string) (ports.CreatedWebhookEndpoint, error) {
	var violations []ports.FieldViolation
	if v, ok := validateURL(rawURL); !ok {
		violations = append(violations, v)
	}
	types, vs := validateEventTypes(eventTypes)
	violations = append(violations, vs...)
	if len(violations) > 0 {
		return ports.CreatedWebhookEndpoint{}, ports.ValidationError(violations...)
	}
	ep := ports.WebhookEndpoint{
		ID:             newID(),
		OrganizationID: orgID,
		URL:            rawURL,
		Enabled:        true,
		EventTypes:     types,
		CreatedAt:      s.now(),
	}
	plain := newSecret()
	sealed, err := s.keyring.Seal([]byte(plain), []byte(ep.ID))
	if err != nil {
		return ports.CreatedWebhookEndpoint{}, fmt.Errorf("webhook: seal secret: %w", err)
	}
	ep.Secret = sealed
	inserted, err := s.store.InsertEndpointWithin(ctx, ep, s.cfg.MaxEndpoints)
	if err != nil {
		return ports.CreatedWebhookEndpoint{}, fmt.Errorf("webhook: insert endpoint: %w", err)
	}
	if !inserted {
		return ports.CreatedWebhookEndpoint{}, ports.ResourceLimitReached(ports.ResourceWebhooks, "webhook endpoints",
			s.cfg.MaxEndpoints, MaxEndpointsSetting)
	}
	ep.Secret = nil
	return ports.CreatedWebhookEndpoint{WebhookEndpoint: ep, PlainSecret: plain}, nil
}

// ListEndpoints returns the organization's newest ports.MaxUnpagedListRows endpoints, newest first, with
// their sealed secrets removed: the edge shows MaskedSecret.
func (s *Service) ListEndpoints(ctx context.Context, orgID string) ([]ports.WebhookEndpoint, error) {
	page, err := s.listEndpoints(ctx, orgID, ports.Unpaged())
	return page.Data, err
}

// ListEndpointsPage pages the organization's endpoints newest first, without secrets. Errors:
// invalid_argument (limit outside 1-100, a cursor the store did not issue).
func (s *Service) ListEndpointsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.WebhookEndpoint], error) {
	q, err := q.Checked()
	if err != nil {
		return ports.Page[ports.WebhookEndpoint]{}, err
	}
	return s.listEndpoints(ctx, orgID, q)
}

func (s *Service) listEndpoints(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.WebhookEndpoint], error) {
	page, err := s.store.ListEndpoints(ctx, orgID, q)
	if err != nil {
		return ports.Page[ports.WebhookEndpoint]{}, fmt.Errorf("webhook: list endpoints: %w", err)
	}
	for i := range page.Data {
		page.Data[i].Secret = nil
	}
	return page, nil
}

// DeleteEndpoint deletes the endpoint and its deliveries; a claimed delivery's late result is then ignored
// by the store. Errors: not_found.
func (s *Service) DeleteEndpoint(ctx context.Context, orgID, id string) error {
	if err := s.store.DeleteEndpoint(ctx, orgID, id); err != nil {
		return fmt.Errorf("webhook: delete endpoint: %w", err)
	}
	return nil
}

// RotateSecret replaces the endpoint's secret with a fresh one and returns it in plaintext, once. Attempts
// that start afterwards sign with the new secret; the dispatcher notices the changed sealed bytes.
// Errors: not_found.
func (s *Service) RotateSecret(ctx context.Context, orgID, id string) (ports.CreatedWebhookEndpoint, error) {
	plain := newSecret()
	sealed, err := s.keyring.Seal([]byte(plain), []byte(id))
	if err != nil {
		return ports.CreatedWebhookEndpoint{}, fmt.Errorf("webhook: seal secret: %w", err)
	}
	ep, err := s.store.SetEndpointSecret(ctx, orgID, id, sealed)
	if err != nil {
		return ports.CreatedWebhookEndpoint{}, fmt.Errorf("webhook: rotate secret: %w", err)
	}
	ep.Secret = nil
	return ports.CreatedWebhookEndpoint{WebhookEndpoint: ep, PlainSecret: plain}, nil
}

// TestEndpoint sends a sample email.delivered event (event id evt_test_<uuid>, data {test: true,
// message_id: null}) to the endpoint now, whatever its subscriptions, through the dispatcher's own attempt
// code, and returns the delivery row as stored. The row is written once the attempt is over, with its
// outcome: a leased claim is the only way RecordAttempts accepts a result, and a row inserted due before
// the attempt could be claimed and sent a second time by a dispatcher meanwhile. A failed test is retried
// on the normal schedule like any delivery. Errors: not_found.
func (s *Service) TestEndpoint(ctx context.Context, orgID, id string) (ports.WebhookDelivery, error) {
	ep, err := s.store.GetEndpoint(ctx, orgID, id)
	if err != nil {
		return ports.WebhookDelivery{}, fmt.Errorf("webhook: get endpoint: %w", err)
	}
	now := s.now()
	eventID := TestEventPrefix + newID()
	d := ports.WebhookDelivery{
		ID:             newID(),
		OrganizationID: orgID,
		EndpointID:     ep.ID,
		EventID:        eventID,
		EventType:      ports.EventEmailDelivered,
		Status:         ports.WebhookPending,
		CreatedAt:      now,
		Payload:        testPayload(eventID, now),
	}
	a, err := s.attempt(ctx, d, ep)
	if err != nil {
		return ports.WebhookDelivery{}, err
	}
	d = apply(d, a)
	if err := s.store.InsertDelivery(ctx, d); err != nil {
		return ports.WebhookDelivery{}, fmt.Errorf("webhook: insert test delivery: %w", err)
	}
	return d, nil
}

// Replay re-delivers a past delivery's event as a new pending delivery, due now: event id
// evt_replay_<uuid>, the original body with that id and data.original_event_id added (created_at and the
// rest unchanged), and OriginalEventID set so the x-service-original-event-id header names the event. A
// replay of a replay names the first event, so receivers can always trace back to it. Errors: not_found
// (no such delivery, it belongs to another endpoint, or its endpoint is gone).
func (s *Service) Replay(ctx context.Context, orgID, endpointID, deliveryID string) (ports.WebhookDelivery, error) {
	src, err := s.store.GetDelivery(ctx, orgID, deliveryID)
	if err != nil {
		return ports.WebhookDelivery{}, fmt.Errorf("webhook: get delivery: %w", err)
	}
	if src.EndpointID != endpointID {
		return ports.WebhookDelivery{}, ports.NotFound("webhook delivery %s not found", deliveryID)
	}
	ep, err := s.store.GetEndpoint(ctx, orgID, endpointID)
	if err != nil {
		return ports.WebhookDelivery{}, fmt.Errorf("webhook: get endpoint: %w", err)
	}
	originalEventID := src.OriginalEventID
	if originalEventID == "" {
		originalEventID = src.EventID
	}
	eventID := ReplayEventPrefix + newID()
	payload, err := replayPayload(src.Payload, eventID, originalEventID)
	if err != nil {
		return ports.WebhookDelivery{}, err
	}
	now := s.now()
	d := ports.WebhookDelivery{
		ID:              newID(),
		OrganizationID:  orgID,
		EndpointID:      ep.ID,
		EventID:         eventID,
		EventType:       src.EventType,
		Status:          ports.WebhookPending,
		NextRetryAt:     &now,
		CreatedAt:       now,
		Payload:         payload,
		OriginalEventID: originalEventID,
	}
	if err := s.store.InsertDelivery(ctx, d); err != nil {
		return ports.WebhookDelivery{}, fmt.Errorf("webhook: insert replay: %w", err)
	}
	return d, nil
}

// ListDeliveries returns the RecentDeliveries most recent deliveries across the organization's endpoints,
// newest first.
func (s *Service) ListDeliveries(ctx context.Context, orgID string) ([]ports.WebhookDelivery, error) {
	ds, err := s.store.ListRecentDeliveries(ctx, orgID, RecentDeliveries)
	if err != nil {
		return nil, fmt.Errorf("webhook: list deliveries: %w", err)
	}
	return ds, nil
}

// validateURL checks an endpoint URL at creation: at most MaxURLLength characters, an absolute http or
// https URL with a host and, when given, a port in 1-65535. Where the host points is not judged here: the
// sender's guard checks every resolved address before every attempt (SPEC §6), because DNS answers change.
func validateURL(raw string) (ports.FieldViolation, bool) {
	const msg = "must be an http or https URL with a host"
	if len(raw) > MaxURLLength {
		return ports.FieldViolation{Path: "url", Message: fmt.Sprintf("must be at most %d characters", MaxURLLength)}, false
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return ports.FieldViolation{Path: "url", Message: msg}, false
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return ports.FieldViolation{Path: "url", Message: msg}, false
		}
	}
	return ports.FieldViolation{}, true
}

// validateEventTypes checks a subscription list: at least one type, each from ports.WebhookEventTypes
// (email.cancelled is timeline-only and not among them). It returns the types with duplicates removed, in
// the order given, and one violation per unknown entry (path eventTypes.N).
func validateEventTypes(types []string) ([]string, []ports.FieldViolation) {
	if len(types) == 0 {
		return nil, []ports.FieldViolation{{Path: "eventTypes", Message: "must contain at least one event type"}}
	}
	var out []string
	var violations []ports.FieldViolation
	for i, t := range types {
		if !slices.Contains(ports.WebhookEventTypes, t) {
			violations = append(violations, ports.FieldViolation{Path: "eventTypes." + strconv.Itoa(i), Message: fmt.Sprintf("unknown event type %q", t)})
			continue
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, violations
}
