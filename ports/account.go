package ports

import (
	"context"
	"time"
)

// Plan is an organization's sending allowance. Zero means no limit.
type Plan struct {
	MonthlyLimit int64
	WarmupCap    int64
}

// Organization is the tenant boundary: every key, domain, contact and message belongs to exactly one.
type Organization struct {
	ID        string
	Name      string
	Slug      string
	CreatedAt time.Time
	// Paused organizations may not send (403 org_suspended); an admin pauses and resumes them.
	Paused bool
	Plan   Plan
}

// User is a person who signs in to the dashboard. Users are global; Membership ties them to organizations.
type User struct {
	ID           string
	Email        string
	PasswordHash string // argon2id, PHC string form
	IsAdmin      bool
	// TOTPSecret is the RFC 6238 seed, encrypted at rest; empty until enrolment starts.
	TOTPSecret  []byte
	TOTPEnabled bool
	// TOTPLastStep is the RFC 6238 time step of the last accepted code (0 before any): a code of this step
	// or an earlier one is refused, so each code works once (RFC 6238 §5.2).
	TOTPLastStep int64
	CreatedAt    time.Time
}

// Membership ties a user to an organization.
type Membership struct {
	UserID         string
	OrganizationID string
	Role           string // "owner" for the signup user
	CreatedAt      time.Time
}

// RefreshToken is the stored side of a refresh token: only its SHA-256 hash is kept. Tokens rotate: each
// is used once, and a second use of a spent token revokes its whole family (every token descended from
// the same login).
type RefreshToken struct {
	ID             string
	UserID         string
	OrganizationID string
	FamilyID       string
	TokenHash      []byte
	ExpiresAt      time.Time
	UsedAt         *time.Time
	RevokedAt      *time.Time
	CreatedAt      time.Time
}

// TokenPair is what login, signup and refresh hand out.
type TokenPair struct {
	AccessToken  string
	RefreshToken string
}

// SignupInput is the body of POST /v1/auth/signup. OrganizationName may be empty: it is then derived from
// the email's local part.
type SignupInput struct {
	Email            string
	Password         string
	OrganizationName string
}

// SignupResult is the 201 body of POST /v1/auth/signup.
type SignupResult struct {
	UserID         string
	OrganizationID string
	Tokens         TokenPair
}

// LoginInput is the body of POST /v1/auth/login. TOTP is required once the user has enabled 2FA; OrgID
// picks the organization for users of several (default: the oldest membership).
type LoginInput struct {
	Email    string
	Password string
	TOTP     string
	OrgID    string
}

// TOTPEnrollment is the 201 body of POST /v1/auth/2fa/enroll (RFC 6238, SHA-1, 6 digits, 30 s).
type TOTPEnrollment struct {
	Secret     string // base32
	OTPAuthURL string
}

// PrincipalKind tells how a request authenticated.
type PrincipalKind string

// The two kinds of credential of SPEC §5.
const (
	PrincipalSession PrincipalKind = "session"
	PrincipalAPIKey  PrincipalKind = "api_key"
	// PrincipalSMTP is an SMTP submission credential: it may only send (emails:send).
	PrincipalSMTP PrincipalKind = "smtp_credential"
)

// Principal is an authenticated caller. OrganizationID is the only tenant a request may touch.
type Principal struct {
	Kind           PrincipalKind
	OrganizationID string
	UserID         string   // session principals
	IsAdmin        bool     // session principals: platform admin
	TwoFactor      bool     // session principals: the user has two-factor authentication enabled
	APIKeyID       string   // API key principals
	Scopes         []string // API key principals
	ScopesEnforced bool     // API key principals; keys are always created enforced
}

// HasAnyScope reports whether an API key principal may use a route that any one of required grants.
// ScopeAll grants everything; a key whose scopes are not enforced is treated as unrestricted.
func (p Principal) HasAnyScope(required ...string) bool {
	if p.Kind != PrincipalAPIKey {
		return false
	}
	if !p.ScopesEnforced {
		return true
	}
	for _, have := range p.Scopes {
		if have == ScopeAll {
			return true
		}
		for _, want := range required {
			if have == want {
				return true
			}
		}
	}
	return false
}

// APIKey is a key's metadata. TokenHash (SHA-256 of the whole token) stays inside the store and core.
type APIKey struct {
	ID             string
	OrganizationID string
	Name           string
	Prefix         string // 16 hex characters
	TokenHash      []byte
	Scopes         []string
	ScopesEnforced bool
	LastUsedAt     *time.Time
	RevokedAt      *time.Time
	CreatedAt      time.Time
}

