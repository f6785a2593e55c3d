package ports

import (
	"context"
	"time"
)

// Clock tells the time; the core never calls time.Now directly so tests can move it.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// AccountStore persists users, organizations, memberships and refresh tokens. Unique violations come back
// as already_exists naming the constraint; missing rows as not_found.
type AccountStore interface {
	// CreateSignup writes the user, the organization and the membership in one transaction.
	CreateSignup(ctx context.Context, u User, org Organization, m Membership) error
	// UserByEmail looks up a user by normalised email.
	UserByEmail(ctx context.Context, email string) (User, error)
	// UserByID looks up a user.
	UserByID(ctx context.Context, id string) (User, error)
	// Memberships returns the user's memberships, oldest first.
	Memberships(ctx context.Context, userID string) ([]Membership, error)
	// SetUserTOTP stores the (encrypted) seed and whether 2FA is enabled.
	SetUserTOTP(ctx context.Context, userID string, secret []byte, enabled bool) error
	// InsertRefreshToken stores a new refresh token.
	InsertRefreshToken(ctx context.Context, t RefreshToken) error
	// ConsumeRefreshToken atomically marks the token with this hash used at now. fresh is false when the
	// token had already been used or revoked (the caller then revokes the family); not_found when no token
	// has this hash.
	ConsumeRefreshToken(ctx context.Context, hash []byte, now time.Time) (t RefreshToken, fresh bool, err error)
	// RevokeRefreshFamily revokes every unrevoked token of a family.
	RevokeRefreshFamily(ctx context.Context, familyID string, now time.Time) error
}

// OrganizationStore persists organizations and their usage meters.
type OrganizationStore interface {
	Organization(ctx context.Context, orgID string) (Organization, error)
	// ListOrganizations returns every organization, newest first.
	ListOrganizations(ctx context.Context) ([]Organization, error)
	SetOrganizationPaused(ctx context.Context, orgID string, paused bool) (Organization, error)
	SetOrganizationPlan(ctx context.Context, orgID string, plan Plan) (Organization, error)
	// Usage returns the value of a usage meter (metric such as "emails_sent") for the period starting at
	// periodStart; 0 when nothing was metered.
	Usage(ctx context.Context, orgID, metric string, periodStart time.Time) (int64, error)
}

// APIKeyStore persists API keys. Every method but APIKeyByPrefix and TouchAPIKeys is scoped by organization.
type APIKeyStore interface {
	InsertAPIKey(ctx context.Context, k APIKey) error
	// ListAPIKeys returns the organization's keys, newest first.
	ListAPIKeys(ctx context.Context, orgID string) ([]APIKey, error)
	// RevokeAPIKey sets revokedAt (keeping an earlier one); not_found when the key is not the organization's.
	RevokeAPIKey(ctx context.Context, orgID, id string, now time.Time) error
	// APIKeyByPrefix finds a key for authentication; the caller compares hashes.
	APIKeyByPrefix(ctx context.Context, prefix string) (APIKey, error)
	// TouchAPIKeys records lastUsedAt for many keys at once (batched off the request path).
	TouchAPIKeys(ctx context.Context, lastUsed map[string]time.Time) error
}

// SMTPCredentialStore persists SMTP credentials.
type SMTPCredentialStore interface {
	InsertSMTPCredential(ctx context.Context, c SMTPCredential) error
	// ListSMTPCredentials returns the organization's credentials, newest first.
	ListSMTPCredentials(ctx context.Context, orgID string) ([]SMTPCredential, error)
	// DeleteSMTPCredential errors: not_found when the credential is not the organization's.
	DeleteSMTPCredential(ctx context.Context, orgID, id string) error
	// SMTPCredentialByUsername finds a credential for SMTP AUTH.
	SMTPCredentialByUsername(ctx context.Context, username string) (SMTPCredential, error)
}

// RateLimitStore keeps fixed-window counters shared by every process.
type RateLimitStore interface {
	// IncrementWindow adds one to the counter of key in the window starting at windowStart and returns
	// the new count; expiresAt tells when the row may be deleted.
	IncrementWindow(ctx context.Context, key string, windowStart, expiresAt time.Time) (int, error)
	// DeleteExpiredWindows removes counters whose windows ended before now.
	DeleteExpiredWindows(ctx context.Context, now time.Time) (int, error)
}

// Pinger reports whether a backing engine answers (for /readyz).
type Pinger interface {
	Ping(ctx context.Context) error
}
