package ports

import (
	"context"
	"encoding/json"
	"math"
	"time"
)

// MessageStatus values (SPEC §3). "cancelled" has a double L.
type MessageStatus string

// Message and recipient states.
const (
	StatusQueued          MessageStatus = "queued"
	StatusScheduled       MessageStatus = "scheduled"
	StatusSent            MessageStatus = "sent"
	StatusDelivered       MessageStatus = "delivered"
	StatusDeliveryDelayed MessageStatus = "delivery_delayed"
	StatusBounced         MessageStatus = "bounced"
	StatusComplained      MessageStatus = "complained"
	StatusOpened          MessageStatus = "opened"
	StatusClicked         MessageStatus = "clicked"
	StatusFailed          MessageStatus = "failed"
	StatusCancelled       MessageStatus = "cancelled"
)

// Recipient types of the send body.
const (
	RecipientTo  = "to"
	RecipientCc  = "cc"
	RecipientBcc = "bcc"
)

// Limits of SPEC §8 that the send path enforces.
const (
	MaxAttachments          = 20
	MaxAttachmentBytes      = 10 << 20
	MaxTotalAttachmentBytes = 25 << 20
	MaxBatch                = 500
)

// Usage meters of the send path: MetricEmailsSent counts an organization's recipients per calendar month
// (the plan's allowance), MetricEmailsSentDaily per UTC day (the warm-up cap).
const (
	MetricEmailsSent      = "emails_sent"
	MetricEmailsSentDaily = "emails_sent_daily"
)

// NoLimit is the Max of a UsageLimit that counts without limiting.
const NoLimit int64 = math.MaxInt64

// UsageLimit bounds one usage meter for one send: the meter of Metric for the period starting on Period (a
// calendar date, read as written in Period's own location) may reach Max and no more.
type UsageLimit struct {
	Metric string
	Period time.Time
	Max    int64
}

// Usage is what one send meters, as the core decided it: Units go onto the meter of every one of Limits
// together, or onto none when one of them would pass its Max. Units of 0, or no Limits, meter nothing.
type Usage struct {
	Units  int64
	Limits []UsageLimit
}

// TemplateRef names a template to render (SPEC §4.2).
type TemplateRef struct {
	ID        string
	Variables map[string]any
}

// Attachment is a file of a send. Content is decoded; the edge checks sizes from the base64 length
// before decoding, the core checks the decoded sizes again.
type Attachment struct {
	Filename    string
	ContentType string
	Content     []byte
	Inline      bool
	ContentID   string
}

// SendRequest is one email to send (the body of POST /v1/emails, or one submitted over SMTP).
type SendRequest struct {
	From           string
	To             []string
	Cc             []string
	Bcc            []string
	Subject        string
	HTML           string
	Text           string
	ReplyTo        string
	Template       *TemplateRef
	Attachments    []Attachment
	Headers        map[string]string
	Tags           map[string]string
	Metadata       json.RawMessage // arbitrary JSON object; stored and echoed, never sent
	Sandbox        bool
	ScheduledAt    *time.Time
	IdempotencyKey string
}

// SendResult is the 202 body of a send.
type SendResult struct {
	ID      string
	Status  MessageStatus
	Deduped bool
}

// BatchItemResult is one entry of a batch answer, aligned to the request by Index. Err is nil on success.
type BatchItemResult struct {
	Index  int
	Result SendResult
	Err    error
}

// Recipient is one address of a message with its own delivery state. Address is the bare address (what is
// suppressed, grouped by domain and metered); Name is the display name the sender gave with it (decoded,
// "" when none), which only the To and Cc header fields show.
type Recipient struct {
	ID      string
	Type    string // RecipientTo, RecipientCc, RecipientBcc
	Address string
	Name    string
	Status  MessageStatus
}

// StoredAttachment is an attachment's metadata; the bytes are in the blob store under Key.
type StoredAttachment struct {
	ID          string
	Filename    string
	ContentType string
	Size        int64
	Inline      bool
	ContentID   string
	Key         string // generated storage key; never shown to API users
}

