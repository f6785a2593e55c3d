// Package reputation computes sending domains' bounce and complaint rates from the core's own tables
// (GET /v1/reputation), pauses an organization's broadcasts when its rates cross the configured limits
// (automatic protection), and raises warm-up caps day by day while rates stay healthy (adaptive warm-up).
// docs/reputation.md gives the thresholds, their sources and the schedule.
package reputation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"

	"github.com/postmill/postmill/ports"
)

// The window of GET /v1/reputation?days= (SPEC §8).
const (
	MinDays = 1
	MaxDays = 90
)

// DefaultThresholds are the statuses' limits. Complaints: Gmail's and Yahoo's bulk-sender rules (2024) ask
// for a spam rate under 0.3% and advise under 0.1%. Hard bounces: 2% is the common industry warning level
// and 5% is where Amazon SES puts an account under review.
var DefaultThresholds = ports.ReputationThresholds{
	ComplaintWarning: 0.001, ComplaintAtRisk: 0.003,
	BounceWarning: 0.02, BounceAtRisk: 0.05,
	MinVolume: 100,
}

// Config is what the operator decides. Zero values take the defaults.
type Config struct {
	Thresholds ports.ReputationThresholds
	// ProtectComplaintRate and ProtectBounceRate are the rates over ProtectWindow, at MinVolume emails sent
	// or more, that pause broadcasts (defaults: the at-risk thresholds). A negative value disables that
	// trigger.
	ProtectComplaintRate float64
	ProtectBounceRate    float64
	ProtectWindow        time.Duration // default 24 h
	// Interval is how often the loop checks (default 5 minutes).
	Interval time.Duration
	// WarmupFactor multiplies a healthy organization's warm-up cap once a day (default 1.5); WarmupCeiling
	// is the cap at or above which warm-up ends and the cap is lifted (default 100,000). A factor of 1 or
	// less turns adaptive warm-up off.
	WarmupFactor  float64
	WarmupCeiling int64
}

// Deps are the ports the service uses.
type Deps struct {
	Store  ports.ReputationStore
	Clock  ports.Clock
	Logger *slog.Logger
}

// Service implements ports.ReputationService and runs the protection and warm-up loop.
type Service struct {
	cfg  Config
	deps Deps
}

var _ ports.ReputationService = (*Service)(nil)

// New fills the defaults.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.Store == nil {
		return nil, errors.New("reputation: Store is required")
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Thresholds == (ports.ReputationThresholds{}) {
		cfg.Thresholds = DefaultThresholds
	}
	if cfg.ProtectComplaintRate == 0 {
		cfg.ProtectComplaintRate = cfg.Thresholds.ComplaintAtRisk
	}
	if cfg.ProtectBounceRate == 0 {
		cfg.ProtectBounceRate = cfg.Thresholds.BounceAtRisk
	}
	if cfg.ProtectWindow <= 0 {
		cfg.ProtectWindow = 24 * time.Hour
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Minute
	}
	if cfg.WarmupFactor == 0 {
		cfg.WarmupFactor = 1.5
	}
	if cfg.WarmupCeiling == 0 {
		cfg.WarmupCeiling = 100000
	}
	return &Service{cfg: cfg, deps: deps}, nil
}

// Rates returns the hard-bounce rate (of sent) and the complaint rate (of delivered, or of sent when nothing
// was delivered).
func Rates(d ports.ReputationDay) (bounce, complaint float64) {
	if d.Sent > 0 {
		bounce = float64(d.HardBounced) / float64(d.Sent)
	}
	base := d.Delivered
	if base == 0 {
		base = d.Sent
	}
	if base > 0 {
		complaint = float64(d.Complained) / float64(base)
	}
	return bounce, complaint
}

// Status judges a total against the thresholds: at risk when either rate reaches its at-risk level, warning
// when either reaches its warning level, good otherwise or below the minimum volume.
func Status(t ports.ReputationThresholds, total ports.ReputationDay) string {
	if total.Sent < t.MinVolume {
		return ports.ReputationGood
	}
	b, c := Rates(total)
	switch {
	case b >= t.BounceAtRisk || c >= t.ComplaintAtRisk:
		return ports.ReputationAtRisk
	case b >= t.BounceWarning || c >= t.ComplaintWarning:
		return ports.ReputationWarning
	}
	return ports.ReputationGood
}

