package ports

import (
	"context"
	"time"
)

// Bounce types: RFC 3463 §2 status classes. A hard bounce (5.X.X, permanent) sets the recipient bounced
// and, when its class says so, suppresses the address; a soft one (4.X.X, persistent transient) is recorded
// and retried by the sender.
const (
	BounceHard = "hard"
	BounceSoft = "soft"
)

// Bounce classes: what a refusal means, finer than hard and soft. core/deliverability/bounceclass maps an
// SMTP reply or a DSN's Status and Diagnostic-Code to one of them. Only BounceClassBadMailbox,
// BounceClassBadDomain and BounceClassInactiveMailbox say the address will never work: a hard bounce of one
// of those classes suppresses the address; any other hard bounce (a spam or policy block, a full mailbox,
// a refusal nobody can read) sets the recipient bounced without suppressing it.
const (
	BounceClassBadMailbox      = "bad_mailbox"      // the mailbox does not exist (user unknown)
	BounceClassBadDomain       = "bad_domain"       // the domain does not exist or takes no mail (null MX)
	BounceClassInactiveMailbox = "inactive_mailbox" // the mailbox exists but is disabled or closed
	BounceClassMailboxFull     = "mailbox_full"     // over quota
	BounceClassMessageTooLarge = "message_too_large"
	BounceClassPolicyBlock     = "policy_block"   // the receiver's policy refused the message or the sender
	BounceClassSpamBlock       = "spam_block"     // reputation, blocklists, content judged spam
	BounceClassAuthentication  = "authentication" // SPF, DKIM, DMARC or reverse DNS failures
	BounceClassRateLimited     = "rate_limited"   // throttling: too many connections, messages or recipients
	BounceClassRouting         = "routing"        // the network or routing failed: no answer, loops, expiry
	BounceClassRelayDenied     = "relay_denied"   // the server does not take mail for the domain
	BounceClassProtocol        = "protocol"       // SMTP syntax or sequence errors
	BounceClassContent         = "content"        // viruses, malware, prohibited attachments, bad media
	BounceClassTransient       = "transient"      // a temporary failure with no more specific reason
	BounceClassUnknown         = "unknown"        // nothing to tell the refusal by
)

// NewSuppression is the body of POST /v1/suppressions.
type NewSuppression struct {
	Address string // an address or a bare domain
	Scope   string // default tenant
	Reason  string // default manual
}

// PageQuery pages a list newest first (see page.go).
type PageQuery struct {
	Limit  int    // 1-100 from clients, default 25
	Cursor string // opaque, from the previous page's NextCursor
}

// Bounce is a recorded bounce: from an SMTP reply during delivery, or from a delivery status notification
// (RFC 3464) that arrived at the return path later.
type Bounce struct {
	ID             string
	OrganizationID string
	MessageID      string
	RecipientID    string
	Address        string
	Type           string // BounceHard or BounceSoft
	Class          string // a BounceClass*; "" for a bounce recorded before bounces were classified
	Status         string // RFC 3463 enhanced status code, e.g. "5.1.1"; "" when none was given
	Action         string // RFC 3464 §2.3.3: failed or delayed
	DiagnosticCode string // the remote server's words, e.g. "smtp; 550 5.1.1 user unknown"
	RemoteMTA      string
	ReportingMTA   string
	CreatedAt      time.Time
}

// BouncePage is one page of bounces.
type BouncePage struct {
	Data       []Bounce
	NextCursor string
}

// Complaint is a recorded spam complaint from a feedback report (RFC 5965).
type Complaint struct {
	ID             string
	OrganizationID string
	MessageID      string
	RecipientID    string
	Address        string
	FeedbackType   string // RFC 5965 §7.3: abuse, fraud, virus, other, not-spam
	UserAgent      string
	ReportedDomain string
	SourceIP       string
	ArrivalDate    *time.Time // when the reporter received the original, if it said
	CreatedAt      time.Time
}

