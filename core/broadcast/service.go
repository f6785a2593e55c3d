// Package broadcast holds Postmill's broadcasts (SPEC §4.10): the use cases that create, edit, schedule,
// send and cancel a broadcast, the expander that turns a sending broadcast into one message per contact of
// its audience through the ordinary send path, and the public one-click unsubscribe (SPEC §4.11 /p/u).
//
// States (SPEC §3): a broadcast is created as draft; schedule moves a draft (or a scheduled one, to a new
// time) to scheduled; send moves a draft or scheduled broadcast to sending at once, and the expander moves a
// scheduled one to sending when its time comes; the expander ends it sent when the audience is done, or
// failed when its sender can no longer send (an unverified domain, a deleted template); cancel moves a
// scheduled broadcast to canceled. Only draft and scheduled broadcasts can be edited; a sending one cannot
// be deleted (409).
package broadcast

import (
	"context"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/core/template"
	"github.com/postmill/postmill/ports"
)

// Domains is what the service needs of the domain store: the From domain of a broadcast.
type Domains interface {
	DomainByName(ctx context.Context, orgID, name string) (ports.Domain, error)
}

// Deps are the ports the broadcast service uses.
type Deps struct {
	Store    ports.BroadcastStore
	Audience ports.AudienceStore
	Domains  Domains
	// Emails is the send path every broadcast message goes through (acceptance, suppression, metering).
	Emails   ports.EmailService
	Renderer ports.TemplateRenderer
	Keyring  *secret.Keyring
	Clock    ports.Clock
	Logger   *slog.Logger
	// Protection, when set, is automatic protection's state: an organization whose broadcasts it paused
	// sends none until an operator lifts the pause (core/reputation).
	Protection interface {
		Protection(ctx context.Context, orgID string) (ports.Protection, error)
	}
	// Backlog, when set, tells how long the delivery queue's oldest ready bulk job has waited: the expander
	// writes a page only while that is under Config.MaxBacklog (docs/decisions.md, "Broadcast pacing").
	Backlog ports.BulkBacklog
}

// Config tunes the service.
type Config struct {
	// BaseURL is the public address the List-Unsubscribe links point at (no trailing slash).
	BaseURL string
	// BatchSize is how many contacts the expander reads and records per checkpoint (default 500).
	BatchSize int
	// Concurrency is how many sends of a batch are in flight at once (default 32): enough to fill the send
	// path's group commit, few enough to leave room for transactional sends.
	Concurrency int
	// PollInterval is how often the expander looks for work (default 1s).
	PollInterval time.Duration
	// Lease is how long a claim gives this expander a sending broadcast before another process may take
	// it, and how far each recorded page extends it (default DefaultLease). It bounds how long a broadcast
	// waits after its expander's process died; it must stay well above the time one page takes.
	Lease time.Duration
	// MaxBacklog is how far ahead of the MTA the expander may be: it writes its next page only while the
	// oldest bulk job ready for delivery has waited less than this (default DefaultMaxBacklog). Used with
	// Deps.Backlog.
	MaxBacklog time.Duration
}

// DefaultMaxBacklog is Config.MaxBacklog's default: ten seconds of delivery work queued ahead of the MTA,
// whatever its rate, so that it never runs dry, while the expander's work spreads over the whole broadcast
// and automatic protection's pause, the warm-up cap and the plan allowance still hold back most of a
// broadcast that goes wrong.
const DefaultMaxBacklog = 10 * time.Second

// DefaultLease is Config.Lease's default: a page of 500 contacts takes well under a second, and a
// broadcast whose process died resumes within half a minute.
const DefaultLease = 30 * time.Second

// Service implements ports.BroadcastService and ports.PublicUnsubscribeService.
type Service struct {
	cfg  Config
	deps Deps
}

var (
	_ ports.BroadcastService         = (*Service)(nil)
	_ ports.PublicUnsubscribeService = (*Service)(nil)
)

// New checks deps and applies the defaults of cfg.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.Store == nil || deps.Audience == nil || deps.Domains == nil || deps.Emails == nil || deps.Keyring == nil {
		return nil, fmt.Errorf("broadcast: store, audience, domains, emails and keyring are required")
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.MaxBacklog <= 0 {
		cfg.MaxBacklog = DefaultMaxBacklog
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Service{cfg: cfg, deps: deps}, nil
}

