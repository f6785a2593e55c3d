package ports

import (
	"context"
	"time"
)

// InboundDomainStatus is an inbound domain's state (SPEC §3).
type InboundDomainStatus string

// Inbound-domain states.
const (
	InboundPending   InboundDomainStatus = "pending"
	InboundVerified  InboundDomainStatus = "verified"
	InboundFailed    InboundDomainStatus = "failed"
	InboundSuspended InboundDomainStatus = "suspended"
)

// Route match types, actions (SPEC §4.12).
const (
	MatchExact    = "exact"
	MatchPattern  = "pattern"
	MatchCatchAll = "catch_all"

	ActionWebhook      = "webhook"
	ActionForwardEmail = "forward_email"
	ActionStore        = "store"
)

// Received-email states. ReceivedDelivered: a route took the message and its action was carried out (or, for
// store, the message is kept); ReceivedDeadLettered: no route matched and the message is kept so it is never
// lost silently; ReceivedQuarantined: an attachment was not clean or the spam check said spam, and the route's
// action was not carried out.
const (
	ReceivedDelivered    = "delivered"
	ReceivedDeadLettered = "dead_lettered"
	ReceivedQuarantined  = "quarantined"
	// ReceivedPending: a webhook or forward_email action is not done yet. ReceivedFailed: the webhook
	// action's attempts ran out. ReceivedBlocked: the webhook destination resolves to a forbidden address.
	ReceivedPending = "pending"
	ReceivedFailed  = "failed"
	ReceivedBlocked = "blocked"
)

// Scan and spam verdicts of a received email and its attachments.
const (
	ScanClean    = "clean"
	ScanInfected = "infected"
	ScanFailed   = "error"
	SpamHam      = "ham"
	SpamSpam     = "spam"
)

// Forward outcomes of a forward_email route (nil on other actions).
const (
	ForwardPending = "pending"
	ForwardSent    = "sent"
	ForwardFailed  = "failed"
)

// InboundDomain is a domain whose MX points at Postmill (SPEC §2).
type InboundDomain struct {
	ID             string
	OrganizationID string
	Name           string
	Status         InboundDomainStatus
	MXHost         string
	MXPriority     int
	VerifiedAt     *time.Time
	LastCheckedAt  *time.Time
	CreatedAt      time.Time
	// DNSRecord is the MX record to publish; the core fills it in on the way out.
	DNSRecord DNSRecord
}

// InboundRoute is one routing rule of an inbound domain (SPEC §2, §4.12).
type InboundRoute struct {
	ID              string
	OrganizationID  string
	InboundDomainID string
	MatchType       string
	MatchValue      string
	Action          string
	Destination     string
	Enabled         bool
	Priority        int
	CreatedAt       time.Time
	// Secret is a webhook route's signing secret, sealed; it never leaves the core. PlainSecret is the
	// secret in clear in the create answer of a webhook route only.
	Secret      []byte
	PlainSecret string
}

// InboundRouteInput is the body of a route creation; nil Enabled and Priority take their defaults.
type InboundRouteInput struct {
	InboundDomainID string
	MatchType       string
	MatchValue      string
	Action          string
	Destination     string
	Enabled         *bool
	Priority        *int
}

// InboundRoutePatch is the body of PATCH /v1/inbound/routes/{id}: nil leaves a field as it is.
type InboundRoutePatch struct {
	Enabled     *bool
	Priority    *int
	Destination *string
}

// ReceivedAttachment is one attachment or inline part of a received email. Its bytes are found in one of
// two ways: PartPath, the part's place in the raw message (MessageParts derives the bytes from the raw
// message, checked against SHA256 and Size), or, for attachments received before the raw message became
// the only blob written, BlobKey, an object of its own. BlobKey, PartPath and SHA256 never leave the core.
type ReceivedAttachment struct {
	ID            string
	Filename      string
	ContentType   string
	Size          int64
	Inline        bool
	ContentID     string
	ScanStatus    string
	ScanSignature string
	ScannedAt     *time.Time
	BlobKey       string
	PartPath      string
	// SHA256 is the hex SHA-256 of the decoded bytes (set with PartPath).
	SHA256 string
}

// Downloadable reports whether the attachment may be downloaded: only a clean scan whose bytes can be
// found (an object of its own or a part of the raw message).
func (a ReceivedAttachment) Downloadable() bool {
	return a.ScanStatus == ScanClean && (a.BlobKey != "" || a.PartPath != "")
}

