// Package domain holds the sending-domain use cases of SPEC §4.3: registering a domain with a fresh DKIM
// keypair and the five DNS records its owner publishes, verifying those records over live DNS with the state
// machine of SPEC §3, and suspending a domain. It implements ports.DomainService on top of ports.DomainStore
// and ports.Resolver and knows nothing of HTTP, SQL or the DNS wire format.
//
// Required records. A domain verifies when SPF, DKIM and RETURN_PATH all resolve to their expected values:
// DKIM always (without the public key no receiver can check a signature), SPF because the envelope sender's
// domain must authorise the MTA, RETURN_PATH because bounces come back through it. DMARC and TRACKING are
// recommended: they are checked and reported on every run but never decide the status.
package domain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	// DefaultRegion is the region a domain is reported in until deployments span several.
	DefaultRegion = "us-east-1"
	// DefaultKeyBits is the DKIM key size: RFC 8301 §3.2 requires verifiers to accept 1024 to 4096 bits and
	// signers to use at least 1024; 2048 is the size every major receiver accepts and still fits a TXT record.
	DefaultKeyBits = 2048
	// DefaultVerifyLimit and DefaultVerifyWindow are SPEC §4.3's limit of 10 verify calls per organization per
	// hour: each call fans out to five live DNS queries, so an unbounded loop would hammer the resolver.
	DefaultVerifyLimit  = 10
	DefaultVerifyWindow = time.Hour
	// RecordTTL is the TTL suggested for every published record, in seconds.
	RecordTTL = 3600
	// VerifyRateKeyPrefix prefixes the organization id in the rate-limit key of VerifyDomain.
	VerifyRateKeyPrefix = "verify:"
	// DefaultMaxDomains is how many domains an organization may hold (POSTMILL_MAX_DOMAINS_PER_ORG).
	DefaultMaxDomains = 100
	// MaxDomainsSetting names the configuration that raises MaxDomains, for the refusal's message.
	MaxDomainsSetting = "POSTMILL_MAX_DOMAINS_PER_ORG"
)

// Config holds the hosts the generated records point at and the limits of verification. The four hosts have
// no default here: the composition root reads them from POSTMILL_SPF_INCLUDE, POSTMILL_RETURN_PATH_HOST,
// POSTMILL_TRACKING_HOST and POSTMILL_DMARC_RUA, and a domain published with an empty one would never work.
type Config struct {
	// SPFInclude is the host customers include in their SPF record (v=spf1 include:<SPFInclude> ~all).
	SPFInclude string
	// ReturnPathHost is the target of the RETURN_PATH CNAME bounce.<domain>.
	ReturnPathHost string
	// TrackingHost is the target of the TRACKING CNAME track.<domain>.
	TrackingHost string
	// DMARCRua is the mailbox aggregate DMARC reports go to (rua=mailto:<DMARCRua>).
	DMARCRua string
	// Region is reported on every domain (default DefaultRegion).
	Region string
	// KeyBits is the RSA modulus size of new DKIM keys (default 2048); tests use 1024 to stay fast.
	KeyBits int
	// VerifyLimit calls to VerifyDomain are allowed per organization per VerifyWindow (default 10 per hour).
	VerifyLimit  int
	VerifyWindow time.Duration
	// MaxDomains is how many domains an organization may hold (default DefaultMaxDomains); a creation past
	// it is refused with 403 until one is removed or the bound raised.
	MaxDomains int
}

func (c Config) withDefaults() Config {
	c.SPFInclude = normaliseHost(c.SPFInclude)
	c.ReturnPathHost = normaliseHost(c.ReturnPathHost)
	c.TrackingHost = normaliseHost(c.TrackingHost)
	c.DMARCRua = strings.TrimSpace(c.DMARCRua)
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.KeyBits == 0 {
		c.KeyBits = DefaultKeyBits
	}
	if c.VerifyLimit == 0 {
		c.VerifyLimit = DefaultVerifyLimit
	}
	if c.VerifyWindow == 0 {
		c.VerifyWindow = DefaultVerifyWindow
	}
	if c.MaxDomains == 0 {
		c.MaxDomains = DefaultMaxDomains
	}
	return c
}