func (s *Service) now() time.Time { return s.deps.Clock.Now().UTC().Truncate(time.Microsecond) }

const msgNotFound = "broadcast not found"

func validID(v string) bool {
	_, err := uuid.Parse(v)
	return err == nil
}

// CreateBroadcast implements ports.BroadcastService.
func (s *Service) CreateBroadcast(ctx context.Context, orgID string, nb ports.NewBroadcast) (ports.Broadcast, error) {
	now := s.now()
	b := ports.Broadcast{
		ID: id.New(), OrganizationID: orgID, Name: nb.Name, Subject: nb.Subject, From: strings.TrimSpace(nb.From),
		ReplyTo: strings.TrimSpace(nb.ReplyTo), HTML: nb.HTML, Text: nb.Text, TemplateID: nb.TemplateID,
		SegmentID: nb.SegmentID, TopicID: nb.TopicID, ScheduledAt: utcPtr(nb.ScheduledAt),
		Status: ports.BroadcastDraft, CreatedAt: now, UpdatedAt: now,
	}
	if err := s.check(ctx, b, false); err != nil {
		return ports.Broadcast{}, err
	}
	if err := s.deps.Store.InsertBroadcast(ctx, b); err != nil {
		return ports.Broadcast{}, fmt.Errorf("broadcast: insert: %w", err)
	}
	return b, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}

// check validates a broadcast's fields (SPEC §2, §4.10) and its references in the organization: the From
// domain verified, the template, segment or topic the organization's. needAudience is set when it is about
// to be sent or scheduled.
func (s *Service) check(ctx context.Context, b ports.Broadcast, needAudience bool) error {
	var v []ports.FieldViolation
	add := func(path, msg string) { v = append(v, ports.FieldViolation{Path: path, Message: msg}) }
	if n := utf8.RuneCountInString(b.Name); n < 1 || n > ports.MaxBroadcastNameChars {
		add("name", fmt.Sprintf("must be 1 to %d characters", ports.MaxBroadcastNameChars))
	}
	if n := utf8.RuneCountInString(b.Subject); n < 1 || n > ports.MaxBroadcastSubjectChars {
		add("subject", fmt.Sprintf("must be 1 to %d characters", ports.MaxBroadcastSubjectChars))
	} else if strings.ContainsAny(b.Subject, "\r\n") {
		add("subject", "must not contain CR or LF")
	}
	fromDomain := ""
	if a, err := mail.ParseAddress(b.From); err != nil || strings.ContainsAny(b.From, "\r\n") {
		add("from", "must be an email address")
	} else {
		fromDomain = strings.ToLower(a.Address[strings.LastIndexByte(a.Address, '@')+1:])
	}
	if b.ReplyTo != "" {
		if _, err := mail.ParseAddress(b.ReplyTo); err != nil || strings.ContainsAny(b.ReplyTo, "\r\n") {
			add("replyTo", "must be an email address")
		}
	}
	hasBody := b.HTML != "" || b.Text != ""
	switch {
	case !hasBody && b.TemplateID == "":
		add("", "one of html, text or templateId is required")
	case hasBody && b.TemplateID != "":
		add("", "give either html and text, or templateId")
	}
	if b.TemplateID != "" && !validID(b.TemplateID) {
		add("templateId", "must be a UUID")
	}
	if b.SegmentID != "" && b.TopicID != "" {
		add("", "give segmentId or topicId, not both")
	}
	if b.SegmentID != "" && !validID(b.SegmentID) {
		add("segmentId", "must be a UUID")
	}
	if b.TopicID != "" && !validID(b.TopicID) {
		add("topicId", "must be a UUID")
	}
	if needAudience && b.SegmentID == "" && b.TopicID == "" {
		add("", "a segmentId or a topicId is required to send")
	}
	if hasBody && b.Subject != "" {
		if _, err := template.CompileVersion(ports.TemplateVersion{Subject: b.Subject, HTML: b.HTML, Text: b.Text}); err != nil {
			if e, ok := ports.AsError(err); ok {
				v = append(v, e.Details...)
			}
		}
	}
	if len(v) > 0 {
		return ports.ValidationError(v...)
	}
	d, err := s.deps.Domains.DomainByName(ctx, b.OrganizationID, fromDomain)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return ports.Errorf(ports.CodeInvalidArgument, "domain %s not found for this org", fromDomain)
	}
	if err != nil {
		return fmt.Errorf("broadcast: domain: %w", err)
	}
	if d.Status != ports.DomainVerified {
		return ports.Errorf(ports.CodeInvalidArgument, "domain %s is not verified", fromDomain)
	}
	if b.SegmentID != "" || b.TopicID != "" {
		_, err := s.deps.Audience.PageAudience(ctx, b.OrganizationID, ports.Audience{SegmentID: b.SegmentID, TopicID: b.TopicID}, "", 1)
		if ports.ErrorCode(err) == ports.CodeNotFound {
			if b.SegmentID != "" {
				return ports.MissingReference("broadcasts_segment_id_fkey")
			}
			return ports.MissingReference("broadcasts_topic_id_fkey")
		}
		if err != nil {
			return fmt.Errorf("broadcast: audience: %w", err)
		}
	}
	if b.TemplateID != "" && s.deps.Renderer != nil {
		if _, err := s.deps.Renderer.RenderTemplate(ctx, b.OrganizationID, b.TemplateID, nil); err != nil {
			return err
		}
	}
	return nil
}

