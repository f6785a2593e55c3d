// Package sending holds the send path of SPEC §4.2 and the core side of delivery: validating and accepting
// messages (idempotency, domain, organization, suppression, attachment and metering rules), relaying outbox
// jobs to the delivery queue, promoting scheduled messages, preparing each job for the MTA tier (DKIM key,
// VERP return path, Message-ID) and applying the MTA's outcomes (statuses, events, suppressions, retries with
// backoff). It implements ports.EmailService and ports.DeliveryService on top of the ports stores and knows
// nothing of HTTP, SQL, SMTP or MIME.
//
// The rules live in pure functions (validateSend, dedupeRecipients, groupJobs, promote, buildOutbound,
// applyReport, DeriveMessageStatus, RetryDelay, EncodeVERP and DecodeVERP); the Service methods only fetch,
// call them and store.
package sending

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/core/lookupcache"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/core/tracking"
	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	// DefaultRetryBase is the wait after a first deferred attempt (POSTMILL_MTA_RETRY_BASE); each later
	// attempt doubles it.
	DefaultRetryBase = time.Minute
	// DefaultRetryCap bounds one wait so that a long outage is still probed every two hours.
	DefaultRetryCap = 2 * time.Hour
	// DefaultMaxAge is how long a deferred message keeps being retried before it fails (POSTMILL_MTA_MAX_AGE).
	// Three days is in the range RFC 5321 §4.5.4.1 suggests ("at least 4-5 days" for the sender's give-up
	// time, shortened here because a transactional email older than that has lost its purpose).
	DefaultMaxAge = 72 * time.Hour
	// DefaultRelayInterval is how long the relay sleeps when the outbox had nothing due, unless the outbox
	// signals jobs this process committed to it (ports.OutboxSignal): the added latency of jobs written by
	// other processes.
	DefaultRelayInterval = 100 * time.Millisecond
	// DefaultRelayBatch is how many outbox jobs one relay transaction publishes.
	DefaultRelayBatch = 500
	// DefaultSchedulerInterval is how often the scheduler looks for due scheduled messages when idle.
	DefaultSchedulerInterval = time.Second
	// DefaultSchedulerBatch is how many scheduled messages one scheduler transaction promotes.
	DefaultSchedulerBatch = 200
	// DefaultLookupCacheTTL is how long Send reuses an organization or a verified domain it read. It makes
	// the hot path one suppression query and one insert, at the price that pausing an organization, changing
	// its plan or suspending a domain takes effect within this long (un-pausing and verifying take effect at
	// once: refusals are never cached).
	DefaultLookupCacheTTL = time.Second
	// DefaultHoldRecheckInterval is how often held deliveries are looked at again without news from the
	// change feed: the longest a resumed organization's or re-verified domain's held mail waits when the
	// feed missed the change.
	DefaultHoldRecheckInterval = 30 * time.Second
	// DefaultHoldReleaseBatch is how many held jobs one release statement moves back to the outbox.
	DefaultHoldReleaseBatch = 1000
)

// maxBatchSize bounds RelayBatch and SchedulerBatch so one transaction never locks an unbounded set of rows.
const maxBatchSize = 10000

// Config tunes the send path and the delivery loops. Zero values mean the defaults, so Config{} is valid.
type Config struct {
	// RetryBase is the wait after the first deferred attempt (default 1 minute); attempt n waits
	// RetryBase·2^(n-1), capped at RetryCap.
	RetryBase time.Duration
	// RetryCap bounds one wait between attempts (default 2 hours).
	RetryCap time.Duration
	// MaxAge is how long after it was first queued a deferred recipient is retried; later it fails
	// (default 72 hours).
	MaxAge time.Duration
	// RelayInterval is the relay's sleep when nothing was due (default 100 ms).
	RelayInterval time.Duration
	// RelayBatch is the number of outbox jobs published per transaction (default 500).
	RelayBatch int
	// SchedulerInterval is the scheduler's sleep when no more messages were due (default 1 s).
	SchedulerInterval time.Duration
	// SchedulerBatch is the number of scheduled messages promoted per transaction (default 200).
	SchedulerBatch int
	// LookupCacheTTL is how long Send reuses an organization (paused flag, plan) or a verified domain it
	// read (default 1 s) when the change feed does not report a change first; a negative value disables
	// the cache.
	LookupCacheTTL time.Duration
	// HoldRecheckInterval is how often held deliveries are checked against their organization and domain
	// when the change feed reports nothing (default 30 s).
	HoldRecheckInterval time.Duration
	// HoldReleaseBatch is the number of held jobs one release statement moves (default 1000).
	HoldReleaseBatch int
}

