// Package deliverability holds the deliverability use cases of SPEC §4.5: suppressions, and the bounces and
// complaints that come back to Postmill after it sent mail. It implements ports.DeliverabilityService for the
// edge and ports.FeedbackService for the inbound tier on top of ports.DeliverabilityStore, and knows nothing
// of HTTP, SMTP, MIME or SQL: the inbound tier parses delivery status notifications (RFC 3464) and feedback
// reports (RFC 5965) into ports.BounceReport and ports.ComplaintReport, and this package decides what they
// mean.
//
// # Suppression scopes
//
// A suppression blocks sends to an address (local@domain) or to a whole recipient domain (a bare domain,
// no "@"). The send path refuses a recipient when a suppression of the sending organization, in any scope,
// or a global one names the address itself or its domain. The scopes say who owns the row and what it may
// name:
//
//   - global: platform-wide. It blocks the address or domain for every organization. Only platform admins
//     manage global suppressions (the admin routes: ListGlobalSuppressions, CreateGlobalSuppression,
//     DeleteGlobalSuppression); a tenant asking for scope global is refused with permission_denied.
//   - tenant (the default): every send of the organization, to an address or to a domain. Hard bounces of
//     an address that will never work (bounceclass.Suppresses) and complaints add tenant suppressions of the
//     recipient's address.
//   - domain: a whole recipient domain of the organization; the address must be a bare domain.
//   - recipient: one address of the organization; the address must contain "@".
//
// Tenant, domain and recipient rows all belong to one organization and block only its sends; domain and
// recipient say what kind of name the row holds, so that a list of suppressions reads unambiguously.
//
// # Bounces and complaints
//
// Mail leaves with a VERP return path (core/sending.EncodeVERP) whose MAC proves that Postmill made it and
// whose token names the recipient (a job with one recipient) or the message (one SMTP transaction with
// several). A bounce arrives at that address, usually long after the receiving server answered 250:
// RecordBounce maps it to recipients, classifies each as hard or soft (RFC 3463 §2 status classes) and by
// what it means (bounceclass: bad_mailbox, spam_block, ...), and for a hard bounce sets the recipient
// bounced, emits email.bounced and, when the class says the address will never work, suppresses it. A feedback
// report arrives at the VERP address or at the feedback-loop mailbox (Config.FeedbackAddress) with the VERP
// address in its Original-Mail-From; RecordComplaint records it, sets the recipient complained, emits
// email.complained and suppresses the address.
//
// What a report changes is decided by pure functions (decideBounce, decideComplaint) over the message's
// recipients as the store read them under the message's lock, so a report delivered twice, or two reports
// racing, change a recipient once.
package deliverability

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/core/sending"
	"github.com/postmill/postmill/ports"
)

// Config configures the feedback side of the Service. Config{} is valid: no feedback-loop mailbox, only
// VERP return paths are accepted.
type Config struct {
	// FeedbackAddress is the feedback-loop mailbox (for example fbl@bounces.postmill.local) that mailbox
	// providers send complaint reports to when they do not send them to the return path. The MX listener
	// accepts it besides VERP addresses. Empty means none.
	FeedbackAddress string
}

func (c Config) withDefaults() Config {
	c.FeedbackAddress = strings.ToLower(strings.TrimSpace(c.FeedbackAddress))
	return c
}

// Validate reports a feedback address that could never be an SMTP recipient, so the process refuses to start
// instead of silently accepting no reports.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.FeedbackAddress == "" {
		return nil
	}
	if msg := checkAddress(c.FeedbackAddress); msg != "" {
		return fmt.Errorf("deliverability config: feedback address %q %s", c.FeedbackAddress, msg)
	}
	return nil
}

// Deps are the Service's driven ports. Clock defaults to the wall clock and Logger to a discarding one;
// Store and Keyring are required.
type Deps struct {
	Store ports.DeliverabilityStore
	// Keyring provides the VERP keys (Keyring.DeriveAll(sending.VERPKeyPurpose)): the primary's is the one
	// the delivery path signs return paths with, the older masters' check mail sent before a rotation.
	Keyring *secret.Keyring
	Clock   ports.Clock
	Logger  *slog.Logger
}

// Service is the deliverability area's one use-case type: the suppression, bounce and complaint API for the
// edge, and the feedback entry points for the inbound tier.
type Service struct {
	cfg      Config
	store    ports.DeliverabilityStore
	verpKeys [][]byte
	clock    ports.Clock
	logger   *slog.Logger
}

var (
	_ ports.DeliverabilityService = (*Service)(nil)
	_ ports.FeedbackService       = (*Service)(nil)
)

// New builds the Service.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if deps.Store == nil {
		return nil, errors.New("deliverability: a store is required")
	}
	if deps.Keyring == nil {
		return nil, errors.New("deliverability: a keyring is required")
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{
		cfg:      cfg,
		store:    deps.Store,
		verpKeys: deps.Keyring.DeriveAll(sending.VERPKeyPurpose),
		clock:    deps.Clock,
		logger:   deps.Logger,
	}, nil
}

// now is the clock's time in UTC at PostgreSQL's microsecond resolution, so a row returned right after it
// was written equals the same row read back later.
func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// newID is id.New under the name this package's files use.
var newID = id.New

// errNoOrganization guards the tenant methods: an empty organization id means "global" to the store, and a
// tenant route must never reach global rows, whatever bug upstream produced the empty id.
var errNoOrganization = errors.New("deliverability: organization id is required")

// idSeq numbers the rows one report writes. The store may call a decide function more than once (a retried
// transaction) and decide must then return the same rows, ids included; so one UUIDv7 is drawn per report
// before the store is called, and decide derives its ids from it by adding 0, 1, 2, ... to the low 32 bits.
// The results are still UUIDv7 (RFC 9562 §5.7: version and variant bits and the timestamp are untouched, only
// random bits change), distinct within the report, and as unlikely to collide with another report's ids as
// two random 62-bit tails are.
type idSeq struct {
	base uuid.UUID
	n    uint32
}

func newIDSeq() idSeq { return idSeq{base: id.NewUUID()} }

func (s *idSeq) next() string {
	u := s.base
	binary.BigEndian.PutUint32(u[12:], binary.BigEndian.Uint32(u[12:])+s.n)
	s.n++
	return u.String()
}
