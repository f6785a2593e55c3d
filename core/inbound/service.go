// Package inbound holds the inbound-mail use cases of SPEC §4.12: inbound domains and the MX check that
// verifies them, routing rules and their precedence, receiving a message the MX listener accepted (keeping
// it, scanning its attachments, judging spam, routing it and acting on it) and the received-mail API. It
// implements ports.InboundService and ports.ReceiveService over ports.InboundStore and knows nothing of
// HTTP, SQL or SMTP.
//
// MX check → status (SPEC §3 leaves the mapping open): verified when an MX record of the domain names the
// configured MX host; failed when MX records resolve but none names it; pending when none resolve (no such
// name, no MX, or a lookup failure). verifiedAt is set the first time and kept. A suspended domain stays
// suspended whatever the check finds; only verifying again after it is deleted and re-added brings it back.
package inbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/postmill/postmill/core/domain"
	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/core/webhook"
	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	DefaultMXPriority = 10
	DefaultRecordTTL  = 3600
	// DefaultRouteCacheTTL bounds how long another core process may use a domain's compiled routes after a
	// change made elsewhere; changes made in this process take effect at once.
	DefaultRouteCacheTTL = 5 * time.Second
	// Route bounds of SPEC §4.12.
	maxMatchValue  = 320
	maxDestination = 2048
	maxPriority    = 10000
	defaultPrio    = 100
)

// Config is what the composition root decides.
type Config struct {
	// MXHost is the host inbound domains point their MX at (POSTMILL_INBOUND_MX_HOST).
	MXHost        string
	MXPriority    int
	RecordTTL     int
	RouteCacheTTL time.Duration
	// Schedule is the wait before each webhook retry (default: the webhook endpoints' schedule of SPEC §6).
	Schedule []time.Duration
}

// Deps are the Service's driven ports. Spam defaults to a checker that answers ham; Clock to the wall clock.
type Deps struct {
	Store    ports.InboundStore
	Resolver ports.Resolver
	Blobs    ports.BlobStore
	Scanner  ports.Scanner
	// Parts derives an attachment's bytes from the raw message, so that receiving writes the raw message
	// only; without it each clean attachment is written as an object of its own.
	Parts ports.MessageParts
	Spam  ports.SpamChecker
	// Sender and Keyring post webhook routes' requests and seal their secrets; without them webhook routes
	// cannot be created.
	Sender  ports.WebhookSender
	Keyring *secret.Keyring
	// Emails and Domains re-send what forward_email routes take, from a verified sending domain of the
	// organization; without them forwarded messages fail.
	Emails  ports.EmailService
	Domains ports.DomainService
	Clock   ports.Clock
	Logger  *slog.Logger
}

// Service implements ports.InboundService and ports.ReceiveService.
type Service struct {
	cfg  Config
	deps Deps

	mu      sync.Mutex
	routes  map[string]cachedRoutes // by inbound domain id
	domains map[string]cachedDomain // by name, for the MX listener's lookups
}

// cachedDomain is an inbound-domain lookup by name; found is false for a name that is no inbound domain.
type cachedDomain struct {
	d     ports.InboundDomain
	found bool
	at    time.Time
}

type cachedRoutes struct {
	c  *compiled
	at time.Time
}

var (
	_ ports.InboundService = (*Service)(nil)
	_ ports.ReceiveService = (*Service)(nil)
)

// Ham is the default SpamChecker: every message is ham.
type Ham struct{}

// Check implements ports.SpamChecker.
func (Ham) Check(context.Context, []byte) (ports.SpamVerdict, error) {
	return ports.SpamVerdict{Status: ports.SpamHam}, nil
}