// ComplaintPage is one page of complaints.
type ComplaintPage struct {
	Data       []Complaint
	NextCursor string
}

// DeliverabilityService is SPEC §4.5: suppressions, bounces and complaints.
//
// Suppression scopes: global applies to every organization and only platform admins manage it (the
// *Global methods); tenant (the default) applies to every send of the organization; domain is a tenant
// suppression of a whole recipient domain (the address must be a bare domain); recipient is a tenant
// suppression of one address (the address must contain "@").
type DeliverabilityService interface {
	// ListSuppressions returns the organization's newest MaxUnpagedListRows suppressions, newest first
	// (global ones are not listed): the bare-array form of GET /v1/suppressions.
	ListSuppressions(ctx context.Context, orgID string) ([]Suppression, error)
	// ListSuppressionsPage pages the organization's suppressions newest first. Errors: invalid_argument
	// (limit outside 1-MaxListLimit, a cursor this service did not issue).
	ListSuppressionsPage(ctx context.Context, orgID string, q PageQuery) (Page[Suppression], error)
	// CreateSuppression adds a suppression, or returns the existing one with the same address and scope.
	// Errors: invalid_argument, permission_denied (scope global).
	CreateSuppression(ctx context.Context, orgID string, s NewSuppression) (Suppression, error)
	// DeleteSuppression removes one; deleted is false when the organization has no suppression with id.
	DeleteSuppression(ctx context.Context, orgID, id string) (deleted bool, err error)
	// ListGlobalSuppressions, CreateGlobalSuppression and DeleteGlobalSuppression are the admin routes' view
	// of platform-wide suppressions; the list holds the newest MaxUnpagedListRows.
	ListGlobalSuppressions(ctx context.Context) ([]Suppression, error)
	CreateGlobalSuppression(ctx context.Context, s NewSuppression) (Suppression, error)
	DeleteGlobalSuppression(ctx context.Context, id string) (deleted bool, err error)
	// ListBounces pages the organization's bounces newest first. Errors: invalid_argument (limit, cursor).
	ListBounces(ctx context.Context, orgID string, q PageQuery) (BouncePage, error)
	// ListComplaints pages the organization's complaints newest first. Errors: invalid_argument.
	ListComplaints(ctx context.Context, orgID string, q PageQuery) (ComplaintPage, error)
}

// DSNRecipient is one per-recipient part of a delivery status notification (RFC 3464 §2.3), or what a
// non-standard bounce said about one address.
type DSNRecipient struct {
	FinalRecipient    string // the address, without the "rfc822;" type
	OriginalRecipient string
	Action            string // lower-cased: failed, delayed, delivered, relayed, expanded
	Status            string // RFC 3463 code such as "5.1.1"; "" when the report gave none
	DiagnosticCode    string // as given, e.g. "smtp; 550 5.1.1 <a@b>: Recipient address rejected"
	RemoteMTA         string
}

// BounceReport is a parsed bounce that arrived at the MX listener.
type BounceReport struct {
	Rcpt              string // the envelope recipient it was sent to: a VERP return path
	ReportingMTA      string
	OriginalMessageID string // Message-ID of the bounced message without angle brackets, if returned
	Recipients        []DSNRecipient
	ArrivedAt         time.Time
}

// ComplaintReport is a parsed feedback report (RFC 5965) that arrived at the MX listener.
type ComplaintReport struct {
	Rcpt              string // the envelope recipient it was sent to
	FeedbackType      string // lower-cased
	UserAgent         string
	OriginalMailFrom  string   // Original-Mail-From, else the returned message's Return-Path
	OriginalRcptTo    []string // Original-Rcpt-To, else the returned message's To
	OriginalMessageID string   // without angle brackets
	ReportedDomain    string
	SourceIP          string
	ArrivalDate       *time.Time
	ArrivedAt         time.Time
}

