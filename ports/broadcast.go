package ports

import (
	"context"
	"time"
)

// BroadcastStatus values (SPEC §3). "canceled" has a single L, unlike a message's "cancelled".
type BroadcastStatus string

// Broadcast states.
const (
	BroadcastDraft     BroadcastStatus = "draft"
	BroadcastScheduled BroadcastStatus = "scheduled"
	BroadcastSending   BroadcastStatus = "sending"
	BroadcastSent      BroadcastStatus = "sent"
	BroadcastCanceled  BroadcastStatus = "canceled"
	BroadcastFailed    BroadcastStatus = "failed"
)

// Bounds of SPEC §2 and §8 for broadcasts.
const (
	MaxBroadcastNameChars    = 200
	MaxBroadcastSubjectChars = 998
	DefaultRecipientsLimit   = 100
	MaxRecipientsLimit       = 200
)

// Broadcast is one marketing send to an audience (SPEC §2, §4.10). Exactly one of HTML/Text or TemplateID
// carries the content; at most one of SegmentID and TopicID names the audience (one is needed to send).
type Broadcast struct {
	ID             string
	OrganizationID string
	Name           string
	Subject        string
	From           string
	ReplyTo        string
	HTML           string
	Text           string
	TemplateID     string
	SegmentID      string
	TopicID        string
	ScheduledAt    *time.Time
	Status         BroadcastStatus
	// Cursor is the expander's checkpoint: the id of the last contact whose message was accepted.
	Cursor string
	// PausedUntil is set while a broadcast waits for the next day's warm-up allowance.
	PausedUntil *time.Time
	// FailureReason says why a failed broadcast stopped ("" otherwise).
	FailureReason string
	StartedAt     *time.Time
	CompletedAt   *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// ExpanderToken is the expander's lease on a sending broadcast: set by BroadcastStore.ClaimBroadcasts,
	// unique to that claim, and "" everywhere else. It is the store's and the expander's business only and
	// appears in no API answer.
	ExpanderToken string
}

// NewBroadcast is the body of POST /v1/broadcasts.
type NewBroadcast struct {
	Name, Subject, From, ReplyTo, HTML, Text, TemplateID, SegmentID, TopicID string
	ScheduledAt                                                              *time.Time
}

// BroadcastPatch is the body of PATCH /v1/broadcasts/{id}: nil leaves a field alone; for SegmentID,
// TopicID and ScheduledAt, Clear* set to true sets it to null.
type BroadcastPatch struct {
	Name, Subject, From, ReplyTo, HTML, Text, TemplateID, SegmentID, TopicID *string
	ScheduledAt                                                              *time.Time
	ClearSegment, ClearTopic, ClearScheduledAt                               bool
}

// BroadcastStats are the aggregate results of GET /v1/broadcasts/{id}/stats. Each message counts once, in
// the furthest state it reached (an opened message was delivered too and counts in both).
type BroadcastStats struct {
	Recipients, Sent, Delivered, Bounced, Complained, Opened, Clicked, Unsubscribed, Failed int64
}

// Recipient states of a broadcast beyond a message's: the contact was suppressed and got no message.
const BroadcastRecipientSuppressed = "suppressed"

// BroadcastRecipient is one contact of a started broadcast with its message's status.
type BroadcastRecipient struct {
	ContactID string
	Email     string
	MessageID string // "" when no message was written (suppressed)
	Status    string // the message's status, or BroadcastRecipientSuppressed
	CreatedAt time.Time
}

// BroadcastService is SPEC §4.10.
type BroadcastService interface {
	// CreateBroadcast errors: invalid_argument (validation, from on no verified domain of the organization,
	// an unknown segment, topic or template).
	CreateBroadcast(ctx context.Context, orgID string, b NewBroadcast) (Broadcast, error)
	// ListBroadcasts returns one page of the organization's broadcasts, newest first: limit 1-MaxListLimit
	// (0 means DefaultListLimit) from offset (0 or more). Errors: invalid_argument (limit, offset).
	ListBroadcasts(ctx context.Context, orgID string, limit, offset int) ([]Broadcast, error)
	// GetBroadcast errors: not_found.
	GetBroadcast(ctx context.Context, orgID, id string) (Broadcast, error)
	// UpdateBroadcast changes a draft or scheduled broadcast. Errors: not_found, invalid_argument,
	// failed_precondition (started).
	UpdateBroadcast(ctx context.Context, orgID, id string, p BroadcastPatch) (Broadcast, error)
	// DeleteBroadcast errors: not_found, failed_precondition (sending).
	DeleteBroadcast(ctx context.Context, orgID, id string) error
	// SendBroadcast starts sending now. Errors: not_found, failed_precondition (not draft or scheduled),
	// invalid_argument (no audience).
	SendBroadcast(ctx context.Context, orgID, id string) (Broadcast, error)
	// ScheduleBroadcast errors: not_found, failed_precondition, invalid_argument (time in the past).
	ScheduleBroadcast(ctx context.Context, orgID, id string, at time.Time) (Broadcast, error)
	// CancelBroadcast cancels a scheduled broadcast. Errors: not_found, failed_precondition.
	CancelBroadcast(ctx context.Context, orgID, id string) (Broadcast, error)
	// BroadcastStats errors: not_found.
	BroadcastStats(ctx context.Context, orgID, id string) (BroadcastStats, error)
	// BroadcastRecipients pages recipients in the order they were written. Errors: not_found,
	// invalid_argument (limit 1-200, offset ≥ 0).
	BroadcastRecipients(ctx context.Context, orgID, id string, limit, offset int) ([]BroadcastRecipient, int64, error)
}