// New checks the configuration and the required ports.
func New(cfg Config, deps Deps) (*Service, error) {
	cfg.MXHost = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(cfg.MXHost)), ".")
	if msg := domain.CheckName(cfg.MXHost); msg != "" {
		return nil, fmt.Errorf("inbound: MX host %q: %s", cfg.MXHost, msg)
	}
	if cfg.MXPriority == 0 {
		cfg.MXPriority = DefaultMXPriority
	}
	if cfg.RecordTTL == 0 {
		cfg.RecordTTL = DefaultRecordTTL
	}
	if cfg.RouteCacheTTL == 0 {
		cfg.RouteCacheTTL = DefaultRouteCacheTTL
	}
	if len(cfg.Schedule) == 0 {
		cfg.Schedule = webhook.DefaultSchedule
	}
	if deps.Store == nil || deps.Resolver == nil || deps.Blobs == nil || deps.Scanner == nil {
		return nil, errors.New("inbound: the store, resolver, blob store and scanner are required")
	}
	if deps.Spam == nil {
		deps.Spam = Ham{}
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, deps: deps, routes: map[string]cachedRoutes{}, domains: map[string]cachedDomain{}}, nil
}

func (s *Service) now() time.Time { return s.deps.Clock.Now().UTC().Truncate(time.Microsecond) }

// withRecord fills in the MX record the domain's owner publishes.
func (s *Service) withRecord(d ports.InboundDomain) ports.InboundDomain {
	d.DNSRecord = ports.DNSRecord{
		DomainID: d.ID, Type: ports.RRTypeMX, RecordType: ports.RRTypeMX, Host: d.Name,
		Value: fmt.Sprintf("%d %s", d.MXPriority, d.MXHost), TTL: s.cfg.RecordTTL, Required: true,
		Verified: d.Status == ports.InboundVerified, CheckedAt: d.LastCheckedAt,
	}
	return d
}

// CreateInboundDomain implements ports.InboundService.
func (s *Service) CreateInboundDomain(ctx context.Context, orgID, name string) (ports.InboundDomain, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	if msg := domain.CheckName(name); msg != "" {
		return ports.InboundDomain{}, ports.ValidationError(ports.FieldViolation{Path: "domain", Message: msg})
	}
	d := ports.InboundDomain{
		ID: id.New(), OrganizationID: orgID, Name: name, Status: ports.InboundPending,
		MXHost: s.cfg.MXHost, MXPriority: s.cfg.MXPriority, CreatedAt: s.now(),
	}
	if err := s.deps.Store.InsertInboundDomain(ctx, d); err != nil {
		return ports.InboundDomain{}, err
	}
	return s.withRecord(d), nil
}

// ListInboundDomains implements ports.InboundService.
func (s *Service) ListInboundDomains(ctx context.Context, orgID string) ([]ports.InboundDomain, error) {
	ds, err := s.deps.Store.ListInboundDomains(ctx, orgID)
	for i := range ds {
		ds[i] = s.withRecord(ds[i])
	}
	return ds, err
}

// GetInboundDomain implements ports.InboundService.
func (s *Service) GetInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	d, err := s.deps.Store.GetInboundDomain(ctx, orgID, id)
	if err != nil {
		return d, err
	}
	return s.withRecord(d), nil
}

// mxStatus maps an MX lookup to a status (see the package documentation).
func mxStatus(mxs []ports.MX, err error, host string) ports.InboundDomainStatus {
	if err != nil || len(mxs) == 0 {
		return ports.InboundPending
	}
	for _, mx := range mxs {
		if strings.EqualFold(strings.TrimSuffix(mx.Host, "."), host) {
			return ports.InboundVerified
		}
	}
	return ports.InboundFailed
}

// VerifyInboundDomain implements ports.InboundService.
func (s *Service) VerifyInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	d, err := s.deps.Store.GetInboundDomain(ctx, orgID, id)
	if err != nil {
		return d, err
	}
	mxs, lerr := s.deps.Resolver.LookupMX(ctx, d.Name)
	status := mxStatus(mxs, lerr, d.MXHost)
	now := s.now()
	d.LastCheckedAt = &now
	if d.Status != ports.InboundSuspended {
		d.Status = status
	}
	if status == ports.InboundVerified && d.VerifiedAt == nil {
		d.VerifiedAt = &now
	}
	d, err = s.deps.Store.SaveInboundCheck(ctx, d)
	if err != nil {
		return d, err
	}
	s.forgetName(d.Name)
	return s.withRecord(d), nil
}