// ListBroadcasts implements ports.BroadcastService: one page (limit 1-100, default 25; offset from 0),
// newest first.
func (s *Service) ListBroadcasts(ctx context.Context, orgID string, limit, offset int) ([]ports.Broadcast, error) {
	limit, err := ports.CheckOffsetPage(limit, offset)
	if err != nil {
		return nil, err
	}
	out, err := s.deps.Store.ListBroadcasts(ctx, orgID, limit, offset)
	if err != nil {
		return nil, fmt.Errorf("broadcast: list: %w", err)
	}
	return out, nil
}

// GetBroadcast implements ports.BroadcastService.
func (s *Service) GetBroadcast(ctx context.Context, orgID, bid string) (ports.Broadcast, error) {
	if !validID(bid) {
		return ports.Broadcast{}, ports.NotFound(msgNotFound)
	}
	return s.deps.Store.GetBroadcast(ctx, orgID, bid)
}

// UpdateBroadcast implements ports.BroadcastService: only a draft or scheduled broadcast changes.
func (s *Service) UpdateBroadcast(ctx context.Context, orgID, bid string, p ports.BroadcastPatch) (ports.Broadcast, error) {
	b, err := s.GetBroadcast(ctx, orgID, bid)
	if err != nil {
		return ports.Broadcast{}, err
	}
	if b.Status != ports.BroadcastDraft && b.Status != ports.BroadcastScheduled {
		return ports.Broadcast{}, ports.Errorf(ports.CodeFailedPrecondition, "only a draft or scheduled broadcast can be changed")
	}
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&b.Name, p.Name)
	set(&b.Subject, p.Subject)
	set(&b.From, p.From)
	set(&b.ReplyTo, p.ReplyTo)
	set(&b.HTML, p.HTML)
	set(&b.Text, p.Text)
	set(&b.TemplateID, p.TemplateID)
	set(&b.SegmentID, p.SegmentID)
	set(&b.TopicID, p.TopicID)
	if p.ClearSegment {
		b.SegmentID = ""
	}
	if p.ClearTopic {
		b.TopicID = ""
	}
	if p.ScheduledAt != nil {
		// A scheduled broadcast moved to a time already past would start at once: that is POST …/send,
		// and …/schedule refuses it too.
		if b.Status == ports.BroadcastScheduled && !p.ScheduledAt.After(s.now()) {
			return ports.Broadcast{}, ports.ValidationError(ports.FieldViolation{Path: "scheduledAt", Message: "must be in the future"})
		}
		b.ScheduledAt = utcPtr(p.ScheduledAt)
	}
	if p.ClearScheduledAt {
		b.ScheduledAt = nil
		if b.Status == ports.BroadcastScheduled {
			b.Status = ports.BroadcastDraft // nothing left to wait for
		}
	}
	b.From, b.ReplyTo = strings.TrimSpace(b.From), strings.TrimSpace(b.ReplyTo)
	if err := s.check(ctx, b, b.Status == ports.BroadcastScheduled); err != nil {
		return ports.Broadcast{}, err
	}
	b.UpdatedAt = s.now()
	return s.deps.Store.UpdateBroadcast(ctx, b, ports.BroadcastDraft, ports.BroadcastScheduled)
}

// DeleteBroadcast implements ports.BroadcastService.
func (s *Service) DeleteBroadcast(ctx context.Context, orgID, bid string) error {
	if !validID(bid) {
		return ports.NotFound(msgNotFound)
	}
	return s.deps.Store.DeleteBroadcast(ctx, orgID, bid)
}

