package broadcast

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/postmill/postmill/core/marketing"
	"github.com/postmill/postmill/core/template"
	"github.com/postmill/postmill/ports"
)

// The expander turns a sending broadcast into messages (docs/marketing.md, Broadcasts).
//
// It pages through the audience by contact id (ports.AudienceStore.PageAudience: subscribed, not bounced
// contacts, for a topic its subscribed subscriptions), starting after the broadcast's cursor. For each
// contact it renders the content — compiled once per broadcast, interpolated per contact with the variables
// of contactVars — and hands the page's emails to the ordinary send path's bulk entry (SendBulk of
// core/sending, when ports.EmailService has it; else Send, Concurrency at a time), which checks the
// sending domain and the organization once, suppressions (on top of consent, SPEC §4.10) with one query for
// the page, meters the plan allowance and the warm-up cap in page order, and writes the page's messages,
// recipients, events and delivery jobs (in the queue's bulk lane, behind transactional mail) in one
// transaction. Each message carries its own List-Unsubscribe link (a sealed token of purpose
// "unsubscribe") and List-Unsubscribe-Post (RFC 8058), both signed by DKIM.
//
// One expander per broadcast: every core process runs an expander, and a claim (ClaimBroadcasts) gives a
// sending broadcast to one of them with a lease of cfg.Lease and a token unique to the claim. The expander
// renews the lease with each recorded page and ends it when it stops; no other process works the
// broadcast meanwhile. A process that dies keeps its lease until it runs out, then another claims the
// broadcast and resumes from the cursor.
//
// Exactly once: every message's idempotency key is "broadcast:<broadcast id>:<contact id>", so a send the
// expander repeats after a crash answers with the message already written instead of writing a second one.
// After a batch, the recipients (contact, message) and the new cursor are written in one transaction
// (RecordBatch), which moves the cursor only from the value this expander read and only while its claim's
// token is the stored one; an expander that lost its lease records nothing and stops. A restarted expander
// resumes after the last recorded contact and at worst repeats the sends of one batch, which the
// idempotency keys absorb.
//
// Limits: a send refused for the plan allowance (402) pauses the broadcast until the first day of the next
// month; one refused for the warm-up cap (429) until the next UTC day; a paused organization (403) for a
// quarter of an hour. The contacts before the refused one are recorded and the broadcast resumes after them.
// An unverified or removed From domain, or a template that no longer renders, fails the broadcast.

// Pauses applied when the organization may not send now.
const pauseOrgSuspended = 15 * time.Minute

