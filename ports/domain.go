package ports

import (
	"context"
	"time"
)

// DomainStatus is a sending domain's state (SPEC §3). "verifying" is reserved and never emitted.
type DomainStatus string

// Sending-domain states.
const (
	DomainPending   DomainStatus = "pending"
	DomainFailed    DomainStatus = "failed"
	DomainVerified  DomainStatus = "verified"
	DomainSuspended DomainStatus = "suspended"
)

// DNS record types a sending domain publishes (SPEC §2).
const (
	RecordSPF        = "SPF"
	RecordDKIM       = "DKIM"
	RecordDMARC      = "DMARC"
	RecordReturnPath = "RETURN_PATH"
	RecordTracking   = "TRACKING"
)

// DNS resource-record types the records are published as (RFC 1035 §3.2.2).
const (
	RRTypeTXT   = "TXT"
	RRTypeCNAME = "CNAME"
	RRTypeMX    = "MX"
)

// DNSRecord is one record a domain owner publishes, with the result of the last check.
type DNSRecord struct {
	ID       string
	DomainID string
	Type     string // RecordSPF, ...
	// RecordType is the DNS type to publish the record as: RRTypeTXT for SPF, DKIM and DMARC, RRTypeCNAME
	// for RETURN_PATH and TRACKING. The core derives it from Type; it is not stored.
	RecordType string
	Host       string
	Value      string
	TTL        int
	// Required records must all resolve for the domain to verify.
	Required  bool
	Verified  bool
	CheckedAt *time.Time
	// Found and Problem report what a verify run saw, in VerifyDomain's answer only (they are not
	// stored). Found is what DNS answered at Host: TXT strings, each joined from its character-strings,
	// or the CNAME target; bounded and sanitised; nil when nothing was found. Problem says in words why
	// the record did not verify, empty when it did.
	Found   []string
	Problem string
}

// Domain is a sending domain. DKIMPrivateKey is sealed (encrypted at rest) and never leaves the core and
// the store; responses never include it.
type Domain struct {
	ID             string
	OrganizationID string
	Name           string
	Status         DomainStatus
	Region         string
	DKIMSelector   string
	DKIMPrivateKey []byte // sealed PKCS#8 DER
	DKIMPublicKey  string // base64 of the DER SubjectPublicKeyInfo, as published in p=
	VerifiedAt     *time.Time
	CreatedAt      time.Time
	Records        []DNSRecord
	// OpenTracking and ClickTracking are off by default; when on, HTML bodies from the domain get a
	// tracking pixel and rewritten links, and each recipient is delivered its own copy.
	OpenTracking  bool
	ClickTracking bool
}

// TrackingSettings is the body of PATCH /v1/domains/{id}: nil leaves a setting as it is.
type TrackingSettings struct {
	OpenTracking  *bool
	ClickTracking *bool
}

// DomainService manages sending domains (SPEC §4.3, Session routes).
type DomainService interface {
	// CreateDomain errors: invalid_argument (grammar), already_exists (constraint domains_org_name_key),
	// resource_exhausted (the creation rate per organization: every creation generates an RSA key),
	// permission_denied with ReasonResourceLimit (the organization holds as many domains as allowed).
	CreateDomain(ctx context.Context, orgID, name string) (Domain, error)
	// ListDomains returns the organization's newest MaxUnpagedListRows domains, newest first, without
	// records: the bare-array form of GET /v1/domains.
	ListDomains(ctx context.Context, orgID string) ([]Domain, error)
	// ListDomainsPage pages the organization's domains newest first, without records. Errors:
	// invalid_argument (limit outside 1-MaxListLimit, a cursor this service did not issue).
	ListDomainsPage(ctx context.Context, orgID string, q PageQuery) (Page[Domain], error)
	// GetDomain returns the domain with its records. Errors: not_found.
	GetDomain(ctx context.Context, orgID, id string) (Domain, error)
	// VerifyDomain checks every record over DNS and applies SPEC §3's state table. Errors: not_found,
	// resource_exhausted (10 per organization per hour).
	VerifyDomain(ctx context.Context, orgID, id string) (Domain, error)
	// SuspendDomain errors: not_found.
	SuspendDomain(ctx context.Context, orgID, id string) (Domain, error)
	// UpdateDomainTracking changes open and click tracking and returns the domain with its records.
	// Errors: not_found.
	UpdateDomainTracking(ctx context.Context, orgID, id string, t TrackingSettings) (Domain, error)
}

// DomainStore persists sending domains and their records; every method is scoped by organization.
type DomainStore interface {
	// InsertDomainWithin writes the domain, its records and e, unless the organization already holds max
	// domains (max < 1: no bound). The count and the insert are one atomic step: concurrent inserts never
	// take an organization past max. inserted is false, with nothing written, when the organization holds
	// max already. Errors: already_exists (domains_org_name_key).
	InsertDomainWithin(ctx context.Context, d Domain, e Event, max int) (inserted bool, err error)
	// DomainsHeld counts the organization's domains and says whether one is named name (normalised).
	DomainsHeld(ctx context.Context, orgID, name string) (held int, taken bool, err error)
	// ListDomains pages the organization's domains newest first (keyset on createdAt, id), without
	// records. q.Limit is 1-MaxUnpagedListRows; the caller checks the client's bound. Errors:
	// invalid_argument (limit, a cursor this store did not issue).
	ListDomains(ctx context.Context, orgID string, q PageQuery) (Page[Domain], error)
	// GetDomain returns the domain with records. Errors: not_found.
	GetDomain(ctx context.Context, orgID, id string) (Domain, error)
	// DomainByName returns the domain (without records) for a sender's domain. Errors: not_found.
	DomainByName(ctx context.Context, orgID, name string) (Domain, error)
	// SaveVerification stores every record's result, the new status and verifiedAt (kept once set), and
	// the events, in one transaction. Errors: not_found.
	SaveVerification(ctx context.Context, d Domain, events []Event) error
	// SetDomainStatus changes the status. Errors: not_found.
	SetDomainStatus(ctx context.Context, orgID, id string, status DomainStatus) (Domain, error)
	// SetDomainTracking changes the settings that are not nil. Errors: not_found.
	SetDomainTracking(ctx context.Context, orgID, id string, t TrackingSettings) (Domain, error)
}