// Message is an accepted email with its recipients and timeline.
type Message struct {
	ID             string
	OrganizationID string
	DomainID       string
	Status         MessageStatus
	From           string
	Subject        string
	HTML           string
	Text           string
	ReplyTo        string
	Headers        map[string]string
	Tags           map[string]string
	Metadata       json.RawMessage
	Sandbox        bool
	ScheduledAt    *time.Time
	IdempotencyKey string
	CreatedAt      time.Time
	Recipients     []Recipient
	Attachments    []StoredAttachment
	Events         []Event // timeline, oldest first
}

// ListEmailsQuery pages through an organization's messages, newest first.
type ListEmailsQuery struct {
	Limit  int    // 1-100, default 25
	Cursor string // opaque, from EmailPage.NextCursor
	Status MessageStatus
}

// EmailPage is one page of messages (without bodies, recipients' states included).
type EmailPage struct {
	Data       []Message
	NextCursor string // "" on the last page
}

// EmailService is the send API (SPEC §4.2).
type EmailService interface {
	// Send accepts one email. Errors: invalid_argument (validation, unknown or unverified domain,
	// suppressed recipient, rejected attachment, unknown template), permission_denied (org_suspended),
	// payment_required (plan_limit_exceeded), resource_exhausted (warmup_cap_reached).
	Send(ctx context.Context, orgID string, req SendRequest) (SendResult, error)
	// SendBatch runs each request through Send; one failure never aborts the rest. Idempotency keys are
	// ignored. Errors (whole batch): invalid_argument for 0 or more than MaxBatch items.
	SendBatch(ctx context.Context, orgID string, reqs []SendRequest) ([]BatchItemResult, error)
	// GetEmail returns the message with recipients and timeline. Errors: not_found.
	GetEmail(ctx context.Context, orgID, id string) (Message, error)
	// CancelEmail cancels a scheduled message. Errors: not_found, failed_precondition (not scheduled).
	CancelEmail(ctx context.Context, orgID, id string) (Message, error)
	// ListEmails pages through messages. Errors: invalid_argument (bad cursor or limit).
	ListEmails(ctx context.Context, orgID string, q ListEmailsQuery) (EmailPage, error)
}

// Suppression reasons and scopes (SPEC §2).
const (
	SuppressionScopeGlobal    = "global"
	SuppressionScopeTenant    = "tenant"
	SuppressionScopeDomain    = "domain"
	SuppressionScopeRecipient = "recipient"
	SuppressionBounce         = "bounce"
	SuppressionComplaint      = "complaint"
	SuppressionInvalid        = "invalid"
	SuppressionManual         = "manual"
)

// Suppression blocks sends to an address or to a whole domain (Address without "@").
type Suppression struct {
	ID             string
	OrganizationID string // "" for global suppressions
	Address        string // lower-cased address, or a bare domain
	Scope          string
	Reason         string
	CreatedAt      time.Time
}

// NewMessage is everything the send path writes in its one transaction.
type NewMessage struct {
	Message Message
	Events  []Event
	Outbox  []DeliveryJob // empty for sandbox and scheduled messages
	Usage   Usage         // what the send meters, and under which limits
}

// Inserted is what InsertMessage did with a NewMessage.
type Inserted struct {
	// ID and Status are the message's: the new one's, or with Existing the one that already held the
	// idempotency key (nothing was written or metered then).
	ID       string
	Status   MessageStatus
	Existing bool
	// OverLimit, when set, is the first of Usage.Limits the units did not fit under: nothing was written or
	// metered, and ID and Status are empty.
	OverLimit *UsageLimit
}