// Reputation reports each sending domain with traffic in the last days UTC days (today included).
func (s *Service) Reputation(ctx context.Context, orgID string, days int) (ports.Reputation, error) {
	if days < MinDays || days > MaxDays {
		return ports.Reputation{}, ports.ValidationError(ports.FieldViolation{
			Path: "days", Message: fmt.Sprintf("must be between %d and %d", MinDays, MaxDays)})
	}
	now := s.deps.Clock.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	since := today.AddDate(0, 0, -(days - 1))
	rows, err := s.deps.Store.ReputationDays(ctx, orgID, since)
	if err != nil {
		return ports.Reputation{}, fmt.Errorf("reputation: days: %w", err)
	}
	classes, err := s.deps.Store.BounceClassCounts(ctx, orgID, since)
	if err != nil {
		return ports.Reputation{}, fmt.Errorf("reputation: bounce classes: %w", err)
	}
	prot, err := s.deps.Store.Protection(ctx, orgID)
	if err != nil {
		return ports.Reputation{}, fmt.Errorf("reputation: protection: %w", err)
	}
	byDomain := map[string]*ports.DomainReputation{}
	var order []string
	get := func(d string) *ports.DomainReputation {
		r, ok := byDomain[d]
		if !ok {
			r = &ports.DomainReputation{Domain: d, Total: ports.ReputationDay{Date: since}}
			byDomain[d] = r
			order = append(order, d)
		}
		return r
	}
	for _, row := range rows {
		r := get(row.Domain)
		r.Days = append(r.Days, row.ReputationDay)
		r.Total.Sent += row.Sent
		r.Total.Delivered += row.Delivered
		r.Total.HardBounced += row.HardBounced
		r.Total.SoftBounced += row.SoftBounced
		r.Total.Complained += row.Complained
	}
	for _, c := range classes {
		r := get(c.Domain)
		r.BounceClasses = append(r.BounceClasses, c)
	}
	sort.Strings(order)
	out := ports.Reputation{Days: days, Since: since, Thresholds: s.cfg.Thresholds, Protection: prot,
		Domains: make([]ports.DomainReputation, 0, len(order))}
	for _, d := range order {
		r := byDomain[d]
		sort.Slice(r.Days, func(i, j int) bool { return r.Days[i].Date.Before(r.Days[j].Date) })
		sort.Slice(r.BounceClasses, func(i, j int) bool { return r.BounceClasses[i].Count > r.BounceClasses[j].Count })
		r.BounceRate, r.ComplaintRate = Rates(r.Total)
		r.Status = Status(s.cfg.Thresholds, r.Total)
		out.Domains = append(out.Domains, *r)
	}
	return out, nil
}

// Protection reports the organization's protection state.
func (s *Service) Protection(ctx context.Context, orgID string) (ports.Protection, error) {
	p, err := s.deps.Store.Protection(ctx, orgID)
	if err != nil {
		return ports.Protection{}, fmt.Errorf("reputation: protection: %w", err)
	}
	return p, nil
}

// ResumeBroadcasts lifts the pause. Protection pauses again at its next check if the rates still cross
// the limits over the window, so an operator resumes once the cause is dealt with.
func (s *Service) ResumeBroadcasts(ctx context.Context, orgID string) (ports.Protection, error) {
	p, err := s.deps.Store.SetBroadcastsPaused(ctx, orgID, false, "", s.deps.Clock.Now())
	if err != nil {
		return ports.Protection{}, fmt.Errorf("reputation: resume broadcasts: %w", err)
	}
	s.deps.Logger.Info("reputation: broadcasts resumed", "organization_id", orgID)
	return p, nil
}