// CreatedAPIKey is the create response: the only time the plaintext token exists outside the caller.
type CreatedAPIKey struct {
	APIKey
	Token string
}

// SMTPCredential is a username/password pair for SMTP submission. Host and Port are where to submit.
type SMTPCredential struct {
	ID             string
	OrganizationID string
	Username       string
	PasswordHash   string // SHA-256 hex of a 192-bit random password; never leaves the core
	Host           string
	Port           int
	CreatedAt      time.Time
}

// CreatedSMTPCredential is the create response: the only time the plaintext password exists.
type CreatedSMTPCredential struct {
	SMTPCredential
	Password string
}

// Subscription is what GET /v1/billing/subscription reports: the plan and this calendar month's usage.
type Subscription struct {
	OrganizationID string
	Plan           Plan
	PeriodStart    time.Time
	PeriodEnd      time.Time
	EmailsSent     int64
}

// RateDecision is the outcome of one rate-limit check.
type RateDecision struct {
	Allowed    bool
	Count      int
	Limit      int
	RetryAfter time.Duration // until the window ends, when not allowed
}

// AccountService is sign-up, sign-in and two-factor (SPEC §4.1).
type AccountService interface {
	// Signup creates a user, an organization and the membership between them, and signs the user in.
	// Errors: invalid_argument (validation), already_exists (constraint users_email_key or
	// organizations_slug_key).
	Signup(ctx context.Context, in SignupInput) (SignupResult, error)
	// Login checks the password (and TOTP when enabled). Errors: invalid_argument, unauthenticated.
	Login(ctx context.Context, in LoginInput) (TokenPair, error)
	// Refresh spends a refresh token for a fresh pair; reusing a spent token revokes its family.
	// Errors: unauthenticated.
	Refresh(ctx context.Context, refreshToken string) (TokenPair, error)
	// Logout revokes the refresh token's whole family (every token of the login it came from), so no
	// refresh works after it. Errors: unauthenticated when no such refresh token exists.
	Logout(ctx context.Context, refreshToken string) error
	// EnrollTOTP starts (or restarts) enrolment with a fresh seed once password proves the caller is the
	// user, not only a holder of their access token. Errors: invalid_argument (password missing),
	// unauthenticated (wrong password), failed_precondition when 2FA is already enabled, not_found.
	EnrollTOTP(ctx context.Context, p Principal, password string) (TOTPEnrollment, error)
	// VerifyTOTP enables 2FA when code matches the pending seed. Errors: invalid_argument (wrong code),
	// failed_precondition (no enrolment started).
	VerifyTOTP(ctx context.Context, p Principal, code string) error
}

// AuthService turns a bearer token into a Principal.
type AuthService interface {
	// AuthenticateAPIKey accepts svc_live_ tokens only. Errors: unauthenticated.
	AuthenticateAPIKey(ctx context.Context, token string) (Principal, error)
	// AuthenticateSession accepts access JWTs only. Errors: unauthenticated.
	AuthenticateSession(ctx context.Context, token string) (Principal, error)
	// AuthenticateSMTP checks an SMTP credential for submission. Errors: unauthenticated.
	AuthenticateSMTP(ctx context.Context, username, password string) (Principal, error)
}

// APIKeyService administers API keys (Session routes).
type APIKeyService interface {
	// ListAPIKeys returns the organization's keys, newest first. Errors: none beyond internal.
	ListAPIKeys(ctx context.Context, orgID string) ([]APIKey, error)
	// CreateAPIKey issues a key; nil scopes means DefaultScopes. Errors: invalid_argument,
	// permission_denied with ReasonResourceLimit (the organization holds as many active keys as allowed).
	CreateAPIKey(ctx context.Context, orgID, name string, scopes []string) (CreatedAPIKey, error)
	// RevokeAPIKey revokes at once. Errors: not_found.
	RevokeAPIKey(ctx context.Context, orgID, id string) error
}

// SMTPCredentialService administers SMTP submission credentials (Session routes).
type SMTPCredentialService interface {
	// CreateSMTPCredential generates a username and password. Errors: none beyond internal.
	CreateSMTPCredential(ctx context.Context, orgID string) (CreatedSMTPCredential, error)
	// ListSMTPCredentials returns the organization's credentials, newest first, without passwords.
	ListSMTPCredentials(ctx context.Context, orgID string) ([]SMTPCredential, error)
	// DeleteSMTPCredential removes one. Errors: not_found.
	DeleteSMTPCredential(ctx context.Context, orgID, id string) error
}