// MessageStore persists messages, their recipients, timeline, outbox rows and usage meters.
type MessageStore interface {
	// InsertMessage writes message, recipients, attachments' metadata, events and outbox rows and meters
	// m.Usage in ONE transaction, atomically: however many sends run at once, no meter passes the Max of a
	// limit. When Message.IdempotencyKey is set and already used in the organization, it writes and meters
	// nothing and returns the existing message's id and status with Existing. When the units do not fit
	// under a limit, it writes and meters nothing and names the limit in OverLimit; that is not an error.
	InsertMessage(ctx context.Context, m NewMessage) (Inserted, error)
	// MessageByIdempotencyKey returns the id and status for a used key. Errors: not_found.
	MessageByIdempotencyKey(ctx context.Context, orgID, key string) (string, MessageStatus, error)
	// GetMessage returns the message with recipients, attachments and events. Errors: not_found.
	GetMessage(ctx context.Context, orgID, id string) (Message, error)
	// ListMessages pages newest first; cursor is the store's own opaque token.
	ListMessages(ctx context.Context, orgID string, q ListEmailsQuery) (EmailPage, error)
	// CancelScheduled moves a scheduled message to cancelled with an event. Errors: not_found,
	// failed_precondition.
	CancelScheduled(ctx context.Context, orgID, id string, ev Event) (Message, error)
	// SuppressedAmong returns which of addresses (lower-cased) are suppressed for the organization — by
	// address or by their domain, tenant or global scope — keyed by address.
	SuppressedAmong(ctx context.Context, orgID string, addresses []string) (map[string]bool, error)
	// AddSuppression inserts or keeps a suppression (idempotent on organization, address, scope).
	AddSuppression(ctx context.Context, s Suppression) error
	// PromoteDue moves up to limit scheduled messages whose time has come to queued (writing their events
	// and outbox rows via decide), safely from several processes at once (FOR UPDATE SKIP LOCKED). decide
	// is called per message inside the transaction and returns the events and jobs to write, or a failure
	// status with its event (for example a paused organization). decide is given the message's From domain
	// as it is now, with its id and tracking settings only (they decide how jobs are split). It returns how many were promoted.
	PromoteDue(ctx context.Context, now time.Time, limit int, decide func(Message, Organization, Domain) (MessageStatus, []Event, []DeliveryJob)) (int, error)
}

// DeliveryJob is one unit of delivery work: the recipients of one message at one recipient domain, sent in
// one SMTP transaction. Kafka keys it by Domain.
type DeliveryJob struct {
	ID             string // UUIDv7, unique per attempt
	OrganizationID string
	MessageID      string
	Domain         string // recipient domain, lower-cased
	RecipientIDs   []string
	Attempt        int       // 1 for the first attempt
	FirstQueuedAt  time.Time // for the maximum age
	NotBefore      time.Time // the relay holds the job until then (retries)
	// Bulk marks broadcast mail: queues hand out the jobs without it (transactional mail) first, so a
	// broadcast's backlog never delays a receipt or a password reset.
	Bulk bool
}

// Outbox is the relay's view of delivery_outbox: jobs written in the send transaction, moved to the Queue.
type Outbox interface {
	// RelayDue hands up to limit due jobs to publish and deletes them only if publish succeeds, in one
	// transaction locked with SKIP LOCKED so several relays never publish the same row. Returns how many.
	RelayDue(ctx context.Context, now time.Time, limit int, publish func(context.Context, []DeliveryJob) error) (int, error)
	// EnqueueRetry writes a job back to the outbox for a later attempt.
	EnqueueRetry(ctx context.Context, job DeliveryJob) error
}

// OutboxSignal is implemented by an Outbox that can tell the relay of this process that jobs due now were
// just committed to it (by the send path or the scheduler's promotion), so the relay moves them at once
// instead of after its idle pause. Jobs written without a signal (by other processes, or retries due later)
// are moved by the relay's next round, as without it.
type OutboxSignal interface {
	// OutboxAdded returns a channel that receives a value after such jobs were committed; one value may
	// stand for several commits, and the channel is never closed.
	OutboxAdded() <-chan struct{}
}

// OutboundMessage is what the MTA needs to build, sign and deliver one job.
type OutboundMessage struct {
	Job            DeliveryJob
	MessageID      string
	OrganizationID string
	From           string
	ReplyTo        string
	Subject        string
	HTML           string
	Text           string
	Headers        map[string]string
	To             []string // header To (all of them, not only this job's)
	Cc             []string
	Recipients     []Recipient // this job's envelope recipients
	Attachments    []StoredAttachment
	CreatedAt      time.Time // the Date header: creation, or the scheduled time of a held message
	// DKIM signing material of the From domain; the private key is PKCS#8 DER (plaintext, in memory only).
	DKIMDomain     string
	DKIMSelector   string
	DKIMPrivateKey []byte
	// ReturnPath is the envelope sender: a VERP address on bounce.<domain>.
	ReturnPath string
	// MessageIDHeader is the RFC 5322 Message-ID value without angle brackets.
	MessageIDHeader string
}