// ReceivedEmail is one message received for one envelope recipient (SPEC §2). RawKey never leaves the core.
type ReceivedEmail struct {
	ID              string
	OrganizationID  string
	InboundDomainID string
	To              string // envelope recipient (RCPT TO)
	From            string // envelope sender (MAIL FROM), "" for the null path
	HeaderFrom      string
	HeaderFromName  string
	ToAddresses     []string
	CcAddresses     []string
	Subject         string
	MessageID       string
	InReplyTo       *string
	References      *string
	SizeBytes       int64
	SpamStatus      string
	ScanStatus      string
	Status          string
	RouteID         *string
	RouteAction     *string
	ForwardStatus   *string
	ReceivedAt      time.Time
	// Detail only.
	Text        string
	HTML        string
	Headers     map[string][]string
	Attachments []ReceivedAttachment
	RawKey      string
	DedupeKey   string
	// ActionEventID is the email.received event a webhook route's request carries; ActionDue is when its
	// first attempt is due (nil when the route is not a webhook or the message is not to be posted).
	ActionEventID string
	ActionDue     *time.Time
}

// DueAction is a received email whose webhook route is due an attempt, claimed under Lease.
type DueAction struct {
	Email    ReceivedEmail
	Route    InboundRoute
	Attempts int // made so far
	Lease    string
}

// InboundPart is one attachment or inline part the inbound tier parsed out of a message. PartPath says
// where it is in the raw message, in the form MessageParts.Extract reads; "" (a tier that does not say)
// makes the core keep the part as an object of its own.
type InboundPart struct {
	Filename    string
	ContentType string
	Inline      bool
	ContentID   string
	Data        []byte
	PartPath    string
}

// InboundMessage is what the inbound tier hands the core once DATA ended: the envelope, the raw bytes and
// what the tier parsed from them (headers, bodies decoded to UTF-8, attachments).
type InboundMessage struct {
	From        string
	Rcpts       []string
	RemoteAddr  string
	Raw         []byte
	Headers     map[string][]string
	Subject     string
	MessageID   string
	InReplyTo   string
	References  string
	HeaderFrom  string
	FromName    string
	To          []string
	Cc          []string
	Text        string
	HTML        string
	Attachments []InboundPart
}

// ReceiveResult says what became of each recipient of an InboundMessage: the received email's id, in the
// order of Rcpts ("" for a recipient the core did not take).
type ReceiveResult struct {
	IDs []string
}

// SpamVerdict is a spam checker's answer.
type SpamVerdict struct {
	Status string // SpamHam or SpamSpam
	Score  float64
}

// SpamChecker judges a received message. The default answers ham for everything.
type SpamChecker interface {
	Check(ctx context.Context, raw []byte) (SpamVerdict, error)
}

// InboundService is the Session routes of SPEC §4.12 and the Key routes of received mail.
type InboundService interface {
	// CreateInboundDomain errors: invalid_argument (grammar), already_exists (inbound_domains_name_key,
	// whichever organization holds it).
	CreateInboundDomain(ctx context.Context, orgID, name string) (InboundDomain, error)
	ListInboundDomains(ctx context.Context, orgID string) ([]InboundDomain, error)
	// GetInboundDomain errors: not_found.
	GetInboundDomain(ctx context.Context, orgID, id string) (InboundDomain, error)
	// VerifyInboundDomain re-checks MX. Errors: not_found.
	VerifyInboundDomain(ctx context.Context, orgID, id string) (InboundDomain, error)
	// SuspendInboundDomain errors: not_found.
	SuspendInboundDomain(ctx context.Context, orgID, id string) (InboundDomain, error)
	// DeleteInboundDomain deletes the domain and its routes. Errors: not_found.
	DeleteInboundDomain(ctx context.Context, orgID, id string) error

	// CreateRoute errors: invalid_argument, not_found (inbound domain not in the organization).
	CreateRoute(ctx context.Context, orgID string, in InboundRouteInput) (InboundRoute, error)
	// UpdateRoute errors: invalid_argument, not_found.
	UpdateRoute(ctx context.Context, orgID, id string, p InboundRoutePatch) (InboundRoute, error)
	// DeleteRoute errors: not_found.
	DeleteRoute(ctx context.Context, orgID, id string) error
	// ListRoutes errors: not_found (inbound domain not in the organization).
	ListRoutes(ctx context.Context, orgID, domainID string) ([]InboundRoute, error)
	// ResolveRoute returns the route that would take mail for address, nil when the address's domain is not
	// one of the organization's inbound domains or nothing matches.
	ResolveRoute(ctx context.Context, orgID, address string) (*InboundRoute, error)

	// ListReceived lists newest first. Errors: invalid_argument (limit, offset).
	ListReceived(ctx context.Context, orgID string, limit, offset int) ([]ReceivedEmail, error)
	// GetReceived returns the detail. Errors: not_found.
	GetReceived(ctx context.Context, orgID, id string) (ReceivedEmail, error)
	// ReceivedRaw returns the message as received. Errors: not_found.
	ReceivedRaw(ctx context.Context, orgID, id string) ([]byte, error)
	// ReceivedAttachment returns one attachment's bytes. Errors: not_found (no attachment or no stored
	// object), permission_denied (scan not clean; the message names the verdict), internal (the raw message
	// no longer gives the bytes recorded at receipt: nothing is served).
	ReceivedAttachment(ctx context.Context, orgID, id, attID string) (ReceivedAttachment, []byte, error)
}

