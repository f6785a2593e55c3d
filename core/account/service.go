// Package account holds the account use cases of SPEC §4.1 and §5: sign-up, login, refresh tokens, two-factor
// authentication, turning bearer tokens into principals, API keys, SMTP credentials and organization
// governance. It implements the ports driving interfaces on top of the ports stores and knows nothing of HTTP,
// SQL or RPC.
package account

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/postmill/postmill/core/lookupcache"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	// DefaultAccessTTL keeps access tokens short-lived: they are not revocable, so their lifetime bounds how
	// long a leaked one works.
	DefaultAccessTTL = 15 * time.Minute
	// DefaultRefreshTTL is how long a login lasts without use; each refresh starts a new period.
	DefaultRefreshTTL = 30 * 24 * time.Hour
	// DefaultSubmissionHost and DefaultSubmissionPort match the default POSTMILL_SUBMISSION_ADDR.
	DefaultSubmissionHost = "127.0.0.1"
	DefaultSubmissionPort = 1587
	// DefaultLoginAccountLimit and DefaultLoginAccountWindow throttle password attempts per account, beside
	// SPEC §8's 10 per minute per client IP: 20 per 15 minutes stops a guesser spread over many addresses
	// while leaving room for a person who mistypes.
	DefaultLoginAccountLimit  = 20
	DefaultLoginAccountWindow = 15 * time.Minute
)

// Config tunes the account use cases. Zero values mean the defaults, so Config{} is valid.
type Config struct {
	// AdminEmails bootstrap the first platform admin (POSTMILL_ADMIN_EMAILS), compared case-insensitively: a
	// sign-up with a listed email becomes an admin only while the platform has no admin at all. Nothing
	// proves that whoever signs up owns the address, so the list must not grant admin once an admin exists;
	// after that, `postmill admin grant|revoke EMAIL` manages admins. Editing the list changes no existing user.
	AdminEmails []string
	// AccessTTL is the lifetime of access JWTs (default 15 minutes).
	AccessTTL time.Duration
	// RefreshTTL is the lifetime of each refresh token (default 30 days).
	RefreshTTL time.Duration
	// DefaultPlan is the allowance of a new organization (POSTMILL_DEFAULT_MONTHLY_LIMIT/_WARMUP_CAP).
	DefaultPlan ports.Plan
	// SubmissionHost and SubmissionPort are where SMTP credentials submit mail; they are returned with every
	// credential (default 127.0.0.1:1587).
	SubmissionHost string
	SubmissionPort int
	// PasswordParams are the argon2id costs of new password hashes (default DefaultPasswordParams); tests
	// lower them to stay fast.
	PasswordParams PasswordParams
	// PasswordWorkers is how many argon2id hashes run at once (default GOMAXPROCS), and PasswordQueue how
	// many more callers may wait for one (default DefaultPasswordQueuePerWorker per worker). A caller
	// beyond both gets a 429 with retryAfterSeconds 1.
	PasswordWorkers int
	PasswordQueue   int
	// LoginAccountLimit password attempts per LoginAccountWindow are allowed per account email, counted in
	// the shared rate-limit store whether or not the account exists (defaults DefaultLoginAccountLimit and
	// DefaultLoginAccountWindow). Enrolment's password check counts against the same window.
	LoginAccountLimit  int
	LoginAccountWindow time.Duration
	// MaxAPIKeys is how many keys that are not revoked an organization may hold (default DefaultMaxAPIKeys).
	MaxAPIKeys int
	// APIKeyCacheTTL is how long a key record read by prefix is reused when no revocation is announced
	// (default DefaultAPIKeyCacheTTL; negative disables the cache). Tests lengthen it to show that the
	// announcement, not the timeout, reaches every process.
	APIKeyCacheTTL time.Duration
}

func (c Config) withDefaults() Config {
	if c.AccessTTL == 0 {
		c.AccessTTL = DefaultAccessTTL
	}
	if c.RefreshTTL == 0 {
		c.RefreshTTL = DefaultRefreshTTL
	}
	if c.SubmissionHost == "" {
		c.SubmissionHost = DefaultSubmissionHost
	}
	if c.SubmissionPort == 0 {
		c.SubmissionPort = DefaultSubmissionPort
	}
	c.PasswordParams = c.PasswordParams.withDefaults()
	if c.PasswordWorkers == 0 {
		c.PasswordWorkers = defaultPasswordWorkers()
	}
	if c.PasswordQueue == 0 {
		c.PasswordQueue = DefaultPasswordQueuePerWorker * c.PasswordWorkers
	}
	if c.LoginAccountLimit == 0 {
		c.LoginAccountLimit = DefaultLoginAccountLimit
	}
	if c.LoginAccountWindow == 0 {
		c.LoginAccountWindow = DefaultLoginAccountWindow
	}
	if c.MaxAPIKeys == 0 {
		c.MaxAPIKeys = DefaultMaxAPIKeys
	}
	if c.APIKeyCacheTTL == 0 {
		c.APIKeyCacheTTL = DefaultAPIKeyCacheTTL
	}
	return c
}