// SuspendInboundDomain implements ports.InboundService.
func (s *Service) SuspendInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	d, err := s.deps.Store.SetInboundDomainStatus(ctx, orgID, id, ports.InboundSuspended)
	if err != nil {
		return d, err
	}
	s.forgetName(d.Name)
	return s.withRecord(d), nil
}

// DeleteInboundDomain implements ports.InboundService.
func (s *Service) DeleteInboundDomain(ctx context.Context, orgID, id string) error {
	d, err := s.deps.Store.GetInboundDomain(ctx, orgID, id)
	if err != nil {
		return err
	}
	if err := s.deps.Store.DeleteInboundDomain(ctx, orgID, id); err != nil {
		return err
	}
	s.forget(id)
	s.forgetName(d.Name)
	return nil
}

// checkAddress says why a is not a full address local@domain, or "".
func checkAddress(a string) string {
	local, host, ok := strings.Cut(a, "@")
	if !ok || local == "" || strings.ContainsAny(local, " \t\r\n<>@,;\"") {
		return "must be a full address local@domain"
	}
	if msg := domain.CheckName(host); msg != "" {
		return "must be a full address local@domain: domain " + msg
	}
	return ""
}

// checkDestination applies the destination rule of the action.
func checkDestination(action, dest string) string {
	if len(dest) > maxDestination {
		return fmt.Sprintf("must be at most %d characters", maxDestination)
	}
	switch action {
	case ports.ActionWebhook:
		u, err := url.Parse(dest)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return "must be an http or https URL for a webhook route"
		}
	case ports.ActionForwardEmail:
		a, err := mail.ParseAddress(dest)
		if err != nil || a.Name != "" || a.Address != dest || checkAddress(strings.ToLower(dest)) != "" {
			return "must be an email address for a forward_email route"
		}
	case ports.ActionStore:
		if dest != "" {
			return "must be empty for a store route"
		}
	}
	return ""
}

// checkRouteDomain says why a route's match value can take no mail at its inbound domain, or "": mail
// reaches a route only through its own domain, so an exact address elsewhere, or a pattern whose domain part
// is literal and another domain's, would be kept and never match. A pattern whose domain part holds a *
// ("*@*") is left alone: it may match at the domain.
func checkRouteDomain(matchType, value, domainName string) string {
	switch matchType {
	case ports.MatchExact:
		if _, host, _ := strings.Cut(value, "@"); host != domainName {
			return "must be an address at the route's inbound domain " + domainName
		}
	case ports.MatchPattern:
		at := strings.LastIndexByte(value, '@')
		if host := value[at+1:]; at >= 0 && !strings.Contains(host, "*") && host != domainName {
			return "must match addresses at the route's inbound domain " + domainName
		}
	}
	return ""
}