// Run checks every Interval until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if err := s.Check(ctx); err != nil && ctx.Err() == nil {
			s.deps.Logger.Error("reputation: check", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check runs automatic protection and adaptive warm-up once over every organization.
func (s *Service) Check(ctx context.Context) error {
	now := s.deps.Clock.Now().UTC()
	orgs, err := s.deps.Store.OrganizationsHealth(ctx, now.Add(-s.cfg.ProtectWindow))
	if err != nil {
		return fmt.Errorf("reputation: organizations: %w", err)
	}
	var errs []error
	for _, o := range orgs {
		if err := s.protect(ctx, o, now); err != nil {
			errs = append(errs, err)
		}
		if err := s.warmup(ctx, o, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// protect pauses the organization's broadcasts when a rate crosses its limit at the minimum volume.
func (s *Service) protect(ctx context.Context, o ports.OrganizationHealth, now time.Time) error {
	if o.Protection.BroadcastsPaused || o.Sent < s.cfg.Thresholds.MinVolume {
		return nil
	}
	bounce, complaint := Rates(ports.ReputationDay{Sent: o.Sent, Delivered: o.Delivered, HardBounced: o.HardBounced, Complained: o.Complained})
	var reason string
	switch {
	case s.cfg.ProtectComplaintRate > 0 && complaint >= s.cfg.ProtectComplaintRate:
		reason = fmt.Sprintf("complaint rate %.2f%% over the last %s reached the limit of %.2f%%",
			100*complaint, s.cfg.ProtectWindow, 100*s.cfg.ProtectComplaintRate)
	case s.cfg.ProtectBounceRate > 0 && bounce >= s.cfg.ProtectBounceRate:
		reason = fmt.Sprintf("hard-bounce rate %.2f%% over the last %s reached the limit of %.2f%%",
			100*bounce, s.cfg.ProtectWindow, 100*s.cfg.ProtectBounceRate)
	default:
		return nil
	}
	if _, err := s.deps.Store.SetBroadcastsPaused(ctx, o.OrganizationID, true, reason, now); err != nil {
		return fmt.Errorf("reputation: pause %s: %w", o.OrganizationID, err)
	}
	// The operator's alert: admins watch this line (and the admin view); the organization sees the field
	// on GET /v1/organization and GET /v1/reputation.
	s.deps.Logger.Warn("reputation: broadcasts paused by automatic protection",
		"organization_id", o.OrganizationID, "reason", reason, "sent", o.Sent)
	return nil
}

// warmup raises a healthy organization's cap by WarmupFactor once a UTC day and holds it otherwise; at the
// ceiling the cap is lifted.
func (s *Service) warmup(ctx context.Context, o ports.OrganizationHealth, now time.Time) error {
	if o.WarmupCap <= 0 || s.cfg.WarmupFactor <= 1 {
		return nil
	}
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	if o.WarmupStepOn != nil && !o.WarmupStepOn.Before(today) {
		return nil
	}
	next := o.WarmupCap
	healthy := !o.Protection.BroadcastsPaused && Status(s.cfg.Thresholds, ports.ReputationDay{
		Sent: o.Sent, Delivered: o.Delivered, HardBounced: o.HardBounced, Complained: o.Complained}) == ports.ReputationGood
	if healthy {
		next = int64(math.Ceil(float64(o.WarmupCap) * s.cfg.WarmupFactor))
		if next >= s.cfg.WarmupCeiling {
			next = 0
		}
	}
	stepped, err := s.deps.Store.StepWarmup(ctx, o.OrganizationID, next, today, now)
	if err != nil {
		return fmt.Errorf("reputation: warm-up %s: %w", o.OrganizationID, err)
	}
	if stepped && next != o.WarmupCap {
		s.deps.Logger.Info("reputation: warm-up cap raised", "organization_id", o.OrganizationID, "from", o.WarmupCap, "to", next)
	}
	return nil
}

// PlatformView judges every organization with traffic over the protection window like a domain on
// GET /v1/reputation, most complaints first, and lists the 100 deepest destination sites of the queue.
func (s *Service) PlatformView(ctx context.Context) (ports.PlatformView, error) {
	now := s.deps.Clock.Now().UTC()
	orgs, err := s.deps.Store.OrganizationsHealth(ctx, now.Add(-s.cfg.ProtectWindow))
	if err != nil {
		return ports.PlatformView{}, fmt.Errorf("reputation: organizations: %w", err)
	}
	queues, err := s.deps.Store.QueueDepths(ctx, 100)
	if err != nil {
		return ports.PlatformView{}, fmt.Errorf("reputation: queue depths: %w", err)
	}
	out := ports.PlatformView{Window: s.cfg.ProtectWindow, Queues: queues, Organizations: make([]ports.AdminOrganization, 0, len(orgs))}
	for _, o := range orgs {
		total := ports.ReputationDay{Sent: o.Sent, Delivered: o.Delivered, HardBounced: o.HardBounced, Complained: o.Complained}
		b, c := Rates(total)
		out.Organizations = append(out.Organizations, ports.AdminOrganization{
			OrganizationHealth: o, BounceRate: b, ComplaintRate: c, Status: Status(s.cfg.Thresholds, total)})
	}
	sort.SliceStable(out.Organizations, func(i, j int) bool {
		return out.Organizations[i].ComplaintRate > out.Organizations[j].ComplaintRate
	})
	return out, nil
}