// FeedbackService is what the inbound tier calls for mail about mail Postmill sent.
type FeedbackService interface {
	// AcceptsRecipient reports whether the MX listener takes mail for rcpt (at RCPT time): a VERP return
	// path Postmill made (its MAC checks), or the feedback-loop address.
	AcceptsRecipient(ctx context.Context, rcpt string) (bool, error)
	// RecordBounce maps a bounce to its message and recipients through the VERP return path and applies it:
	// a bounce record per recipient with its class, and for a hard bounce recipient status bounced,
	// email.bounced and, for the classes that say the address will never work, a tenant suppression with
	// reason bounce. Applying the same report twice changes nothing the second
	// time (for a day: report ids are remembered as long as delivery job ids). Errors: invalid_argument when the return path is not Postmill's or names no recipient.
	RecordBounce(ctx context.Context, r BounceReport) error
	// RecordComplaint applies a feedback report: a complaint record, recipient status complained,
	// email.complained and a tenant suppression with reason complaint. The same report applied twice
	// changes nothing the second time. Errors: invalid_argument when it cannot be mapped to a message
	// Postmill sent.
	RecordComplaint(ctx context.Context, r ComplaintReport) error
}

// FeedbackApplication is what one bounce or complaint writes, decided by the core.
type FeedbackApplication struct {
	// ReportID names the report (a UUID the core derives from its content): the store applies a report id
	// once, like a delivery job id, so the same report delivered again (an SMTP retry after a lost reply)
	// records nothing twice. "" applies without that check.
	ReportID     string
	Bounces      []Bounce
	Complaints   []Complaint
	Recipients   map[string]MessageStatus // recipient id → new status
	Events       []Event
	Suppressions []Suppression
}

// RecipientRef locates a recipient of a message.
type RecipientRef struct {
	OrganizationID string
	MessageID      string
	RecipientID    string
	Address        string
}

// DeliverabilityStore persists suppressions, bounces and complaints.
type DeliverabilityStore interface {
	// ListSuppressions pages the organization's suppressions newest first (keyset on createdAt, id); orgID
	// "" pages the global ones. q.Limit is 1-MaxUnpagedListRows. Errors: invalid_argument (limit, cursor).
	ListSuppressions(ctx context.Context, orgID string, q PageQuery) (Page[Suppression], error)
	// InsertSuppression writes a suppression (OrganizationID "" for global) or returns the existing row of
	// the same organization, address and scope.
	InsertSuppression(ctx context.Context, s Suppression) (Suppression, error)
	// DeleteSuppression removes the organization's suppression (orgID "" for a global one); false when none.
	DeleteSuppression(ctx context.Context, orgID, id string) (bool, error)
	// ListBounces and ListComplaints page newest first. Errors: invalid_argument (bad cursor).
	ListBounces(ctx context.Context, orgID string, q PageQuery) (BouncePage, error)
	ListComplaints(ctx context.Context, orgID string, q PageQuery) (ComplaintPage, error)
	// RecipientByID finds a recipient by id alone: the caller proved with a VERP MAC that Postmill made the
	// id. Errors: not_found.
	RecipientByID(ctx context.Context, recipientID string) (RecipientRef, error)
	// MessageOrganization finds a message's organization by id alone (same proviso). Errors: not_found.
	MessageOrganization(ctx context.Context, messageID string) (orgID string, err error)
	// ApplyFeedback writes decide's result in one transaction: decide is given the message's recipients read
	// under the message's lock (current statuses) and must be pure (it may be called again on a retry). A
	// result whose ReportID was applied before writes nothing.
	// Recipient statuses change, the message status is derived again (DeriveMessageStatus), and events,
	// bounces, complaints and suppressions are inserted. Errors: not_found when the message is not the
	// organization's.
	ApplyFeedback(ctx context.Context, orgID, messageID string, decide func(current []Recipient) FeedbackApplication) error
}