// SendBroadcast implements ports.BroadcastService: the broadcast becomes sending and the expander picks it
// up within its poll interval; the audience is resolved then, page by page.
func (s *Service) SendBroadcast(ctx context.Context, orgID, bid string) (ports.Broadcast, error) {
	b, err := s.startable(ctx, orgID, bid)
	if err != nil {
		return ports.Broadcast{}, err
	}
	now := s.now()
	b.Status, b.StartedAt, b.UpdatedAt = ports.BroadcastSending, &now, now
	return s.deps.Store.UpdateBroadcast(ctx, b, ports.BroadcastDraft, ports.BroadcastScheduled)
}

// ScheduleBroadcast implements ports.BroadcastService.
func (s *Service) ScheduleBroadcast(ctx context.Context, orgID, bid string, at time.Time) (ports.Broadcast, error) {
	b, err := s.startable(ctx, orgID, bid)
	if err != nil {
		return ports.Broadcast{}, err
	}
	now := s.now()
	if at.IsZero() || !at.After(now) {
		return ports.Broadcast{}, ports.ValidationError(ports.FieldViolation{Path: "scheduledAt", Message: "must be in the future"})
	}
	b.Status, b.ScheduledAt, b.UpdatedAt = ports.BroadcastScheduled, utcPtr(&at), now
	return s.deps.Store.UpdateBroadcast(ctx, b, ports.BroadcastDraft, ports.BroadcastScheduled)
}

// startable reads a draft or scheduled broadcast and checks it can be sent now.
func (s *Service) startable(ctx context.Context, orgID, bid string) (ports.Broadcast, error) {
	b, err := s.GetBroadcast(ctx, orgID, bid)
	if err != nil {
		return ports.Broadcast{}, err
	}
	if b.Status != ports.BroadcastDraft && b.Status != ports.BroadcastScheduled {
		return ports.Broadcast{}, ports.Errorf(ports.CodeFailedPrecondition, "broadcast is %s: only a draft or scheduled broadcast can be sent", b.Status)
	}
	if err := s.check(ctx, b, true); err != nil {
		return ports.Broadcast{}, err
	}
	return b, nil
}

// CancelBroadcast implements ports.BroadcastService.
func (s *Service) CancelBroadcast(ctx context.Context, orgID, bid string) (ports.Broadcast, error) {
	b, err := s.GetBroadcast(ctx, orgID, bid)
	if err != nil {
		return ports.Broadcast{}, err
	}
	if b.Status != ports.BroadcastScheduled {
		return ports.Broadcast{}, ports.Errorf(ports.CodeFailedPrecondition, "only a scheduled broadcast can be canceled")
	}
	now := s.now()
	b.Status, b.CompletedAt, b.UpdatedAt = ports.BroadcastCanceled, &now, now
	return s.deps.Store.UpdateBroadcast(ctx, b, ports.BroadcastScheduled)
}

// BroadcastStats implements ports.BroadcastService.
func (s *Service) BroadcastStats(ctx context.Context, orgID, bid string) (ports.BroadcastStats, error) {
	if !validID(bid) {
		return ports.BroadcastStats{}, ports.NotFound(msgNotFound)
	}
	return s.deps.Store.BroadcastStats(ctx, orgID, bid)
}

// BroadcastRecipients implements ports.BroadcastService.
func (s *Service) BroadcastRecipients(ctx context.Context, orgID, bid string, limit, offset int) ([]ports.BroadcastRecipient, int64, error) {
	if limit == 0 {
		limit = ports.DefaultRecipientsLimit
	}
	var v []ports.FieldViolation
	if limit < 1 || limit > ports.MaxRecipientsLimit {
		v = append(v, ports.FieldViolation{Path: "limit", Message: fmt.Sprintf("must be between 1 and %d", ports.MaxRecipientsLimit)})
	}
	if offset < 0 {
		v = append(v, ports.FieldViolation{Path: "offset", Message: "must be 0 or more"})
	}
	if len(v) > 0 {
		return nil, 0, ports.ValidationError(v...)
	}
	if !validID(bid) {
		return nil, 0, ports.NotFound(msgNotFound)
	}
	return s.deps.Store.BroadcastRecipients(ctx, orgID, bid, limit, offset)
}