// ReceiveService is what the inbound tier calls for customer mail.
type ReceiveService interface {
	// AcceptsInboundRecipient reports whether rcpt is at a verified, unsuspended inbound domain.
	AcceptsInboundRecipient(ctx context.Context, rcpt string) (bool, error)
	// Receive keeps, scans, routes and acts on a message. A nil error means it is durable: the tier may
	// answer 250. A retried message (same bytes, same recipient) is stored once.
	Receive(ctx context.Context, m InboundMessage) (ReceiveResult, error)
}

// InboundStore persists inbound domains, routes and received mail; every tenant method is scoped by
// organization.
type InboundStore interface {
	// InsertInboundDomain errors: already_exists (inbound_domains_name_key).
	InsertInboundDomain(ctx context.Context, d InboundDomain) error
	ListInboundDomains(ctx context.Context, orgID string) ([]InboundDomain, error)
	GetInboundDomain(ctx context.Context, orgID, id string) (InboundDomain, error)
	// InboundDomainByName finds the domain across organizations (for the MX listener). Errors: not_found.
	InboundDomainByName(ctx context.Context, name string) (InboundDomain, error)
	// SaveInboundCheck stores status, lastCheckedAt and verifiedAt (kept once set). Errors: not_found.
	SaveInboundCheck(ctx context.Context, d InboundDomain) (InboundDomain, error)
	SetInboundDomainStatus(ctx context.Context, orgID, id string, s InboundDomainStatus) (InboundDomain, error)
	DeleteInboundDomain(ctx context.Context, orgID, id string) error

	InsertRoute(ctx context.Context, r InboundRoute) error
	UpdateRoute(ctx context.Context, orgID, id string, p InboundRoutePatch) (InboundRoute, error)
	DeleteRoute(ctx context.Context, orgID, id string) (InboundRoute, error)
	GetRoute(ctx context.Context, orgID, id string) (InboundRoute, error)
	// ListRoutes returns every route of the domain (enabled or not), oldest first.
	ListRoutes(ctx context.Context, orgID, domainID string) ([]InboundRoute, error)

	// InsertReceived writes the email, its attachments and the events in one transaction. inserted is false,
	// with nothing written, when the organization already holds an email with the same recipient and
	// DedupeKey; existingID is then that email's id.
	InsertReceived(ctx context.Context, e ReceivedEmail, events []Event) (inserted bool, existingID string, err error)
	ListReceived(ctx context.Context, orgID string, limit, offset int) ([]ReceivedEmail, error)
	GetReceived(ctx context.Context, orgID, id string) (ReceivedEmail, error)
	SetForwardStatus(ctx context.Context, orgID, id, status string) error
	// ClaimDueActions leases up to max received emails whose webhook attempt is due at now, across
	// organizations, for lease; a claim not recorded within lease is claimed again.
	ClaimDueActions(ctx context.Context, now time.Time, lease time.Duration, max int) ([]DueAction, error)
	// RecordAction stores an attempt's outcome when lease still holds the email: the new status, attempts,
	// the next attempt (nil: none), the response code, a blocked reason and, for forward_email routes, the
	// forward status ("" leaves it).
	RecordAction(ctx context.Context, id, lease, status string, attempts int, next *time.Time, code int, reason, forward string) error
}