// CreateRoute implements ports.InboundService.
func (s *Service) CreateRoute(ctx context.Context, orgID string, in ports.InboundRouteInput) (ports.InboundRoute, error) {
	var v []ports.FieldViolation
	r := ports.InboundRoute{
		ID: id.New(), OrganizationID: orgID, InboundDomainID: in.InboundDomainID, MatchType: in.MatchType,
		MatchValue: strings.ToLower(strings.TrimSpace(in.MatchValue)), Action: in.Action,
		Destination: strings.TrimSpace(in.Destination), Enabled: true, Priority: defaultPrio, CreatedAt: s.now(),
	}
	if in.Enabled != nil {
		r.Enabled = *in.Enabled
	}
	if in.Priority != nil {
		r.Priority = *in.Priority
	}
	switch r.MatchType {
	case ports.MatchCatchAll:
		r.MatchValue = ""
	case ports.MatchExact, ports.MatchPattern:
		switch {
		case r.MatchValue == "":
			v = append(v, ports.FieldViolation{Path: "matchValue", Message: "is required unless matchType is catch_all"})
		case len(r.MatchValue) > maxMatchValue:
			v = append(v, ports.FieldViolation{Path: "matchValue", Message: fmt.Sprintf("must be at most %d characters", maxMatchValue)})
		case r.MatchType == ports.MatchExact:
			if msg := checkAddress(r.MatchValue); msg != "" {
				v = append(v, ports.FieldViolation{Path: "matchValue", Message: msg})
			}
		case strings.ContainsAny(r.MatchValue, " \t\r\n"):
			v = append(v, ports.FieldViolation{Path: "matchValue", Message: "must not contain white space"})
		}
	default:
		v = append(v, ports.FieldViolation{Path: "matchType", Message: "must be one of exact, pattern, catch_all"})
	}
	switch r.Action {
	case ports.ActionWebhook, ports.ActionForwardEmail, ports.ActionStore:
		if msg := checkDestination(r.Action, r.Destination); msg != "" {
			v = append(v, ports.FieldViolation{Path: "destination", Message: msg})
		}
	default:
		v = append(v, ports.FieldViolation{Path: "action", Message: "must be one of webhook, forward_email, store"})
	}
	if r.Priority < 0 || r.Priority > maxPriority {
		v = append(v, ports.FieldViolation{Path: "priority", Message: fmt.Sprintf("must be between 0 and %d", maxPriority)})
	}
	if len(v) > 0 {
		return ports.InboundRoute{}, ports.ValidationError(v...)
	}
	d, err := s.deps.Store.GetInboundDomain(ctx, orgID, r.InboundDomainID)
	if err != nil {
		return ports.InboundRoute{}, err
	}
	if msg := checkRouteDomain(r.MatchType, r.MatchValue, d.Name); msg != "" {
		return ports.InboundRoute{}, ports.ValidationError(ports.FieldViolation{Path: "matchValue", Message: msg})
	}
	plain := ""
	if r.Action == ports.ActionWebhook {
		if s.deps.Keyring == nil {
			return ports.InboundRoute{}, errors.New("inbound: webhook routes need a keyring")
		}
		plain = newRouteSecret()
		sealed, err := s.deps.Keyring.Seal([]byte(plain), routeSecretAAD(r.ID))
		if err != nil {
			return ports.InboundRoute{}, err
		}
		r.Secret = sealed
	}
	if err := s.deps.Store.InsertRoute(ctx, r); err != nil {
		return ports.InboundRoute{}, err
	}
	s.forget(r.InboundDomainID)
	out := r
	out.Secret, out.PlainSecret = nil, plain
	return out, nil
}

// UpdateRoute implements ports.InboundService: only enabled, priority and destination change (the edge
// refuses a body naming another field, SPEC §4.12).
func (s *Service) UpdateRoute(ctx context.Context, orgID, id string, p ports.InboundRoutePatch) (ports.InboundRoute, error) {
	cur, err := s.deps.Store.GetRoute(ctx, orgID, id)
	if err != nil {
		return cur, err
	}
	var v []ports.FieldViolation
	if p.Priority != nil && (*p.Priority < 0 || *p.Priority > maxPriority) {
		v = append(v, ports.FieldViolation{Path: "priority", Message: fmt.Sprintf("must be between 0 and %d", maxPriority)})
	}
	if p.Destination != nil {
		d := strings.TrimSpace(*p.Destination)
		p.Destination = &d
		if msg := checkDestination(cur.Action, d); msg != "" {
			v = append(v, ports.FieldViolation{Path: "destination", Message: msg})
		}
	}
	if len(v) > 0 {
		return ports.InboundRoute{}, ports.ValidationError(v...)
	}
	r, err := s.deps.Store.UpdateRoute(ctx, orgID, id, p)
	if err != nil {
		return r, err
	}
	s.forget(r.InboundDomainID)
	return r, nil
}