func (c Config) withDefaults() Config {
	if c.RetryBase == 0 {
		c.RetryBase = DefaultRetryBase
	}
	if c.RetryCap == 0 {
		c.RetryCap = DefaultRetryCap
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.RelayInterval == 0 {
		c.RelayInterval = DefaultRelayInterval
	}
	if c.RelayBatch == 0 {
		c.RelayBatch = DefaultRelayBatch
	}
	if c.SchedulerInterval == 0 {
		c.SchedulerInterval = DefaultSchedulerInterval
	}
	if c.SchedulerBatch == 0 {
		c.SchedulerBatch = DefaultSchedulerBatch
	}
	if c.LookupCacheTTL == 0 {
		c.LookupCacheTTL = DefaultLookupCacheTTL
	}
	if c.HoldRecheckInterval == 0 {
		c.HoldRecheckInterval = DefaultHoldRecheckInterval
	}
	if c.HoldReleaseBatch == 0 {
		c.HoldReleaseBatch = DefaultHoldReleaseBatch
	}
	return c
}

// Validate reports a configuration that would misbehave at run time, so the process refuses to start
// instead. It judges the configuration with its defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.RetryBase < 0 || c.RetryCap < 0 || c.MaxAge < 0 {
		errs = append(errs, errors.New("retry base, retry cap and maximum age must be positive"))
	}
	if c.RetryBase > c.RetryCap {
		errs = append(errs, fmt.Errorf("retry base %s must not exceed retry cap %s", c.RetryBase, c.RetryCap))
	}
	if c.MaxAge > 0 && c.MaxAge < c.RetryBase {
		errs = append(errs, fmt.Errorf("maximum age %s is shorter than the first retry wait %s", c.MaxAge, c.RetryBase))
	}
	if c.RelayInterval < 0 || c.SchedulerInterval < 0 || c.HoldRecheckInterval < 0 {
		errs = append(errs, errors.New("relay, scheduler and hold recheck intervals must be positive"))
	}
	if c.HoldReleaseBatch < 1 || c.HoldReleaseBatch > maxBatchSize {
		errs = append(errs, fmt.Errorf("hold release batch %d out of range 1-%d", c.HoldReleaseBatch, maxBatchSize))
	}
	if c.RelayBatch < 1 || c.RelayBatch > maxBatchSize {
		errs = append(errs, fmt.Errorf("relay batch %d out of range 1-%d", c.RelayBatch, maxBatchSize))
	}
	if c.SchedulerBatch < 1 || c.SchedulerBatch > maxBatchSize {
		errs = append(errs, fmt.Errorf("scheduler batch %d out of range 1-%d", c.SchedulerBatch, maxBatchSize))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sending config: %w", err)
	}
	return nil
}

// Deps are the Service's driven ports. Clock defaults to the wall clock and Logger to a discarding one; the
// rest are required.
type Deps struct {
	Messages      ports.MessageStore
	Domains       ports.DomainStore
	Organizations ports.OrganizationStore
	Outbox        ports.Outbox
	Delivery      ports.DeliveryStore
	Queue         ports.Queue
	Blobs         ports.BlobStore
	Scanner       ports.Scanner
	// Templates renders template references; nil refuses every reference as a missing template.
	Templates ports.TemplateRenderer
	// Tracker rewrites the HTML of tracked domains' mail (pixel and links); nil delivers it untracked.
	Tracker *tracking.Tracker
	// Keyring opens the domains' sealed DKIM keys and derives the VERP key ("verp").
	Keyring *secret.Keyring
	// Held keeps the delivery jobs of paused organizations and suspended domains until they may go again
	// (RunHoldRelease). nil delivers them regardless: only tests of other parts leave it out.
	Held ports.HeldDeliveries
	// Changes, when set, reports changes to organizations and domains: the lookup caches forget them at
	// once and held deliveries are looked at again. nil leaves both to their timeouts.
	Changes ports.ChangeFeed
	Clock   ports.Clock
	Logger  *slog.Logger
}

// Service is the sending area's one use-case type: the send API for the edge and the delivery callbacks for
// the MTA tier share the same stores and rules, and its Run loops (RunRelay, RunScheduler) move the work
// in between.
type Service struct {
	cfg       Config
	messages  ports.MessageStore
	domains   ports.DomainStore
	orgs      ports.OrganizationStore
	outbox    ports.Outbox
	delivery  ports.DeliveryStore
	queue     ports.Queue
	blobs     ports.BlobStore
	scanner   ports.Scanner
	templates ports.TemplateRenderer
	tracker   *tracking.Tracker
	keyring   *secret.Keyring
	clock     ports.Clock
	logger    *slog.Logger
	verpKey   []byte
	held      ports.HeldDeliveries
	// recheck wakes RunHoldRelease when the change feed reports a change (a buffer of one: news that
	// arrives while a round is pending is folded into it).
	recheck chan struct{}

	orgCache    *lookupcache.Cache[string, ports.Organization]
	domainCache *lookupcache.Cache[domainKey, ports.Domain]
}

var (
	_ ports.EmailService    = (*Service)(nil)
	_ ports.DeliveryService = (*Service)(nil)
)

// New builds the Service.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if deps.Messages == nil || deps.Domains == nil || deps.Organizations == nil || deps.Outbox == nil ||
		deps.Delivery == nil || deps.Queue == nil || deps.Blobs == nil || deps.Scanner == nil {
		return nil, errors.New("sending: every store, the queue, the blob store and the scanner are required")
	}
	if deps.Keyring == nil {
		return nil, errors.New("sending: a keyring is required")
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		cfg:         cfg,
		messages:    deps.Messages,
		domains:     deps.Domains,
		orgs:        deps.Organizations,
		outbox:      deps.Outbox,
		delivery:    deps.Delivery,
		queue:       deps.Queue,
		blobs:       deps.Blobs,
		scanner:     deps.Scanner,
		templates:   deps.Templates,
		tracker:     deps.Tracker,
		keyring:     deps.Keyring,
		clock:       deps.Clock,
		logger:      deps.Logger,
		verpKey:     deps.Keyring.Derive(VERPKeyPurpose),
		orgCache:    lookupcache.New[string, ports.Organization](cfg.LookupCacheTTL, 0, time.Now),
		domainCache: lookupcache.New[domainKey, ports.Domain](cfg.LookupCacheTTL, 0, time.Now),
		held:        deps.Held,
		recheck:     make(chan struct{}, 1),
	}
	if deps.Changes != nil {
		// The Service lives as long as its process, and so does the subscription.
		deps.Changes.Subscribe(s.changed)
	}
	return s, nil
}

// now is the clock's time in UTC, so every timestamp the service writes has one zone.
func (s *Service) now() time.Time { return s.clock.Now().UTC() }

// newID is id.New under the name this package's files use.
var newID = id.New
