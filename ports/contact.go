package ports

import (
	"context"
	"time"
)

// Consent and subscription states (SPEC §2 Contact, §2 Topic).
const (
	ConsentSubscribed   = "subscribed"
	ConsentUnsubscribed = "unsubscribed"
	ConsentPending      = "pending"
)

// Contact bounds (SPEC §2 Contact, §8).
const (
	MaxContactEmailLen      = 320
	MaxContactNameLen       = 200
	MaxContactLocaleLen     = 35
	MaxContactTimezoneLen   = 64
	MaxContactSourceLen     = 64
	MaxContactProperties    = 100
	MaxContactPropertyKey   = 64
	MaxContactPropertyValue = 1024
	MaxConsentSourceLen     = 128
	MaxConsentIPLen         = 64
	MaxContactSearchLen     = 320
	MaxImportRows           = 10000
	MaxImportCSVBytes       = 8 << 20
	MaxPreferenceTopics     = 200
)

// Contact is one marketing contact of an organization (SPEC §2). Properties hold strings, float64 numbers,
// booleans or nil.
type Contact struct {
	ID             string
	OrganizationID string
	Email          string
	FirstName      string
	LastName       string
	Locale         string
	Timezone       string
	Source         string
	Properties     map[string]any
	ConsentStatus  string
	ConsentSource  string
	ConsentIP      string
	ConsentAt      *time.Time
	Bounced        bool
	LastSentAt     *time.Time
	LastActiveAt   *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// ContactInput is the body of a contact create or update: a nil field is absent. Email is only read on
// create (it is immutable); Properties replaces the stored map when non-nil.
type ContactInput struct {
	Email         string
	FirstName     *string
	LastName      *string
	Locale        *string
	Timezone      *string
	Source        *string
	Properties    map[string]any
	ConsentStatus *string
	ConsentSource *string
	ConsentIP     *string
}

// ContactQuery filters and pages GET /v1/contacts (SPEC §4.7): Limit 1-100 (0 means the default), Offset
// from 0, ConsentStatus one of the consent states or "", Search a substring of the email or a name.
type ContactQuery struct {
	Limit         int
	Offset        int
	ConsentStatus string
	Search        string
}

// ContactList is one page of contacts, newest first, with the count of every match.
type ContactList struct {
	Data   []Contact
	Total  int
	Limit  int
	Offset int
}

// ImportRequest is POST /v1/contacts/import: exactly one of Contacts and CSV (HasContacts tells an empty
// array from an absent one). Upsert nil means true.
type ImportRequest struct {
	Contacts    []ContactInput
	HasContacts bool
	CSV         *string
	Upsert      *bool
}

// ImportRowError names one row the import skipped, by its zero-based index in the payload.
type ImportRowError struct {
	Index   int
	Message string
	Details []FieldViolation
}

// ImportResult is the import's answer (SPEC §4.7).
type ImportResult struct {
	Created int
	Updated int
	Skipped int
	Errors  []ImportRowError
}

// TopicPreference is one topic as a contact's preferences show it.
type TopicPreference struct {
	TopicID     string
	Key         string
	Name        string
	Description string
	// Status is the contact's subscription status ("" when it never subscribed).
	Status     string
	Subscribed bool
}

// Preferences is a contact's consent and topic state (GET /v1/contacts/{id}/preferences, /p/prefs).
type Preferences struct {
	ContactID     string
	ConsentStatus string
	Topics        []TopicPreference
}

// TopicChoice is one entry of a preference update: subscribe to or leave the topic with Key.
type TopicChoice struct {
	Key        string
	Subscribed bool
}

// PreferenceUpdate is the body of PATCH /v1/contacts/{id}/preferences and POST /p/prefs/{token}:
// at most MaxPreferenceTopics choices; UnsubscribeAll sets the contact's consent to unsubscribed.
type PreferenceUpdate struct {
	Topics         []TopicChoice
	UnsubscribeAll bool
	// Source is recorded as the consent source of the changes ("preferences", "api").
	Source string
	IP     string
}

// ContactService is the contacts use case (SPEC §4.7). Errors: invalid_argument with details for bad
// input, not_found for a contact that is not the organization's, already_exists for a duplicate email.
type ContactService interface {
	CreateContact(ctx context.Context, orgID string, in ContactInput) (Contact, error)
	GetContact(ctx context.Context, orgID, id string) (Contact, error)
	UpdateContact(ctx context.Context, orgID, id string, in ContactInput) (Contact, error)
	DeleteContact(ctx context.Context, orgID, id string) error
	ListContacts(ctx context.Context, orgID string, q ContactQuery) (ContactList, error)
	ImportContacts(ctx context.Context, orgID string, req ImportRequest) (ImportResult, error)
	// ExportContactsPage returns up to limit contacts with an id above afterID, in id order: the edge streams the
	// CSV export page by page, so memory does not grow with the number of contacts.
	ExportContactsPage(ctx context.Context, orgID, afterID string, limit int) ([]Contact, error)
	ContactPreferences(ctx context.Context, orgID, contactID string) (Preferences, error)
	UpdateContactPreferences(ctx context.Context, orgID, contactID string, u PreferenceUpdate) (Preferences, error)
}

// PublicConfirmation is what the double opt-in page shows: the topic and whether the subscription is now
// (or already was) confirmed.
type PublicConfirmation struct {
	TopicKey  string
	TopicName string
	Status    string
}

// PublicPreferenceService answers the token-gated public pages /p/prefs/{token} and /p/confirm/{token}
// (SPEC §4.11). The core opens the token; the edge never holds the keyring. Errors: invalid_argument for
// a bad, altered or foreign-purpose token (the edge shows one page for all of them), not_found when what
// the token names is gone.
type PublicPreferenceService interface {
	PublicPreferences(ctx context.Context, token string) (Preferences, error)
	UpdatePublicPreferences(ctx context.Context, token string, u PreferenceUpdate) (Preferences, error)
	// GetConfirmation reads the pending subscription a confirm token names; it changes nothing.
	GetConfirmation(ctx context.Context, token string) (PublicConfirmation, error)
	// ConfirmTopic moves the subscription from pending to subscribed (idempotent).
	ConfirmTopic(ctx context.Context, token string, ip string) (PublicConfirmation, error)
}

// ContactStore is what the contacts use case reads and writes. Every method is scoped by organization.
type ContactStore interface {
	// CreateContact inserts c (id, timestamps and normalised email set). Errors: already_exists with
	// constraint contacts_organization_id_email_key.
	CreateContact(ctx context.Context, c Contact) (Contact, error)
	GetContact(ctx context.Context, orgID, id string) (Contact, error)
	GetContactByEmail(ctx context.Context, orgID, email string) (Contact, error)
	// UpdateContact applies the non-nil fields of in (Email ignored); consent_at moves when the consent
	// status changes. Errors: not_found.
	UpdateContact(ctx context.Context, orgID, id string, in ContactInput, now time.Time) (Contact, error)
	DeleteContact(ctx context.Context, orgID, id string) error
	ListContacts(ctx context.Context, orgID string, q ContactQuery) (ContactList, error)
	// ImportContacts writes rows (validated, normalised, unique by email) in one transaction: new emails
	// are created, existing ones updated when upsert (only the fields a row sets) or skipped.
	ImportContacts(ctx context.Context, orgID string, rows []ContactInput, upsert bool, now time.Time) (created, updated, skipped int, err error)
	ExportContacts(ctx context.Context, orgID, afterID string, limit int) ([]Contact, error)
	// ContactPreferences lists every topic of the organization with the contact's subscription status.
	ContactPreferences(ctx context.Context, orgID, contactID string) (Preferences, error)
	// ApplyPreferences sets the listed topic subscriptions (an unknown key is invalid_argument at
	// topics.<i>.key, changing nothing) and, with UnsubscribeAll, the contact's consent, in one transaction.
	ApplyPreferences(ctx context.Context, orgID, contactID string, u PreferenceUpdate, now time.Time) error
}

// Audience names who a broadcast goes to: exactly one of SegmentID and TopicID.
type Audience struct{ SegmentID, TopicID string }

// AudienceContact is what the broadcast expander needs of one contact.
type AudienceContact struct {
	ID, Email, FirstName, LastName, Locale, Timezone string
	Properties                                       map[string]any
}

// AudienceStore pages through an audience by contact id (ascending): only contacts whose consentStatus is
// subscribed and who have not bounced; for a topic audience, only subscribed (not pending) subscriptions;
// for a segment, the segment's rule. Suppressions are applied by the caller. Errors: not_found when the
// segment or topic is not the organization's.
type AudienceStore interface {
	PageAudience(ctx context.Context, orgID string, a Audience, afterContactID string, limit int) ([]AudienceContact, error)
	// UnsubscribeContact sets the contact's consentStatus to unsubscribed (topicID "") or its subscription
	// to the topic to unsubscribed, recording source; unknown ids are not an error.
	UnsubscribeContact(ctx context.Context, orgID, contactID, topicID, source string) error
}
