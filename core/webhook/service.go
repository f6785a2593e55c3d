// Package webhook holds the webhook use cases of SPEC §4.6 and the event delivery of SPEC §6: endpoints with
// sealed signing secrets, the fan-out of outbox events to subscribed endpoints, and the dispatcher that
// attempts due deliveries with signed requests, retries failures on a fixed schedule and records outcomes in
// batches. It implements ports.WebhookService on top of ports.WebhookStore and ports.WebhookSender and knows
// nothing of HTTP or SQL: the SSRF guard and the request itself live in the sender adapter.
//
// The rules live in pure functions (Payload, Sign, Headers, NextAttempt, validateURL, validateEventTypes,
// replayPayload and the dispatcher's slot accounting); the Service methods only fetch, call them and store.
package webhook

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	// DefaultFanOutInterval is the fan-out loop's sleep when the outbox had less than a full batch: part of
	// the delay between an event and its first attempt.
	DefaultFanOutInterval = 50 * time.Millisecond
	// DefaultFanOutBatch is how many events one fan-out transaction takes.
	DefaultFanOutBatch = 1000
	// DefaultClaimInterval is the dispatcher's sleep when fewer deliveries were due than it could take.
	DefaultClaimInterval = 50 * time.Millisecond
	// DefaultClaimBatch caps how many deliveries one claim leases.
	DefaultClaimBatch = 512
	// DefaultLease is how long a claimed delivery stays reserved for this dispatcher. It must cover queueing
	// behind the endpoint's other deliveries plus the attempt itself; see Config.Lease.
	DefaultLease = 60 * time.Second
	// DefaultInFlight is how many attempts run at once in one process.
	DefaultInFlight = 256
	// DefaultPerEndpoint is how many of those may go to one endpoint, so a slow receiver holds at most this
	// many slots and cannot starve the others.
	DefaultPerEndpoint = 16
	// DefaultFlushInterval is the longest an attempt result waits before it is recorded.
	DefaultFlushInterval = 50 * time.Millisecond
	// DefaultFlushBatch is how many attempt results one RecordAttempts call writes at most.
	DefaultFlushBatch = 256
	// DefaultAttemptTimeout bounds one request (connect, send, response headers and the drained body). A
	// receiver that takes longer has failed the attempt.
	DefaultAttemptTimeout = 10 * time.Second
)

// DefaultSchedule is SPEC §6's retry schedule: the wait before attempts 2, 3, 4 and 5, each counted from the
// previous attempt, without jitter. A permanently failing endpoint is given up about 3.75 hours after the
// first attempt.
var DefaultSchedule = []time.Duration{15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}

// maxBatchSize bounds the batch settings so one transaction never locks an unbounded set of rows.
const maxBatchSize = 10000

// Config tunes the webhook loops. Zero values mean the defaults, so Config{} is valid.
type Config struct {
	// FanOutInterval is the fan-out loop's sleep after a batch that was not full (default 50 ms).
	FanOutInterval time.Duration
	// FanOutBatch is the number of events fanned out per transaction (default 1000).
	FanOutBatch int
	// ClaimInterval is the dispatcher's sleep after a claim that found fewer deliveries due than it asked
	// for (default 50 ms).
	ClaimInterval time.Duration
	// ClaimBatch caps the deliveries leased per claim (default 512); a claim never asks for more than the
	// free in-flight slots.
	ClaimBatch int
	// Lease is how long claimed deliveries are reserved (default 60 s). A delivery may wait behind its
	// endpoint's other deliveries before its attempt starts, so the dispatcher keeps at most
	// PerEndpoint·(Lease/AttemptTimeout − 1) deliveries per endpoint: the last of them finishes at least one
	// AttemptTimeout before its lease ends, which leaves time to record the result. Validate therefore
	// requires Lease ≥ 2·AttemptTimeout.
	Lease time.Duration
	// InFlight bounds the attempts running at once (default 256).
	InFlight int
	// PerEndpoint bounds the attempts running at once against one endpoint (default 16).
	PerEndpoint int
	// FlushInterval is the longest an attempt result waits to be recorded (default 50 ms).
	FlushInterval time.Duration
	// FlushBatch is the most attempt results recorded per transaction (default 256).
	FlushBatch int
	// Schedule holds the waits before attempts 2 to ports.WebhookMaxAttempts (default DefaultSchedule).
	Schedule []time.Duration
	// AttemptTimeout bounds one request (default 10 s, SPEC §6's timeout).
	AttemptTimeout time.Duration
	// MaxEndpoints is how many endpoints an organization may hold (default DefaultMaxEndpoints).
	MaxEndpoints int
}