// DeleteRoute implements ports.InboundService.
func (s *Service) DeleteRoute(ctx context.Context, orgID, id string) error {
	r, err := s.deps.Store.DeleteRoute(ctx, orgID, id)
	if err != nil {
		return err
	}
	s.forget(r.InboundDomainID)
	return nil
}

// ListRoutes implements ports.InboundService.
func (s *Service) ListRoutes(ctx context.Context, orgID, domainID string) ([]ports.InboundRoute, error) {
	if _, err := s.deps.Store.GetInboundDomain(ctx, orgID, domainID); err != nil {
		return nil, err
	}
	return s.deps.Store.ListRoutes(ctx, orgID, domainID)
}

// ResolveRoute implements ports.InboundService.
func (s *Service) ResolveRoute(ctx context.Context, orgID, address string) (*ports.InboundRoute, error) {
	address = strings.ToLower(strings.TrimSpace(address))
	_, host, ok := strings.Cut(address, "@")
	if !ok {
		return nil, nil
	}
	d, err := s.deps.Store.InboundDomainByName(ctx, host)
	if ports.ErrorCode(err) == ports.CodeNotFound || (err == nil && d.OrganizationID != orgID) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := s.compiledRoutes(ctx, d)
	if err != nil {
		return nil, err
	}
	return c.match(address), nil
}

// compiledRoutes returns the domain's compiled routes, compiling them at most once per RouteCacheTTL.
func (s *Service) compiledRoutes(ctx context.Context, d ports.InboundDomain) (*compiled, error) {
	now := time.Now()
	s.mu.Lock()
	c, ok := s.routes[d.ID]
	s.mu.Unlock()
	if ok && now.Sub(c.at) < s.cfg.RouteCacheTTL {
		return c.c, nil
	}
	rs, err := s.deps.Store.ListRoutes(ctx, d.OrganizationID, d.ID)
	if err != nil {
		return nil, err
	}
	cc := compile(rs)
	s.mu.Lock()
	s.routes[d.ID] = cachedRoutes{c: cc, at: now}
	s.mu.Unlock()
	return cc, nil
}

// forget drops a domain's compiled routes after a change made through this process.
func (s *Service) forget(domainID string) {
	s.mu.Lock()
	delete(s.routes, domainID)
	s.mu.Unlock()
}

// domainByName looks an inbound domain up for the MX listener, at most once per RouteCacheTTL per name: RCPT
// and DATA of every message ask. A change made through this process is seen at once (forgetName); one made
// through another core process within RouteCacheTTL.
func (s *Service) domainByName(ctx context.Context, name string) (ports.InboundDomain, bool, error) {
	now := time.Now()
	s.mu.Lock()
	c, ok := s.domains[name]
	s.mu.Unlock()
	if ok && now.Sub(c.at) < s.cfg.RouteCacheTTL {
		return c.d, c.found, nil
	}
	d, err := s.deps.Store.InboundDomainByName(ctx, name)
	found := err == nil
	if err != nil && ports.ErrorCode(err) != ports.CodeNotFound {
		return d, false, err
	}
	s.mu.Lock()
	if len(s.domains) > maxCachedDomains {
		clear(s.domains)
	}
	s.domains[name] = cachedDomain{d: d, found: found, at: now}
	s.mu.Unlock()
	return d, found, nil
}

// maxCachedDomains bounds the lookup cache: a sender trying many names cannot grow it without limit.
const maxCachedDomains = 10000

// forgetName drops a cached lookup after a change of the domain made through this process.
func (s *Service) forgetName(name string) {
	s.mu.Lock()
	delete(s.domains, name)
	s.mu.Unlock()
}
