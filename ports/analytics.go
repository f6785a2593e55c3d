package ports

import (
	"context"
	"slices"
	"time"
)

// RequestLog is one API request as GET /v1/logs shows it (SPEC §4.2): who made it, what it asked, what it
// got and how long it took. The client address is already truncated (/24 for IPv4, /48 for IPv6) and the
// bodies already redacted and bounded when a RequestLog is built; the store keeps what it is given.
type RequestLog struct {
	ID             string // UUIDv7
	OrganizationID string
	OccurredAt     time.Time
	Method         string
	Route          string // the route template, "/v1/emails/{id}"
	Path           string // the path as asked, "/v1/emails/0192…"
	Status         int
	Latency        time.Duration
	APIKeyID       string // "" for a session request
	UserID         string // "" for an API key request
	UserAgent      string
	ClientIP       string // truncated
	RequestID      string
	RequestBody    string // redacted, at most MaxLoggedBody bytes
	ResponseBody   string // redacted, at most MaxLoggedBody bytes
}

// MaxLoggedBody bounds each stored request and response body, in bytes.
const MaxLoggedBody = 16 << 10

// LogFilter narrows GET /v1/logs. Zero values do not filter.
type LogFilter struct {
	From, To    time.Time // From inclusive, To exclusive
	Method      string
	Status      int    // an exact status
	StatusClass int    // 2 for 2xx, 4 for 4xx, ...
	Route       string // an exact route template
	APIKeyID    string
	Search      string // a substring of the path
}

// AnalyticsEvent is one message event as the analytics store counts it: an Event with the sending domain
// and the message's tags ("name:value") attached, so rollups per domain and per tag need no join.
type AnalyticsEvent struct {
	ID             string // the event's id; a re-delivered event is counted once
	OrganizationID string
	Type           string // an Event type, "email.delivered"
	MessageID      string
	Domain         string // the sending domain, "" when unknown
	Tags           []string
	OccurredAt     time.Time
}

// AnalyticsEventTypes are the event types the analytics counts, one per field of AnalyticsCounts. Only these
// are copied into the analytics store: email.queued, email.scheduled, email.cancelled, email.received and
// the domain events count nowhere.
var AnalyticsEventTypes = []string{EventEmailSent, EventEmailDelivered, EventEmailBounced, EventEmailComplained,
	EventEmailOpened, EventEmailClicked, EventEmailFailed, EventEmailDeliveryDelayed}

// IsAnalyticsEventType reports whether the analytics counts events of type t.
func IsAnalyticsEventType(t string) bool { return slices.Contains(AnalyticsEventTypes, t) }

// MessageRef names one message of one organization: a message id means nothing outside its organization.
type MessageRef struct {
	OrganizationID string
	MessageID      string
}

// MessageDimensions are what the analytics store counts a message's events by, both fixed when the message
// is accepted: the name of its sending domain ("" when unknown) and its tags as "name:value", ordered by
// name.
type MessageDimensions struct {
	Domain string
	Tags   []string
}

// MessageDimensionSource reads the dimensions of messages for the analytics pipeline when its events come
// from a source that does not carry them (the Kafka events topic).
type MessageDimensionSource interface {
	// MessageDimensions returns the dimensions of every named message the store holds, in one read; a
	// message it does not hold (another organization's id included) is absent from the map. A ref whose
	// ids are not UUIDs names no message.
	MessageDimensions(ctx context.Context, refs []MessageRef) (map[MessageRef]MessageDimensions, error)
}

// Analytics ranges (GET /v1/analytics?range=) and their bucket widths: hourly for 24h, daily otherwise.
const (
	Range24h = "24h"
	Range7d  = "7d"
	Range30d = "30d"
	Range90d = "90d"
)

// AnalyticsRanges maps each accepted range to its length and bucket width.
var AnalyticsRanges = map[string]struct{ Length, Bucket time.Duration }{
	Range24h: {24 * time.Hour, time.Hour},
	Range7d:  {7 * 24 * time.Hour, 24 * time.Hour},
	Range30d: {30 * 24 * time.Hour, 24 * time.Hour},
	Range90d: {90 * 24 * time.Hour, 24 * time.Hour},
}