// UnsubscribeView is what the public unsubscribe page shows: nothing that identifies the contact beyond
// a masked address.
type UnsubscribeView struct {
	MaskedEmail string
	TopicName   string // "" when the token is for all marketing mail
	// PreferencesToken opens the same contact's preference page, /p/prefs/{token}, where every topic can be
	// chosen rather than all or nothing.
	PreferencesToken string
}

// PublicUnsubscribeService answers /p/u/{token} (SPEC §4.11). The token is opened in the core.
type PublicUnsubscribeService interface {
	// PreviewUnsubscribe reads what a token would unsubscribe and changes nothing. Errors: invalid_argument
	// (a bad, foreign or stale token), never saying which.
	PreviewUnsubscribe(ctx context.Context, token string) (UnsubscribeView, error)
	// Unsubscribe performs it; idempotent. Errors: invalid_argument as above.
	Unsubscribe(ctx context.Context, token string) (UnsubscribeView, error)
}

// BroadcastStore persists broadcasts; every method is scoped by organization except the expander's.
type BroadcastStore interface {
	InsertBroadcast(ctx context.Context, b Broadcast) error
	// GetBroadcast errors: not_found.
	GetBroadcast(ctx context.Context, orgID, id string) (Broadcast, error)
	// ListBroadcasts returns limit broadcasts from offset, newest first.
	ListBroadcasts(ctx context.Context, orgID string, limit, offset int) ([]Broadcast, error)
	// UpdateBroadcast writes b's editable fields and status when the stored status is one of from.
	// Errors: not_found, failed_precondition (status not among from).
	UpdateBroadcast(ctx context.Context, b Broadcast, from ...BroadcastStatus) (Broadcast, error)
	// DeleteBroadcast deletes unless sending. Errors: not_found, failed_precondition.
	DeleteBroadcast(ctx context.Context, orgID, id string) error
	// ClaimBroadcasts marks due scheduled broadcasts sending and claims up to limit sending broadcasts not
	// paused past now and not under another claim's lease: the expander's work list, across organizations.
	// Each claimed broadcast is returned with a new ExpanderToken and leased until lease from now (database
	// time); no other claim returns it before that lease ends, however many processes claim at once.
	// Broadcasts are claimed in the order they became available: since they started, or since their last
	// lease ended.
	ClaimBroadcasts(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]Broadcast, error)
	// RecordBatch records the recipients of one batch and moves the cursor from b.Cursor to cursor in one
	// transaction, and extends the lease to lease from now. It writes nothing and returns false when the
	// broadcast is no longer sending, when the stored cursor is not b.Cursor (another expander moved it),
	// or when b.ExpanderToken is not the stored token (the lease was lost: the broadcast was claimed again
	// after it ran out, or it was released); the expander then stops working the broadcast.
	RecordBatch(ctx context.Context, b Broadcast, cursor string, recipients []BroadcastRecipient, lease time.Duration) (bool, error)
	// ReleaseBroadcast ends b's lease when b.ExpanderToken is still the stored token, so that the next claim
	// may take the broadcast at once; otherwise it changes nothing.
	ReleaseBroadcast(ctx context.Context, b Broadcast) error
	// FinishBroadcast sets a sending broadcast's final status (sent or failed with reason) or pauses it
	// until a time (status stays sending), and ends any expander's lease on it.
	FinishBroadcast(ctx context.Context, orgID, id string, status BroadcastStatus, reason string, pausedUntil *time.Time, now time.Time) error
	BroadcastStats(ctx context.Context, orgID, id string) (BroadcastStats, error)
	BroadcastRecipients(ctx context.Context, orgID, id string, limit, offset int) ([]BroadcastRecipient, int64, error)
	// UnsubscribeSubject returns a contact's address and a topic's name ("" for topicID "") for the
	// unsubscribe page. Errors: not_found.
	UnsubscribeSubject(ctx context.Context, orgID, contactID, topicID string) (email, topicName string, err error)
	// NoteUnsubscribe marks the contact's recipient row of the broadcast unsubscribed (the first time
	// only); a contact that is no recipient of it changes nothing.
	NoteUnsubscribe(ctx context.Context, orgID, broadcastID, contactID string, at time.Time) error
}