// normaliseHost lower-cases a configured host and drops a trailing root dot, so that the value shown to
// customers has one spelling.
func normaliseHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// Validate reports a configuration that would publish records no one can use, so the process refuses to start
// instead. It judges the configuration with its defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	for _, h := range []struct{ name, value string }{
		{"SPF include host", c.SPFInclude},
		{"return-path host", c.ReturnPathHost},
		{"tracking host", c.TrackingHost},
	} {
		if msg := CheckName(h.value); msg != "" {
			errs = append(errs, fmt.Errorf("%s %q: %s", h.name, h.value, msg))
		}
	}
	if msg := checkMailbox(c.DMARCRua); msg != "" {
		errs = append(errs, fmt.Errorf("DMARC report mailbox %q: %s", c.DMARCRua, msg))
	}
	if c.KeyBits < 1024 || c.KeyBits > 4096 {
		// RFC 8301 §3.2: shorter keys must not be used, longer ones need not be accepted by verifiers.
		errs = append(errs, fmt.Errorf("DKIM key size %d must be between 1024 and 4096 bits", c.KeyBits))
	}
	if c.VerifyLimit < 0 || c.VerifyWindow < 0 {
		errs = append(errs, errors.New("verify rate limit must be positive"))
	}
	if c.MaxDomains < 0 {
		errs = append(errs, errors.New("the bound on an organization's domains must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("domain config: %w", err)
	}
	return nil
}

// checkMailbox accepts local@domain where the domain follows the sending-domain grammar and the local part
// has none of the characters that would end the DMARC tag or its URI (RFC 7489 §6.3, §6.4: ';', ',', '!').
func checkMailbox(m string) string {
	local, host, ok := strings.Cut(m, "@")
	if !ok || local == "" {
		return "must be an address local@domain"
	}
	if strings.ContainsAny(local, ";,! \t\r\n@") {
		return "local part has a character that breaks the DMARC record"
	}
	if msg := CheckName(host); msg != "" {
		return "domain " + msg
	}
	return ""
}

// Deps are the Service's driven ports. Clock defaults to the wall clock and Logger to a discarding one; the
// rest are required.
type Deps struct {
	Domains     ports.DomainStore
	Resolver    ports.Resolver
	RateLimiter ports.RateLimiter
	Keyring     *secret.Keyring
	Clock       ports.Clock
	Logger      *slog.Logger
}

// Service is the sending-domain area's use-case type.
type Service struct {
	cfg      Config
	domains  ports.DomainStore
	resolver ports.Resolver
	limiter  ports.RateLimiter
	keyring  *secret.Keyring
	clock    ports.Clock
	logger   *slog.Logger
}

var _ ports.DomainService = (*Service)(nil)

// New validates cfg and builds the Service, so that a configuration publishing unusable records stops the
// process at start rather than surfacing in a customer's DNS.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if deps.Domains == nil || deps.Resolver == nil || deps.RateLimiter == nil {
		return nil, errors.New("domain: the domain store, resolver and rate limiter are required")
	}
	if deps.Keyring == nil {
		return nil, errors.New("domain: a keyring is required")
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{
		cfg:      cfg,
		domains:  deps.Domains,
		resolver: deps.Resolver,
		limiter:  deps.RateLimiter,
		keyring:  deps.Keyring,
		clock:    deps.Clock,
		logger:   deps.Logger,
	}, nil
}

// now is the clock's time in UTC, so every timestamp the service writes has one zone.
func (s *Service) now() time.Time { return s.clock.Now().UTC() }

// CreateDomain registers name for the organization with a fresh DKIM keypair, a new selector and the five
// records of SPEC §2, in status pending, and records domain.created in the same transaction. The private key
// is sealed before it reaches the store and is not part of the answer. The call is not rate-limited (SPEC
// §8 limits three routes only); what bounds the RSA key generations an organization can cause is that a
// name it holds already, or a creation past MaxDomains, is refused before a key is generated, and it can
// hold at most MaxDomains. The store inserts only while the organization holds fewer than MaxDomains,
// decided atomically with the insert, so the check before is an economy, not the rule. Errors:
// invalid_argument, already_exists, permission_denied (ports.ReasonResourceLimit).
func (s *Service) CreateDomain(ctx context.Context, orgID, name string) (ports.Domain, error) {
	name, err := normaliseName(name)
	if err != nil {
		return ports.Domain{}, err
	}
	held, taken, err := s.domains.DomainsHeld(ctx, orgID, name)
	if err != nil {
		return ports.Domain{}, fmt.Errorf("domain: held: %w", err)
	}
	switch {
	case taken:
		return ports.Domain{}, ports.AlreadyExists("domains_org_name_key")
	case s.cfg.MaxDomains > 0 && held >= s.cfg.MaxDomains:
		return ports.Domain{}, ports.ResourceLimitReached(ports.ResourceDomains, "domains", s.cfg.MaxDomains, MaxDomainsSetting)
	}
	id := newID()
	der, publicKey, err := newDKIMKey(s.cfg.KeyBits)
	if err != nil {
		return ports.Domain{}, fmt.Errorf("domain: dkim key: %w", err)
	}
	sealed, err := sealKey(s.keyring, der, id)
	clear(der)
	if err != nil {
		return ports.Domain{}, fmt.Errorf("domain: seal dkim key: %w", err)
	}
	selector := newSelector()
	now := s.now()
	d := ports.Domain{
		ID:             id,
		OrganizationID: orgID,
		Name:           name,
		Status:         ports.DomainPending,
		Region:         s.cfg.Region,
		DKIMSelector:   selector,
		DKIMPrivateKey: sealed,
		DKIMPublicKey:  publicKey,
		CreatedAt:      now,
		Records:        buildRecords(s.cfg, id, name, selector, publicKey, newID),
	}
	ev := domainEvent(orgID, id, ports.EventDomainCreated, now)
	inserted, err := s.domains.InsertDomainWithin(ctx, d, ev, s.cfg.MaxDomains)
	if err != nil {
		return ports.Domain{}, fmt.Errorf("domain: insert: %w", err)
	}
	if !inserted {
		return ports.Domain{}, ports.ResourceLimitReached(ports.ResourceDomains, "domains", s.cfg.MaxDomains, MaxDomainsSetting)
	}
	return withoutPrivateKey(d), nil
}

