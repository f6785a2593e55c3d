package ports

import (
	"context"
	"time"
)

// Webhook delivery states (SPEC §3).
const (
	WebhookPending   = "pending"
	WebhookDelivered = "delivered"
	WebhookFailed    = "failed"
	WebhookDead      = "dead"
	WebhookBlocked   = "blocked"
)

// WebhookMaxAttempts is SPEC §6's cap: the 5th failure makes a delivery dead.
const WebhookMaxAttempts = 5

// WebhookEventTypes are the event types an endpoint may subscribe to (SPEC §6), in the spec's order.
var WebhookEventTypes = []string{
	EventEmailQueued, EventEmailScheduled, EventEmailSent, EventEmailDelivered, EventEmailDeliveryDelayed,
	EventEmailBounced, EventEmailComplained, EventEmailOpened, EventEmailClicked, EventEmailFailed,
	EventEmailReceived, EventDomainCreated, EventDomainVerified, EventDomainFailed,
}

// WebhookEndpoint is a URL that receives signed events. Secret is sealed (encrypted at rest) and never
// leaves the core and the store except as plaintext in create and rotate answers.
type WebhookEndpoint struct {
	ID             string
	OrganizationID string
	URL            string
	Enabled        bool
	EventTypes     []string
	Secret         []byte // sealed "whsec_<64 hex>"
	CreatedAt      time.Time
}

// CreatedWebhookEndpoint is the create and rotate answer: the only time the secret is shown.
type CreatedWebhookEndpoint struct {
	WebhookEndpoint
	PlainSecret string
}

// WebhookDelivery is one event for one endpoint with its attempts so far. EventID is the event's UUID, or
// "evt_test_<uuid>" / "evt_replay_<uuid>" for test and replay deliveries.
type WebhookDelivery struct {
	ID              string
	OrganizationID  string
	EndpointID      string
	EventID         string
	EventType       string
	Status          string
	Attempts        int
	ResponseCode    int // 0 until a response arrived
	NextRetryAt     *time.Time
	DeliveredAt     *time.Time
	CreatedAt       time.Time
	Payload         []byte // the exact JSON body every attempt sends
	OriginalEventID string // replays: the event re-sent
	// BlockedReason says, for a blocked delivery, why the guard refused the endpoint (which address, which
	// rule, and how an operator allows it); empty in every other state.
	BlockedReason string
}

// WebhookService manages endpoints and their deliveries (SPEC §4.6, Key routes).
type WebhookService interface {
	// CreateEndpoint errors: invalid_argument (URL not http/https, eventTypes empty or unknown),
	// permission_denied with ReasonResourceLimit (the organization holds as many endpoints as allowed).
	CreateEndpoint(ctx context.Context, orgID, url string, eventTypes []string) (CreatedWebhookEndpoint, error)
	// ListEndpoints returns the organization's newest MaxUnpagedListRows endpoints, newest first, without
	// secrets: the bare-array form of GET /v1/webhooks.
	ListEndpoints(ctx context.Context, orgID string) ([]WebhookEndpoint, error)
	// ListEndpointsPage pages the organization's endpoints newest first, without secrets. Errors:
	// invalid_argument (limit outside 1-MaxListLimit, a cursor this service did not issue).
	ListEndpointsPage(ctx context.Context, orgID string, q PageQuery) (Page[WebhookEndpoint], error)
	// DeleteEndpoint deletes the endpoint and its deliveries. Errors: not_found.
	DeleteEndpoint(ctx context.Context, orgID, id string) error
	// TestEndpoint sends a sample email.delivered event now, whatever the subscriptions, and returns the
	// delivery row after the first attempt. Errors: not_found.
	TestEndpoint(ctx context.Context, orgID, id string) (WebhookDelivery, error)
	// RotateSecret replaces the secret. Errors: not_found.
	RotateSecret(ctx context.Context, orgID, id string) (CreatedWebhookEndpoint, error)
	// Replay re-delivers a past delivery's event as a new delivery row. Errors: not_found (no such
	// delivery, or its endpoint is gone).
	Replay(ctx context.Context, orgID, endpointID, deliveryID string) (WebhookDelivery, error)
	// ListDeliveries returns the 100 most recent deliveries across endpoints, newest first.
	ListDeliveries(ctx context.Context, orgID string) ([]WebhookDelivery, error)
}

