package ports

import (
	"context"
	"time"
)

// Reputation statuses of a sending domain (GET /v1/reputation).
const (
	ReputationGood    = "good"
	ReputationWarning = "warning"
	ReputationAtRisk  = "at_risk"
)

// ReputationDay is one UTC day of a sending domain's traffic: emails sent, delivered, bounced (hard and soft)
// and complained about, counted on the day each happened.
type ReputationDay struct {
	Date        time.Time
	Sent        int64
	Delivered   int64
	HardBounced int64
	SoftBounced int64
	Complained  int64
}

// DomainDay is a ReputationDay of one sending domain.
type DomainDay struct {
	Domain string
	ReputationDay
}

// BounceClassCount is how many bounces of one class (core/deliverability's classes) a domain had.
type BounceClassCount struct {
	Domain string
	Class  string
	Count  int64
}

// DomainReputation is one sending domain over the window: the days, the totals, the rates and the status.
type DomainReputation struct {
	Domain        string
	Days          []ReputationDay
	Total         ReputationDay // Date is the window's first day
	BounceRate    float64       // hard bounces / sent
	ComplaintRate float64       // complaints / delivered (sent when nothing was delivered)
	Status        string
	BounceClasses []BounceClassCount
}

// ReputationThresholds are the limits statuses and automatic protection apply; rates are fractions (0.003 is
// 0.3%).
type ReputationThresholds struct {
	ComplaintWarning float64
	ComplaintAtRisk  float64
	BounceWarning    float64
	BounceAtRisk     float64
	// MinVolume is the emails sent below which rates say too little to judge: the status stays good and
	// protection does not act.
	MinVolume int64
}

// Protection is the automatic protection state of an organization: broadcasts paused, and why.
type Protection struct {
	BroadcastsPaused bool
	Reason           string
	PausedAt         *time.Time
}

// Reputation is GET /v1/reputation.
type Reputation struct {
	Days       int
	Since      time.Time
	Thresholds ReputationThresholds
	Domains    []DomainReputation
	Protection Protection
}

// OrganizationHealth is one organization's traffic over the protection window, for the protection and
// warm-up loop and the admin view.
type OrganizationHealth struct {
	OrganizationID string
	Name           string
	Sent           int64
	Delivered      int64
	HardBounced    int64
	Complained     int64
	WarmupCap      int64
	Protection     Protection
	// WarmupStepOn is the last day the warm-up schedule raised or held the cap; nil before any.
	WarmupStepOn *time.Time
}

// AdminOrganization is one row of the admin platform view: an organization's last window of traffic
// judged like GET /v1/reputation judges a domain.
type AdminOrganization struct {
	OrganizationHealth
	BounceRate    float64
	ComplaintRate float64
	Status        string
}

// QueueDepth is the delivery work waiting for one destination site (the recipient domain): jobs in the
// PostgreSQL queue, those of them leased by an MTA, and jobs still in the outbox (scheduled or retrying).
type QueueDepth struct {
	Domain         string
	Queued         int64
	Leased         int64
	Outbox         int64
	OldestQueuedAt *time.Time
}

// PlatformView is GET /v1/admin/platform.
type PlatformView struct {
	Window        time.Duration
	Organizations []AdminOrganization
	Queues        []QueueDepth
}

// ReputationService is GET /v1/reputation and automatic protection's state (SPEC §4.13).
type ReputationService interface {
	// Reputation reports the organization's sending domains over the last days days (1-90).
	// Errors: invalid_argument (days outside the window, path "days").
	Reputation(ctx context.Context, orgID string, days int) (Reputation, error)
	// Protection reports whether the organization's broadcasts are paused by automatic protection.
	Protection(ctx context.Context, orgID string) (Protection, error)
	// ResumeBroadcasts lifts automatic protection's pause (admin). Errors: not_found.
	ResumeBroadcasts(ctx context.Context, orgID string) (Protection, error)
	// PlatformView is the operator's view of every organization with traffic and of the delivery queue
	// per destination site (admin).
	PlatformView(ctx context.Context) (PlatformView, error)
}

// ReputationStore reads the traffic reputation is computed from (events, bounces, complaints) and keeps
// the protection and warm-up state. Every per-organization method is scoped by organization.
type ReputationStore interface {
	// ReputationDays returns per domain and UTC day the organization's counts since since.
	ReputationDays(ctx context.Context, orgID string, since time.Time) ([]DomainDay, error)
	// BounceClassCounts returns per domain and class the organization's bounces since since.
	BounceClassCounts(ctx context.Context, orgID string, since time.Time) ([]BounceClassCount, error)
	// Protection returns the organization's state; the zero value when none was recorded.
	Protection(ctx context.Context, orgID string) (Protection, error)
	// SetBroadcastsPaused records the pause (with its reason) or lifts it. Errors: not_found.
	SetBroadcastsPaused(ctx context.Context, orgID string, paused bool, reason string, now time.Time) (Protection, error)
	// OrganizationsHealth returns every organization that sent since since, or has a warm-up cap.
	OrganizationsHealth(ctx context.Context, since time.Time) ([]OrganizationHealth, error)
	// StepWarmup sets the organization's warm-up cap to newCap (0 lifts it) and records day as its last
	// step, unless a step was already recorded for day or later; stepped says whether it did.
	StepWarmup(ctx context.Context, orgID string, newCap int64, day, now time.Time) (stepped bool, err error)
	// QueueDepths returns the deepest limit destination sites of the delivery queue and outbox.
	QueueDepths(ctx context.Context, limit int) ([]QueueDepth, error)
}