// ListDomains returns the organization's newest ports.MaxUnpagedListRows domains, newest first, without
// records.
func (s *Service) ListDomains(ctx context.Context, orgID string) ([]ports.Domain, error) {
	page, err := s.listDomains(ctx, orgID, ports.Unpaged())
	return page.Data, err
}

// ListDomainsPage pages the organization's domains newest first, without records. Errors:
// invalid_argument (limit outside 1-100, a cursor the store did not issue).
func (s *Service) ListDomainsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Domain], error) {
	q, err := q.Checked()
	if err != nil {
		return ports.Page[ports.Domain]{}, err
	}
	return s.listDomains(ctx, orgID, q)
}

func (s *Service) listDomains(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Domain], error) {
	page, err := s.domains.ListDomains(ctx, orgID, q)
	if err != nil {
		return ports.Page[ports.Domain]{}, fmt.Errorf("domain: list: %w", err)
	}
	for i := range page.Data {
		page.Data[i] = withoutPrivateKey(page.Data[i])
	}
	return page, nil
}

// GetDomain returns the domain with its records and their last check results. Errors: not_found.
func (s *Service) GetDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	d, err := s.domains.GetDomain(ctx, orgID, id)
	if err != nil {
		return ports.Domain{}, fmt.Errorf("domain: get: %w", err)
	}
	return withoutPrivateKey(d), nil
}

// SuspendDomain moves the domain to suspended from any state (SPEC §3 states no precondition). Sending from
// it is refused until a verify run finds every required record again. Errors: not_found.
func (s *Service) SuspendDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	d, err := s.domains.SetDomainStatus(ctx, orgID, id, ports.DomainSuspended)
	if err != nil {
		return ports.Domain{}, fmt.Errorf("domain: suspend: %w", err)
	}
	return withoutPrivateKey(d), nil
}

// UpdateDomainTracking turns open and click tracking on or off (PATCH /v1/domains/{id}); a nil setting is
// left as it is. It answers the domain with its records, like GetDomain. Sends already accepted keep the
// one-copy-per-recipient choice made when they were accepted.
func (s *Service) UpdateDomainTracking(ctx context.Context, orgID, id string, t ports.TrackingSettings) (ports.Domain, error) {
	d, err := s.domains.SetDomainTracking(ctx, orgID, id, t)
	if err != nil {
		return ports.Domain{}, fmt.Errorf("domain: tracking: %w", err)
	}
	return withoutPrivateKey(d), nil
}

// withoutPrivateKey is the only shape a domain leaves the service in: SPEC §2 forbids private-key material in
// any response, and clearing it here keeps every tier from having to remember. Its records say their DNS
// type on the way out.
func withoutPrivateKey(d ports.Domain) ports.Domain {
	d.DKIMPrivateKey = nil
	d.Records = withRecordTypes(d.Records)
	return d
}

func domainEvent(orgID, domainID, typ string, at time.Time) ports.Event {
	return ports.Event{
		ID:             newID(),
		OrganizationID: orgID,
		Type:           typ,
		DomainID:       domainID,
		OccurredAt:     at,
	}
}

// newID is id.New under the name this package's files use.
var newID = id.New