// DueDelivery is a leased delivery with the endpoint it goes to.
type DueDelivery struct {
	Delivery WebhookDelivery
	Endpoint WebhookEndpoint
	Lease    string // token that RecordAttempts must present
}

// WebhookAttempt is the result of one attempt, as the dispatcher decided it.
type WebhookAttempt struct {
	DeliveryID   string
	Lease        string
	Status       string
	Attempts     int
	ResponseCode int
	NextRetryAt  *time.Time
	DeliveredAt  *time.Time
	// BlockedReason is the guard's refusal when Status is blocked, empty otherwise.
	BlockedReason string
}

// WebhookStore persists endpoints and deliveries and fans events out. Tenant methods are scoped by
// organization; the dispatcher's methods (FanOut, ClaimDue, RecordAttempts) work across organizations.
type WebhookStore interface {
	// InsertEndpointWithin writes the endpoint unless the organization already holds max endpoints (max < 1:
	// no bound), counted and inserted in one atomic step so concurrent inserts never pass max. inserted is
	// false, with nothing written, when the organization holds max already.
	InsertEndpointWithin(ctx context.Context, e WebhookEndpoint, max int) (inserted bool, err error)
	// ListEndpoints pages the organization's endpoints newest first (keyset on createdAt, id). q.Limit is
	// 1-MaxUnpagedListRows. Errors: invalid_argument (limit, cursor).
	ListEndpoints(ctx context.Context, orgID string, q PageQuery) (Page[WebhookEndpoint], error)
	// GetEndpoint errors: not_found.
	GetEndpoint(ctx context.Context, orgID, id string) (WebhookEndpoint, error)
	// DeleteEndpoint deletes the endpoint and its deliveries. Errors: not_found.
	DeleteEndpoint(ctx context.Context, orgID, id string) error
	// SetEndpointSecret replaces the sealed secret. Errors: not_found.
	SetEndpointSecret(ctx context.Context, orgID, id string, sealed []byte) (WebhookEndpoint, error)
	// InsertDelivery writes a delivery row (test and replay deliveries).
	InsertDelivery(ctx context.Context, d WebhookDelivery) error
	// GetDelivery errors: not_found.
	GetDelivery(ctx context.Context, orgID, id string) (WebhookDelivery, error)
	// ListRecentDeliveries returns up to limit deliveries, newest first.
	ListRecentDeliveries(ctx context.Context, orgID string, limit int) ([]WebhookDelivery, error)
	// FanOut takes up to limit events not fanned out yet (oldest first, SKIP LOCKED so several processes
	// share the work), asks payloads for their webhook bodies (and whatever else must happen to every
	// event, such as publishing it to a stream) and, in the same transaction, writes one pending delivery
	// per enabled endpoint of the event's organization subscribed to its type, due at now, and marks the
	// events fanned out. It returns how many events it took.
	FanOut(ctx context.Context, now time.Time, limit int, payloads func(context.Context, []Event) (map[string][]byte, error)) (int, error)
	// ClaimDue leases up to limit deliveries that are pending or failed, due by now, and whose endpoint is
	// enabled, until leaseUntil, so no other dispatcher attempts them meanwhile.
	ClaimDue(ctx context.Context, now, leaseUntil time.Time, limit int) ([]DueDelivery, error)
	// RecordAttempts writes many attempt results in one transaction; a result whose lease no longer
	// matches (it expired and another dispatcher took the delivery) is ignored.
	RecordAttempts(ctx context.Context, results []WebhookAttempt) error
}

// WebhookRequest is one HTTP POST to an endpoint.
type WebhookRequest struct {
	URL     string
	Headers map[string]string
	Body    []byte
}

// WebhookResponse is the outcome of one request. Blocked means the guard refused the URL (a forbidden
// address, a scheme other than http/https, a host with no address): permanent, never retried.
type WebhookResponse struct {
	StatusCode int
	Blocked    bool
	Reason     string
}

// WebhookSender posts webhook requests through the SSRF guard of SPEC §6. A network error or timeout is
// returned as an error (a failed attempt); a guard refusal is a response with Blocked set.
type WebhookSender interface {
	Send(ctx context.Context, req WebhookRequest) (WebhookResponse, error)
}