// DeliveryOutcomeKind classifies one recipient's result.
type DeliveryOutcomeKind string

// Recipient outcomes of one SMTP attempt.
const (
	OutcomeDelivered DeliveryOutcomeKind = "delivered" // 250 after DATA
	OutcomeDeferred  DeliveryOutcomeKind = "deferred"  // 4xx, unreachable: retry later
	OutcomeBounced   DeliveryOutcomeKind = "bounced"   // 5xx: permanent
	OutcomeFailed    DeliveryOutcomeKind = "failed"    // given up (maximum age, no route)
)

// RecipientOutcome is one recipient's result with the server's words.
type RecipientOutcome struct {
	RecipientID string
	Kind        DeliveryOutcomeKind
	Response    string // e.g. "250 2.0.0 Ok: queued as 1234"
}

// DeliveryReport is the MTA's account of one job.
type DeliveryReport struct {
	Job        DeliveryJob
	Handed     bool // the receiving server was reached and the transaction started (→ sent)
	Recipients []RecipientOutcome
	At         time.Time
}

// DeliveryService is what the MTA tier calls on the core.
type DeliveryService interface {
	// LoadOutbound returns the message of a job ready to build and sign. Errors: not_found (the message is
	// gone or cancelled: the job is dropped).
	LoadOutbound(ctx context.Context, job DeliveryJob) (OutboundMessage, error)
	// ReportDelivery applies the outcomes: recipient and message status, timeline and event rows,
	// suppression on bounce, a retry job with backoff on deferral until the maximum age, then failed.
	// Idempotent for a job id: a redelivered job's report is applied once.
	ReportDelivery(ctx context.Context, r DeliveryReport) error
}

// DeliveryStore persists what ReportDelivery decides.
type DeliveryStore interface {
	// OutboundData returns the message (with recipients and attachments) and its domain for a job.
	OutboundData(ctx context.Context, orgID, messageID string) (Message, Domain, error)
	// ApplyDelivery writes recipient statuses, the message status, events, suppressions and an optional
	// retry job in one transaction, once per job id (a second call for the same job id is a no-op and
	// returns applied=false).
	ApplyDelivery(ctx context.Context, a DeliveryApplication) (applied bool, err error)
	// ApplyDeliveryReport is ApplyDelivery with the application decided inside the same transaction:
	// decide is given the message's recipients (request order, current statuses) read under the message's
	// lock, after any other job of the message was applied, and returns what to write for job jobID. So the
	// decision never rests on a stale read, and the read costs no round trip of its own. decide must be a
	// pure function of its argument: the store may call it again if it retries the transaction, and only
	// the committed call's result is written. Its JobID, OrganizationID and MessageID are the ones given
	// here. Errors: not_found when the message is not the organization's.
	ApplyDeliveryReport(ctx context.Context, jobID, orgID, messageID string, decide func(current []Recipient) DeliveryApplication) (applied bool, err error)
	// PruneAppliedJobs forgets up to limit job ids applied before before (they can no longer be delivered
	// again) and returns how many it removed.
	PruneAppliedJobs(ctx context.Context, before time.Time, limit int) (int, error)
}

// DeliveryApplication is the result of one job as the core decided it.
type DeliveryApplication struct {
	JobID          string
	OrganizationID string
	MessageID      string
	Recipients     map[string]MessageStatus // recipient id → new status
	MessageStatus  MessageStatus            // "" to derive from recipients in the store
	Events         []Event
	Suppressions   []Suppression
	// Bounces records SMTP-time refusals (5xx) in the bounce list, beside the event and suppression.
	Bounces []Bounce
	Retry   *DeliveryJob
}