// Validate reports a configuration that would misbehave at run time, so the process refuses to start instead.
// It judges the configuration with its defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	for _, e := range c.AdminEmails {
		if _, ok := normaliseEmail(e); !ok {
			errs = append(errs, fmt.Errorf("admin email %q is not a valid address", e))
		}
	}
	if c.AccessTTL < 0 || c.RefreshTTL < 0 {
		errs = append(errs, errors.New("token lifetimes must be positive"))
	}
	if c.AccessTTL >= c.RefreshTTL {
		errs = append(errs, fmt.Errorf("access token lifetime %s must be shorter than refresh token lifetime %s", c.AccessTTL, c.RefreshTTL))
	}
	if c.DefaultPlan.MonthlyLimit < 0 || c.DefaultPlan.WarmupCap < 0 {
		errs = append(errs, errors.New("default plan limits must not be negative"))
	}
	if c.SubmissionPort < 1 || c.SubmissionPort > 65535 {
		errs = append(errs, fmt.Errorf("submission port %d out of range", c.SubmissionPort))
	}
	if err := c.PasswordParams.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.PasswordWorkers < 1 || c.PasswordQueue < 0 {
		errs = append(errs, fmt.Errorf("password workers %d must be positive and queue %d not negative", c.PasswordWorkers, c.PasswordQueue))
	}
	if c.LoginAccountLimit < 1 || c.LoginAccountWindow <= 0 {
		errs = append(errs, errors.New("the per-account login limit and window must be positive"))
	}
	if c.MaxAPIKeys < 0 {
		errs = append(errs, errors.New("the bound on an organization's API keys must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("account config: %w", err)
	}
	return nil
}

// Deps are the Service's driven ports. Clock defaults to the wall clock and Logger to a discarding one; the
// rest are required.
type Deps struct {
	Accounts        ports.AccountStore
	Organizations   ports.OrganizationStore
	APIKeys         ports.APIKeyStore
	SMTPCredentials ports.SMTPCredentialStore
	// RateLimiter counts password attempts per account (Config.LoginAccountLimit).
	RateLimiter ports.RateLimiter
	// Changes, when set, hears of every pause, resume and plan change as soon as it is stored, so that
	// this process's send path applies it to the very next send (other processes hear it from the store);
	// the Service subscribes to it to forget cached API keys revoked by another process.
	Changes ports.ChangeFeed
	Clock   ports.Clock
	Keyring *secret.Keyring
	Logger  *slog.Logger
}

// Service is the account area's one use-case type. It serves several driving interfaces because they share
// the same stores, keys and rules (a login and an API key check are two doors into one account model).
type Service struct {
	cfg      Config
	accounts ports.AccountStore
	orgs     ports.OrganizationStore
	apiKeys  ports.APIKeyStore
	smtp     ports.SMTPCredentialStore
	limiter  ports.RateLimiter
	changes  ports.ChangeFeed // nil: nobody in this process caches organizations
	clock    ports.Clock
	keyring  *secret.Keyring
	logger   *slog.Logger
	admins   map[string]bool
	// accessKeys sign (the first, the primary master's) and verify (any) access tokens.
	accessKeys [][]byte
	// dummyHash is verified against when a login names an unknown email, so that the answer takes as long as
	// for a known one and response time does not reveal who has an account.
	dummyHash string
	pool      *hashPool
	// verifyFn is verifyPassword; tests wrap it to see which hashes a login checked.
	verifyFn func(password, encoded string) (bool, error)

	touchMu sync.Mutex
	touched map[string]time.Time // API key id → last successful authentication, awaiting Run's flush

	keyCache *lookupcache.Cache[string, ports.APIKey] // API key records by prefix (apikey_cache.go)
}

var (
	_ ports.AccountService        = (*Service)(nil)
	_ ports.AuthService           = (*Service)(nil)
	_ ports.APIKeyService         = (*Service)(nil)
	_ ports.SMTPCredentialService = (*Service)(nil)
	_ ports.OrganizationService   = (*Service)(nil)
)

// New builds the Service. It hashes one random password with cfg's argon2id parameters up front (the decoy for
// unknown emails at login), so construction takes as long as one login.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if deps.Accounts == nil || deps.Organizations == nil || deps.APIKeys == nil || deps.SMTPCredentials == nil {
		return nil, errors.New("account: every store is required")
	}
	if deps.RateLimiter == nil {
		return nil, errors.New("account: a rate limiter is required")
	}
	if deps.Keyring == nil {
		return nil, errors.New("account: a keyring is required")
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	admins := make(map[string]bool, len(cfg.AdminEmails))
	for _, e := range cfg.AdminEmails {
		n, _ := normaliseEmail(e)
		admins[n] = true
	}
	s := &Service{
		cfg:        cfg,
		accounts:   deps.Accounts,
		orgs:       deps.Organizations,
		apiKeys:    deps.APIKeys,
		smtp:       deps.SMTPCredentials,
		limiter:    deps.RateLimiter,
		changes:    deps.Changes,
		clock:      deps.Clock,
		keyring:    deps.Keyring,
		logger:     deps.Logger,
		admins:     admins,
		accessKeys: deps.Keyring.DeriveAll(AccessKeyPurpose),
		dummyHash:  hashPassword(string(randomBytes(16)), cfg.PasswordParams),
		pool:       newHashPool(cfg.PasswordWorkers, cfg.PasswordQueue),
		verifyFn:   verifyPassword,
		touched:    make(map[string]time.Time),
		keyCache:   lookupcache.New[string, ports.APIKey](cfg.APIKeyCacheTTL, DefaultAPIKeyCacheSize, time.Now),
	}
	if deps.Changes != nil {
		// The Service lives as long as its process, and so does the subscription.
		deps.Changes.Subscribe(s.apiKeysChanged)
	}
	return s, nil
}

// now is the clock's time in UTC, so every timestamp the service writes has one zone.
func (s *Service) now() time.Time { return s.clock.Now().UTC() }