// RunExpander runs the expander until ctx ends.
func (s *Service) RunExpander(ctx context.Context) error {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		if err := s.ExpandOnce(ctx); err != nil && ctx.Err() == nil {
			s.deps.Logger.Error("broadcast expander", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ExpandOnce claims sending broadcasts one at a time and works each until it is done, paused, no longer
// this expander's, or ctx ends; it returns when there is nothing left to claim. A claim gives the broadcast
// to this expander alone for cfg.Lease (ClaimBroadcasts); each recorded page extends the lease, and the
// lease ends when the expander stops working the broadcast, whatever the reason, so that the next claim,
// here or in another process, may take it at once. A broadcast that failed (a transient error) is claimed
// again behind the others, and at most once per call: the next poll retries it.
func (s *Service) ExpandOnce(ctx context.Context) error {
	var errs []error
	worked := map[string]bool{}
	for ctx.Err() == nil {
		list, err := s.deps.Store.ClaimBroadcasts(ctx, s.now(), 1, s.cfg.Lease)
		if err != nil {
			errs = append(errs, fmt.Errorf("broadcast: claim: %w", err))
			break
		}
		if len(list) == 0 {
			break
		}
		b := list[0]
		if worked[b.ID] {
			// Every other broadcast available was worked or is another expander's: this one waits for the
			// next poll.
			s.release(ctx, b)
			break
		}
		worked[b.ID] = true
		if err := s.expand(ctx, b); err != nil {
			errs = append(errs, fmt.Errorf("broadcast %s: %w", b.ID, err))
		}
		s.release(ctx, b)
	}
	return errors.Join(errs...)
}

// release ends this expander's lease on b (nothing when it already ended: the broadcast finished or
// paused, or another expander took it). It runs when ctx has ended too, so that a process shutting down
// hands its broadcast over at once rather than when the lease runs out.
func (s *Service) release(ctx context.Context, b ports.Broadcast) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.deps.Store.ReleaseBroadcast(ctx, b); err != nil {
		s.deps.Logger.Warn("broadcast expander: release", "broadcast", b.ID, "organization", b.OrganizationID, "error", err)
	}
}

// content renders one contact's subject and bodies.
type content func(ctx context.Context, vars map[string]any) (ports.RenderedTemplate, error)

func (s *Service) content(b ports.Broadcast) (content, error) {
	if b.TemplateID != "" {
		return func(ctx context.Context, vars map[string]any) (ports.RenderedTemplate, error) {
			r, err := s.deps.Renderer.RenderTemplate(ctx, b.OrganizationID, b.TemplateID, vars)
			if err != nil {
				return r, err
			}
			if r.Subject == "" {
				r.Subject = b.Subject
			}
			return r, nil
		}, nil
	}
	cv, err := template.CompileVersion(ports.TemplateVersion{Subject: b.Subject, HTML: b.HTML, Text: b.Text})
	if err != nil {
		return nil, err
	}
	return func(_ context.Context, vars map[string]any) (ports.RenderedTemplate, error) {
		return cv.Render(vars), nil
	}, nil
}

// contactVars are the variables a broadcast's content is interpolated with: {{ contact.email }},
// {{ contact.firstName }}, {{ contact.lastName }}, {{ contact.locale }}, {{ contact.timezone }} and
// {{ contact.properties.<key> }}, and the contact's own links: {{ unsubscribeUrl }} (the page of the
// List-Unsubscribe header) and {{ preferencesUrl }} (the preference page, every topic at once).
func contactVars(c ports.AudienceContact, unsubscribeURL, preferencesURL string) map[string]any {
	props := c.Properties
	if props == nil {
		props = map[string]any{}
	}
	return map[string]any{"contact": map[string]any{
		"email": c.Email, "firstName": c.FirstName, "lastName": c.LastName, "locale": c.Locale,
		"timezone": c.Timezone, "properties": props,
	}, "unsubscribeUrl": unsubscribeURL, "preferencesUrl": preferencesURL}
}

// sendOutcome is what the send path did with one contact.
type sendOutcome struct {
	messageID string
	status    string
	err       error // a refusal that stops the batch here (limits, paused organization, broken sender)
}

func (s *Service) expand(ctx context.Context, b ports.Broadcast) error {
	render, err := s.content(b)
	if err != nil {
		return s.deps.Store.FinishBroadcast(ctx, b.OrganizationID, b.ID, ports.BroadcastFailed, "content does not compile", nil, s.now())
	}
	audience := ports.Audience{SegmentID: b.SegmentID, TopicID: b.TopicID}
	if audience.SegmentID == "" && audience.TopicID == "" {
		return s.deps.Store.FinishBroadcast(ctx, b.OrganizationID, b.ID, ports.BroadcastFailed, "the audience was deleted", nil, s.now())
	}
	for ctx.Err() == nil {
		if s.deps.Protection != nil {
			if p, err := s.deps.Protection.Protection(ctx, b.OrganizationID); err != nil {
				return fmt.Errorf("protection: %w", err)
			} else if p.BroadcastsPaused {
				return s.stopped(ctx, b, ports.Errorf(ports.CodePermissionDenied, "broadcasts paused by automatic protection: %s", p.Reason))
			}
		}
		if err := s.pace(ctx); err != nil {
			return err
		}
		page, err := s.deps.Audience.PageAudience(ctx, b.OrganizationID, audience, b.Cursor, s.cfg.BatchSize)
		if ports.ErrorCode(err) == ports.CodeNotFound {
			return s.deps.Store.FinishBroadcast(ctx, b.OrganizationID, b.ID, ports.BroadcastFailed, "the audience was deleted", nil, s.now())
		}
		if err != nil {
			return fmt.Errorf("audience: %w", err)
		}
		if len(page) == 0 {
			return s.deps.Store.FinishBroadcast(ctx, b.OrganizationID, b.ID, ports.BroadcastSent, "", nil, s.now())
		}
		outcomes := s.sendBatch(ctx, b, render, page)
		now := s.now()
		var recorded []ports.BroadcastRecipient
		cursor := b.Cursor
		var stop error
		for i, o := range outcomes {
			if o.err != nil {
				stop = o.err
				break
			}
			recorded = append(recorded, ports.BroadcastRecipient{
				ContactID: page[i].ID, Email: page[i].Email, MessageID: o.messageID, Status: o.status, CreatedAt: now,
			})
			cursor = page[i].ID
		}
		if cursor != b.Cursor {
			moved, err := s.deps.Store.RecordBatch(ctx, b, cursor, recorded, s.cfg.Lease)
			if err != nil {
				return fmt.Errorf("record batch: %w", err)
			}
			if !moved {
				// The broadcast is no longer this expander's to work: it finished or paused meanwhile, or this
				// expander's lease ran out and another claim took it (the stored token is not b's). Nothing
				// of this page was recorded; whoever holds the broadcast now goes on from the stored cursor,
				// and the page's messages already written are answered by their idempotency keys.
				s.deps.Logger.Info("broadcast expander stopped: the broadcast is no longer this expander's",
					"broadcast", b.ID, "organization", b.OrganizationID)
				return nil
			}
			b.Cursor = cursor
		}
		if stop != nil {
			return s.stopped(ctx, b, stop)
		}
	}
	return nil
}

// Pacing: how often the expander looks at the backlog while it waits, and the longest it waits for one page.
const (
	paceInterval = 250 * time.Millisecond
	paceMaxWait  = 10 * time.Second
)

// pace waits while the oldest bulk job ready for delivery has waited MaxBacklog or more, so that the
// expander stays that far ahead of the MTA rather than writing the whole audience in the broadcast's first
// seconds. It waits at most paceMaxWait (and a third of the lease, which the next recorded page renews): a
// queue that does not drain (no MTA running) slows the expander down without stopping it. An error reading
// the backlog is logged and does not hold the broadcast.
func (s *Service) pace(ctx context.Context) error {
	if s.deps.Backlog == nil {
		return nil
	}
	deadline := time.Now().Add(min(paceMaxWait, s.cfg.Lease/3))
	for {
		wait, err := s.deps.Backlog.BulkWait(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.deps.Logger.Warn("broadcast expander: reading the delivery backlog", "error", err)
			return nil
		}
		if wait < s.cfg.MaxBacklog || !time.Now().Before(deadline) {
			return nil
		}
		t := time.NewTimer(paceInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// bulkSender is the send path's bulk entry (sending.Service.SendBulk): a page of emails accepted by the
// rules of Send with one look-up of each kind and one transaction, results aligned with the requests.
type bulkSender interface {
	SendBulk(ctx context.Context, orgID string, reqs []ports.SendRequest) ([]ports.BatchItemResult, error)
}

// sendBatch sends to every contact of page and returns the outcomes in page order: through the bulk entry
// when the send path has one, else Send by Send, Concurrency at a time. After the first refusal that stops
// the broadcast, the remaining sends are not attempted (or their outcomes are not used).
func (s *Service) sendBatch(ctx context.Context, b ports.Broadcast, render content, page []ports.AudienceContact) []sendOutcome {
	if bs, ok := s.deps.Emails.(bulkSender); ok {
		return s.sendBulk(ctx, bs, b, render, page)
	}
	out := make([]sendOutcome, len(page))
	var (
		wg      sync.WaitGroup
		stopped sync.Once
		halt    = make(chan struct{})
		sem     = make(chan struct{}, s.cfg.Concurrency)
	)
	for i, c := range page {
		select {
		case <-halt:
			out[i] = sendOutcome{err: errHalted}
			continue
		case <-ctx.Done():
			out[i] = sendOutcome{err: ctx.Err()}
			continue
		case sem <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = s.sendOne(ctx, b, render, c)
			if out[i].err != nil {
				stopped.Do(func() { close(halt) })
			}
		}()
	}
	wg.Wait()
	return out
}

var errHalted = errors.New("broadcast: batch halted")

// sendBulk renders the page's emails and hands them to the bulk entry in one call. A contact whose
// content does not render stops the page there: the emails before it are sent, it and the rest are not.
func (s *Service) sendBulk(ctx context.Context, bs bulkSender, b ports.Broadcast, render content, page []ports.AudienceContact) []sendOutcome {
	out := make([]sendOutcome, len(page))
	reqs := make([]ports.SendRequest, 0, len(page))
	for i, c := range page {
		req, err := s.request(ctx, b, render, c)
		if err != nil {
			out[i] = sendOutcome{err: err}
			for j := i + 1; j < len(page); j++ {
				out[j] = sendOutcome{err: errHalted}
			}
			break
		}
		reqs = append(reqs, req)
	}
	if len(reqs) == 0 {
		return out
	}
	results, err := bs.SendBulk(ctx, b.OrganizationID, reqs)
	if err == nil && len(results) != len(reqs) {
		err = fmt.Errorf("the send path answered %d of %d emails", len(results), len(reqs))
	}
	for i := range reqs {
		if err != nil {
			out[i] = sendOutcome{err: err}
			continue
		}
		out[i] = outcome(results[i].Result, results[i].Err)
	}
	return out
}

// request is the email of one contact: its rendered content, its own unsubscribe link and the idempotency
// key that makes a repeated send answer with the message already written.
func (s *Service) request(ctx context.Context, b ports.Broadcast, render content, c ports.AudienceContact) (ports.SendRequest, error) {
	token, err := marketing.SealPublicToken(s.deps.Keyring, marketing.PurposeUnsubscribe, marketing.PublicToken{
		OrganizationID: b.OrganizationID, ContactID: c.ID, TopicID: b.TopicID, BroadcastID: b.ID, IssuedAt: s.now(),
	})
	if err != nil {
		return ports.SendRequest{}, err
	}
	prefs, err := s.preferencesToken(b.OrganizationID, c.ID)
	if err != nil {
		return ports.SendRequest{}, err
	}
	unsubscribeURL := s.cfg.BaseURL + "/p/u/" + token
	r, err := render(ctx, contactVars(c, unsubscribeURL, s.cfg.BaseURL+"/p/prefs/"+prefs))
	if err != nil {
		return ports.SendRequest{}, fmt.Errorf("render: %w", err)
	}
	return ports.SendRequest{
		From: b.From, To: []string{c.Email}, Subject: r.Subject, HTML: r.HTML, Text: r.Text, ReplyTo: b.ReplyTo,
		Headers: map[string]string{
			"List-Unsubscribe":      "<" + unsubscribeURL + ">",
			"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
		},
		IdempotencyKey: "broadcast:" + b.ID + ":" + c.ID,
	}, nil
}

func (s *Service) sendOne(ctx context.Context, b ports.Broadcast, render content, c ports.AudienceContact) sendOutcome {
	req, err := s.request(ctx, b, render, c)
	if err != nil {
		return sendOutcome{err: err}
	}
	res, err := s.deps.Emails.Send(ctx, b.OrganizationID, req)
	return outcome(res, err)
}

// outcome reads what the send path answered for one contact: sent (or replayed), skipped because the
// address is suppressed or cannot be sent to, or a refusal that stops the broadcast.
func outcome(res ports.SendResult, err error) sendOutcome {
	if err == nil {
		return sendOutcome{messageID: res.ID, status: string(res.Status)}
	}
	switch {
	case ports.IsRecipientSuppressed(err):
		return sendOutcome{status: ports.BroadcastRecipientSuppressed}
	case ports.ErrorCode(err) == ports.CodeInvalidArgument && hasDetails(err):
		// This contact's address cannot be sent to (the send path's validation); skip it, keep going.
		return sendOutcome{status: string(ports.StatusFailed)}
	}
	return sendOutcome{err: err}
}

// stopped pauses or fails a broadcast after a refusal that stopped a batch.
func (s *Service) stopped(ctx context.Context, b ports.Broadcast, err error) error {
	if ctx.Err() != nil || errors.Is(err, errHalted) {
		return nil
	}
	now := s.now()
	var until time.Time
	switch ports.ErrorCode(err) {
	case ports.CodePaymentRequired:
		until = time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	case ports.CodeResourceExhausted:
		until = time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	case ports.CodePermissionDenied:
		until = now.Add(pauseOrgSuspended)
	case ports.CodeInvalidArgument, ports.CodeNotFound:
		s.deps.Logger.Warn("broadcast failed", "broadcast", b.ID, "organization", b.OrganizationID, "reason", ports.ErrorMessage(err))
		return s.deps.Store.FinishBroadcast(ctx, b.OrganizationID, b.ID, ports.BroadcastFailed, ports.ErrorMessage(err), nil, now)
	default:
		return err // a transient failure: the next poll tries again from the cursor
	}
	s.deps.Logger.Info("broadcast paused", "broadcast", b.ID, "organization", b.OrganizationID, "until", until, "reason", ports.ErrorMessage(err))
	return s.deps.Store.FinishBroadcast(ctx, b.OrganizationID, b.ID, ports.BroadcastSending, ports.ErrorMessage(err), &until, now)
}

// hasDetails reports whether err is a validation error with field details: a problem of this one send.
func hasDetails(err error) bool {
	e, ok := ports.AsError(err)
	return ok && len(e.Details) > 0
}
