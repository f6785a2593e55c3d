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
	CreatedAt   time.Time
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
	// EnrollTOTP starts (or restarts) enrolment with a fresh seed. Errors: failed_precondition when 2FA is
	// already enabled, not_found.
	EnrollTOTP(ctx context.Context, p Principal) (TOTPEnrollment, error)
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
	// CreateAPIKey issues a key; nil scopes means DefaultScopes. Errors: invalid_argument.
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

// Core bundles the driving interfaces a tier calls. In one process they are the core's use cases; in a
// split deployment they are adapters/rpc clients, and the tier cannot tell the difference.
type Core struct {
	Accounts        AccountService
	Auth            AuthService
	APIKeys         APIKeyService
	SMTPCredentials SMTPCredentialService
	Organizations   OrganizationService
	RateLimiter     RateLimiter
	Domains         DomainService
	Emails          EmailService
	// Delivery is what the MTA tier calls.
	Delivery       DeliveryService
	Webhooks       WebhookService
	Templates      TemplateService
	Deliverability DeliverabilityService
	// Feedback is what the inbound tier calls for bounces and complaints.
	Feedback FeedbackService
	// Tracking answers the open pixel and click redirects.
	Tracking TrackingService
	// Health answers when the core and its database answer.
	Health Pinger
}