func (c Config) withDefaults() Config {
	if c.FanOutInterval == 0 {
		c.FanOutInterval = DefaultFanOutInterval
	}
	if c.FanOutBatch == 0 {
		c.FanOutBatch = DefaultFanOutBatch
	}
	if c.ClaimInterval == 0 {
		c.ClaimInterval = DefaultClaimInterval
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = DefaultClaimBatch
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.InFlight == 0 {
		c.InFlight = DefaultInFlight
	}
	if c.PerEndpoint == 0 {
		c.PerEndpoint = DefaultPerEndpoint
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.FlushBatch == 0 {
		c.FlushBatch = DefaultFlushBatch
	}
	if c.Schedule == nil {
		c.Schedule = DefaultSchedule
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.MaxEndpoints == 0 {
		c.MaxEndpoints = DefaultMaxEndpoints
	}
	return c
}

// Validate reports a configuration that would misbehave at run time, so the process refuses to start
// instead. It judges the configuration with its defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.FanOutInterval < 0 || c.ClaimInterval < 0 || c.FlushInterval < 0 {
		errs = append(errs, errors.New("fan-out, claim and flush intervals must be positive"))
	}
	for _, b := range []struct {
		name string
		n    int
	}{{"fan-out batch", c.FanOutBatch}, {"claim batch", c.ClaimBatch}, {"flush batch", c.FlushBatch}} {
		if b.n < 1 || b.n > maxBatchSize {
			errs = append(errs, fmt.Errorf("%s %d out of range 1-%d", b.name, b.n, maxBatchSize))
		}
	}
	if c.InFlight < 1 || c.PerEndpoint < 1 {
		errs = append(errs, errors.New("in-flight and per-endpoint limits must be at least 1"))
	}
	if c.PerEndpoint > c.InFlight {
		errs = append(errs, fmt.Errorf("per-endpoint limit %d exceeds the in-flight limit %d", c.PerEndpoint, c.InFlight))
	}
	if c.AttemptTimeout < 0 {
		errs = append(errs, errors.New("attempt timeout must be positive"))
	}
	if c.MaxEndpoints < 0 {
		errs = append(errs, errors.New("the bound on an organization's endpoints must be positive"))
	}
	if c.Lease < 2*c.AttemptTimeout {
		errs = append(errs, fmt.Errorf("lease %s must be at least twice the attempt timeout %s, or a result could arrive after another dispatcher took the delivery", c.Lease, c.AttemptTimeout))
	}
	if len(c.Schedule) != ports.WebhookMaxAttempts-1 {
		errs = append(errs, fmt.Errorf("schedule has %d waits; %d attempts need %d", len(c.Schedule), ports.WebhookMaxAttempts, ports.WebhookMaxAttempts-1))
	}
	for i, d := range c.Schedule {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("schedule wait %d (%s) must be positive", i+1, d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhook config: %w", err)
	}
	return nil
}

// backlog is how many claimed deliveries the dispatcher keeps per endpoint (running and waiting): enough
// rounds of PerEndpoint attempts to fill the lease but one, so the last result is recorded before the lease
// ends even when every attempt runs into its timeout.
func (c Config) backlog() int {
	return c.PerEndpoint * max(1, int(c.Lease/c.AttemptTimeout)-1)
}

// Deps are the Service's driven ports. Stream may be nil (the events table is then the only stream); Clock
// defaults to the wall clock and Logger to a discarding one; the rest are required.
type Deps struct {
	Store  ports.WebhookStore
	Sender ports.WebhookSender
	Stream ports.EventStream
	// Keyring seals and opens the endpoints' signing secrets (aad: the endpoint id).
	Keyring *secret.Keyring
	Clock   ports.Clock
	Logger  *slog.Logger
}

// Service is the webhook area's one use-case type: the endpoint API for the edge, and the two loops
// (RunFanOut, RunDispatcher) that turn outbox events into signed, retried requests. Test deliveries go
// through the same attempt code as the dispatcher's, so what a user tests is what the dispatcher sends.
type Service struct {
	cfg     Config
	store   ports.WebhookStore
	sender  ports.WebhookSender
	stream  ports.EventStream
	keyring *secret.Keyring
	clock   ports.Clock
	logger  *slog.Logger
	secrets secretCache
}

var _ ports.WebhookService = (*Service)(nil)

// New builds the Service.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if deps.Store == nil || deps.Sender == nil {
		return nil, errors.New("webhook: a store and a sender are required")
	}
	if deps.Keyring == nil {
		return nil, errors.New("webhook: a keyring is required")
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{
		cfg:     cfg,
		store:   deps.Store,
		sender:  deps.Sender,
		stream:  deps.Stream,
		keyring: deps.Keyring,
		clock:   deps.Clock,
		logger:  deps.Logger,
		secrets: secretCache{m: make(map[string]openedSecret)},
	}, nil
}

// now is the clock's time in UTC at PostgreSQL's microsecond resolution, so a row returned right after it
// was written equals the same row read back later.
func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// newID is id.New under the name this package's files use.
var newID = id.New