// OrganizationService reads an organization and lets platform admins govern them. Callers check that
// admin methods are reached only by admin principals.
type OrganizationService interface {
	// GetOrganization errors: not_found.
	GetOrganization(ctx context.Context, orgID string) (Organization, error)
	// ListOrganizations returns every organization, newest first (admin).
	ListOrganizations(ctx context.Context) ([]Organization, error)
	// SetPaused pauses or resumes sending (admin). Errors: not_found.
	SetPaused(ctx context.Context, orgID string, paused bool) (Organization, error)
	// SetPlan replaces the allowance and warm-up cap; zero means none (admin). Errors: invalid_argument,
	// not_found.
	SetPlan(ctx context.Context, orgID string, plan Plan) (Organization, error)
	// Subscription reports the plan and this month's usage. Errors: not_found.
	Subscription(ctx context.Context, orgID string) (Subscription, error)
}

// RateLimiter counts requests in fixed windows shared by every process (SPEC §8).
type RateLimiter interface {
	// Allow counts one request against key in the current window of the given length.
	Allow(ctx context.Context, key string, limit int, window time.Duration) (RateDecision, error)
}

// AccountStore persists users, organizations, memberships and refresh tokens. Unique violations come back
// as already_exists naming the constraint; missing rows as not_found.
type AccountStore interface {
	// CreateSignup writes the user, the organization and the membership in one transaction. u.IsAdmin asks
	// for the admin bootstrap: the user becomes an admin only if no user is an admin yet, decided
	// atomically with the insert so two concurrent sign-ups cannot both get it.
	CreateSignup(ctx context.Context, u User, org Organization, m Membership) error
	// SetUserAdmin grants or withdraws platform admin on the user with this normalised email (the
	// operator's `postmill admin` command). Errors: not_found.
	SetUserAdmin(ctx context.Context, email string, admin bool) error
	// UserByEmail looks up a user by normalised email.
	UserByEmail(ctx context.Context, email string) (User, error)
	// UserByID looks up a user.
	UserByID(ctx context.Context, id string) (User, error)
	// Memberships returns the user's memberships, oldest first.
	Memberships(ctx context.Context, userID string) ([]Membership, error)
	// SetUserTOTP stores the (encrypted) seed and whether 2FA is enabled.
	SetUserTOTP(ctx context.Context, userID string, secret []byte, enabled bool) error
	// ClaimTOTPStep records step as the user's last accepted TOTP step when it is later than the one
	// stored, in one conditional update, and reports whether it was: of two logins presenting the same
	// code, exactly one claims its step. Errors: not_found.
	ClaimTOTPStep(ctx context.Context, userID string, step int64) (bool, error)
	// InsertRefreshToken stores a new refresh token.
	InsertRefreshToken(ctx context.Context, t RefreshToken) error
	// RotateRefreshToken spends the token with this hash, when it is unused, unrevoked and unexpired at now,
	// and stores next as its successor (next's UserID, OrganizationID and FamilyID are taken from the spent
	// token), all in one transaction that holds the spent token's row lock: of concurrent rotations of one
	// token exactly one is fresh, and a family revoked after a rotation committed includes its successor.
	// fresh is false, with the stored token, when it was used, revoked or expired (nothing is stored then);
	// not_found when no token has this hash.
	RotateRefreshToken(ctx context.Context, hash []byte, now time.Time, next RefreshToken) (t RefreshToken, fresh bool, err error)
	// RevokeRefreshFamily revokes every unrevoked token of a family.
	RevokeRefreshFamily(ctx context.Context, familyID string, now time.Time) error
	// RevokeRefreshTokenFamily revokes every unrevoked token of the family of the token with this hash,
	// after waiting for any rotation of that token in progress, so its successor is revoked too.
	// Errors: not_found when no token has this hash.
	RevokeRefreshTokenFamily(ctx context.Context, hash []byte, now time.Time) error
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
	// InsertAPIKeyWithin writes the key unless the organization already holds max keys that are not
	// revoked (max < 1: no bound), counted and inserted in one atomic step so concurrent inserts never pass
	// max. inserted is false, with nothing written, when the organization holds max already.
	InsertAPIKeyWithin(ctx context.Context, k APIKey, max int) (inserted bool, err error)
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