// AnalyticsQuery asks for the counts of one organization between From (inclusive) and To (exclusive), in
// buckets of Bucket (an hour or a day, aligned to UTC), for everything, one sending domain or one tag.
type AnalyticsQuery struct {
	From, To time.Time
	Bucket   time.Duration
	Domain   string
	Tag      string
}

// AnalyticsCounts are the event counts of a bucket or a whole range.
type AnalyticsCounts struct {
	Sent, Delivered, Bounced, Complained, Opened, Clicked, Failed, Delayed int64
}

// AnalyticsBucket is the counts of one time bucket, starting at Start.
type AnalyticsBucket struct {
	Start time.Time
	AnalyticsCounts
}

// AnalyticsSummary answers an AnalyticsQuery: every bucket of the range (empty ones included, oldest
// first) and the totals.
type AnalyticsSummary struct {
	Buckets []AnalyticsBucket
	Totals  AnalyticsCounts
}

// AnalyticsStore is the analytics store: PostgreSQL (embedded default) or ClickHouse. Inserting an event
// or a request whose id the store already holds changes nothing, so a batch may be delivered twice. Every
// read is scoped to one organization.
type AnalyticsStore interface {
	InsertRequests(ctx context.Context, rows []RequestLog) error
	InsertEvents(ctx context.Context, rows []AnalyticsEvent) error
	// ListRequests returns one page of an organization's requests, newest first.
	ListRequests(ctx context.Context, organizationID string, f LogFilter, q PageQuery) (Page[RequestLog], error)
	// GetRequest returns one request of the organization; NotFound for another organization's.
	GetRequest(ctx context.Context, organizationID, id string) (RequestLog, error)
	// Summarize answers from the store's rollups.
	Summarize(ctx context.Context, organizationID string, q AnalyticsQuery) (AnalyticsSummary, error)
	// Maintain prepares the days ahead of now and drops requests older than RequestRetention and events
	// and rollups older than EventRetention.
	Maintain(ctx context.Context, now time.Time, r AnalyticsRetention) error
}

// AnalyticsRetention is how long the analytics store keeps rows.
type AnalyticsRetention struct {
	Requests time.Duration // default 30 days
	Events   time.Duration // default 90 days
}

// DefaultAnalyticsRetention is the retention when the operator sets none.
var DefaultAnalyticsRetention = AnalyticsRetention{Requests: 30 * 24 * time.Hour, Events: 90 * 24 * time.Hour}

// LogService answers GET /v1/logs and GET /v1/logs/{id}.
type LogService interface {
	ListLogs(ctx context.Context, organizationID string, f LogFilter, q PageQuery) (Page[RequestLog], error)
	GetLog(ctx context.Context, organizationID, id string) (RequestLog, error)
	// RecordRequests stores a batch of captured requests; the edge ships its buffer through it.
	RecordRequests(ctx context.Context, rows []RequestLog) error
}

// AnalyticsService answers GET /v1/analytics.
type AnalyticsService interface {
	Summarize(ctx context.Context, organizationID string, q AnalyticsQuery) (AnalyticsSummary, error)
}

// AnalyticsEventSource is where the pipeline reads message events: the PostgreSQL outbox or the Kafka
// events topic. Delivery is at least once: a batch is acknowledged only when handle returns nil, and one
// that fails is handed out again.
type AnalyticsEventSource interface {
	// ReadEvents hands at most max events to handle and returns how many it took from the source; 0 when
	// none wait.
	ReadEvents(ctx context.Context, max int, handle func(context.Context, []AnalyticsEvent) error) (int, error)
	// Lag is the age of the oldest event not yet acknowledged at now; 0 when none wait.
	Lag(ctx context.Context, now time.Time) (time.Duration, error)
}
