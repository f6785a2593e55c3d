package sending

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/postmill/postmill/core/deliverability/bounceclass"
	dkimdomain "github.com/postmill/postmill/core/domain"
	"github.com/postmill/postmill/core/tracking"
	"github.com/postmill/postmill/ports"
)

// msgNoOutcome is the providerResponse of a job recipient the MTA's report left out: it is deferred rather
// than left queued forever.
const msgNoOutcome = "no outcome reported for this recipient"

// LoadOutbound returns a job's message ready to build, sign and deliver: the job's own envelope recipients
// (those still awaiting delivery), the To and Cc header lists of the whole message (never Bcc), the From
// domain's DKIM key opened from its sealed form, a VERP return path and the Message-ID. A message that is
// gone, cancelled, or has no recipient of this job left to deliver is not_found, so the MTA drops the job.
// A job whose organization is paused or whose From domain is suspended is put on hold and answered with
// ports.DeliveryHeld, so the MTA acknowledges it without delivering (hold.go).
func (s *Service) LoadOutbound(ctx context.Context, job ports.DeliveryJob) (ports.OutboundMessage, error) {
	msg, domain, err := s.delivery.OutboundData(ctx, job.OrganizationID, job.MessageID)
	if err != nil {
		return ports.OutboundMessage{}, fmt.Errorf("sending: outbound data: %w", err)
	}
	recipients := jobRecipients(job, msg)
	if msg.Status == ports.StatusCancelled || len(recipients) == 0 {
		return ports.OutboundMessage{}, ports.NotFound("nothing to deliver for job %s", job.ID)
	}
	if err := s.holdIfStopped(ctx, job, domain); err != nil {
		return ports.OutboundMessage{}, err
	}
	key, err := dkimdomain.OpenKey(s.keyring, domain)
	if err != nil {
		return ports.OutboundMessage{}, fmt.Errorf("sending: %w", err)
	}
	out := buildOutbound(job, msg, domain, recipients, key, s.verpKey)
	if out.ReturnPath == "" {
		return ports.OutboundMessage{}, fmt.Errorf("sending: job %s: ids are not UUIDs", job.ID)
	}
	// A tracked copy names its recipient, so only a job of one recipient is tracked: the send path gives a
	// tracked domain's messages one job per recipient. The HTML handed to Rewrite is the stored body, the
	// same one a click's link lookup reads later.
	if s.tracker != nil && tracked(domain, msg.HTML) && len(recipients) == 1 {
		out.HTML = s.tracker.Rewrite(msg.HTML, tracking.RewriteParams{
			OrganizationID: msg.OrganizationID,
			MessageID:      msg.ID,
			RecipientID:    recipients[0].ID,
			Domain:         domain.Name,
			Open:           domain.OpenTracking,
			Click:          domain.ClickTracking,
		})
	}
	return out, nil
}

// ReportDelivery applies the MTA's account of one job (see applyReport) in one store transaction, deciding
// it from the recipients' states read in that transaction under the message's lock. The store applies a
// job id once, so a redelivered job's second report changes nothing. A report for a message that no longer
// exists is dropped.
func (s *Service) ReportDelivery(ctx context.Context, r ports.DeliveryReport) error {
	if r.At.IsZero() {
		r.At = s.now()
	}
	policy := s.retryPolicy()
	applied, err := s.delivery.ApplyDeliveryReport(ctx, r.Job.ID, r.Job.OrganizationID, r.Job.MessageID,
		func(current []ports.Recipient) ports.DeliveryApplication {
			return applyReport(r, current, policy, newID)
		})
	if ports.ErrorCode(err) == ports.CodeNotFound {
		s.logger.InfoContext(ctx, "delivery report for a message that no longer exists", "job", r.Job.ID, "message", r.Job.MessageID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("sending: apply delivery: %w", err)
	}
	if !applied {
		s.logger.DebugContext(ctx, "delivery report already applied", "job", r.Job.ID)
	}
	return nil
}

// deliverable reports whether a recipient in this state still awaits an SMTP attempt. Handed-over (sent),
// final and engagement states are done: a redelivered job must not mail them twice.
func deliverable(st ports.MessageStatus) bool {
	switch st {
	case ports.StatusQueued, ports.StatusScheduled, ports.StatusDeliveryDelayed:
		return true
	}
	return false
}

// settled reports whether a recipient's state is final for delivery: no later SMTP outcome may change it.
func settled(st ports.MessageStatus) bool {
	switch st {
	case ports.StatusDelivered, ports.StatusBounced, ports.StatusFailed, ports.StatusComplained,
		ports.StatusOpened, ports.StatusClicked, ports.StatusCancelled:
		return true
	}
	return false
}

// jobRecipients returns the message's recipients named by the job that still await delivery, in message
// order.
func jobRecipients(job ports.DeliveryJob, msg ports.Message) []ports.Recipient {
	var out []ports.Recipient
	for _, r := range msg.Recipients {
		if slices.Contains(job.RecipientIDs, r.ID) && deliverable(r.Status) {
			out = append(out, r)
		}
	}
	return out
}

// dateOf is the message's Date (RFC 5322 §3.6.1: when it was ready to enter the mail system): its creation,
// or its scheduled time when it was held until then.
func dateOf(msg ports.Message) time.Time {
	if msg.ScheduledAt != nil && msg.ScheduledAt.After(msg.CreatedAt) {
		return *msg.ScheduledAt
	}
	return msg.CreatedAt
}

// buildOutbound assembles what the MTA needs for one job. The To and Cc headers list every to and cc
// recipient of the message with the display name it was sent with, so each copy shows the same headers
// (RFC 5322 §3.6.3), while Bcc recipients
// appear only in their own envelope. The return path is a VERP address naming the recipient when the job has
// exactly one, the message otherwise (the bounce's Final-Recipient then names the recipient, RFC 3464 §2.3.2).
func buildOutbound(job ports.DeliveryJob, msg ports.Message, domain ports.Domain, recipients []ports.Recipient, dkimKey, verpKey []byte) ports.OutboundMessage {
	var to, cc []string
	for _, r := range msg.Recipients {
		switch r.Type {
		case ports.RecipientTo:
			to = append(to, headerMailbox(r))
		case ports.RecipientCc:
			cc = append(cc, headerMailbox(r))
		}
	}
	fromDomain := addressDomain(senderAddress(msg.From))
	kind, verpID := VERPMessage, msg.ID
	if len(recipients) == 1 {
		kind, verpID = VERPRecipient, recipients[0].ID
	}
	return ports.OutboundMessage{
		Job:             job,
		MessageID:       msg.ID,
		OrganizationID:  msg.OrganizationID,
		From:            msg.From,
		ReplyTo:         msg.ReplyTo,
		Subject:         msg.Subject,
		HTML:            msg.HTML,
		Text:            msg.Text,
		Headers:         msg.Headers,
		To:              to,
		Cc:              cc,
		Recipients:      recipients,
		Attachments:     msg.Attachments,
		CreatedAt:       dateOf(msg),
		DKIMDomain:      domain.Name,
		DKIMSelector:    domain.DKIMSelector,
		DKIMPrivateKey:  dkimKey,
		ReturnPath:      EncodeVERP(verpKey, kind, verpID, fromDomain),
		MessageIDHeader: msg.ID + "@" + fromDomain,
	}
}

// retryPolicy is the part of Config that applyReport needs.
type retryPolicy struct {
	base, cap, maxAge time.Duration
}

func (s *Service) retryPolicy() retryPolicy {
	return retryPolicy{base: s.cfg.RetryBase, cap: s.cfg.RetryCap, maxAge: s.cfg.MaxAge}
}

// applyReport turns the MTA's report of one job into what the store writes, given the message's recipients
// with their current statuses:
//   - delivered (250 after DATA): recipient delivered; events email.sent (it was handed over) then
//     email.delivered with the server's reply;
//   - deferred (4xx, unreachable): recipient delivery_delayed, event email.delivery_delayed, and the
//     recipient goes into one retry job for the same domain, attempt+1, due after RetryDelay — unless the job
//     was first queued MaxAge ago or more, then failed with email.failed;
//   - bounced (5xx): recipient bounced, event email.bounced and a bounce record, both with the reply's
//     class (bounceclass), and a tenant suppression with reason bounce when the class says the address
//     will never work (bounceclass.Suppresses); a spam or policy block suppresses nothing;
//   - failed (given up): recipient failed, event email.failed.
//
// Only recipients of the job count. One already settled (delivered, bounced, ...) is left alone, so a late
// or duplicate outcome never moves a recipient backwards; one still awaiting delivery that the report leaves
// out is deferred, so it is retried instead of staying queued forever; an unknown outcome kind is deferred
// too. A handed-over transaction (r.Handed) whose recipient was then refused or deferred records no
// email.sent: the recipient was not accepted, and a retry would otherwise record sent twice. Sent events come first, at r.At; outcome
// events follow one microsecond later. The message status is DeriveMessageStatus over every recipient of the
// message with the new statuses applied.
func applyReport(r ports.DeliveryReport, current []ports.Recipient, p retryPolicy, newID func() string) ports.DeliveryApplication {
	job := r.Job
	app := ports.DeliveryApplication{
		JobID:          job.ID,
		OrganizationID: job.OrganizationID,
		MessageID:      job.MessageID,
		Recipients:     make(map[string]ports.MessageStatus),
	}
	byID := make(map[string]ports.Recipient, len(current))
	for _, rc := range current {
		byID[rc.ID] = rc
	}

	outcomes := make([]ports.RecipientOutcome, 0, len(job.RecipientIDs))
	reported := make(map[string]bool, len(r.Recipients))
	for _, o := range r.Recipients {
		if reported[o.RecipientID] || !slices.Contains(job.RecipientIDs, o.RecipientID) {
			continue
		}
		reported[o.RecipientID] = true
		outcomes = append(outcomes, o)
	}
	for _, id := range job.RecipientIDs {
		if rc, ok := byID[id]; ok && !reported[id] && deliverable(rc.Status) {
			outcomes = append(outcomes, ports.RecipientOutcome{RecipientID: id, Kind: ports.OutcomeDeferred, Response: msgNoOutcome})
		}
	}

	firstQueued := job.FirstQueuedAt
	if firstQueued.IsZero() {
		firstQueued = r.At
	}
	expired := r.At.Sub(firstQueued) >= p.maxAge
	var retryIDs []string
	// Handed-over events come first and one microsecond (PostgreSQL's resolution) before the outcomes, so the
	// timeline reads sent, then delivered, by time alone whatever the store's tie-break.
	var handed, results []ports.Event
	event := func(list *[]ports.Event, typ, recipientID string, response string) *ports.Event {
		var resp *string
		if response != "" {
			resp = &response
		}
		at := r.At.Add(time.Microsecond)
		if list == &handed {
			at = r.At
		}
		*list = append(*list, ports.Event{
			ID:               newID(),
			OrganizationID:   job.OrganizationID,
			Type:             typ,
			MessageID:        job.MessageID,
			RecipientID:      recipientID,
			ProviderResponse: resp,
			OccurredAt:       at,
		})
		return &(*list)[len(*list)-1]
	}

	// bounce is the record of a refusal the receiving server gave during the SMTP session.
	bounce := func(rc ports.Recipient, typ, class, action, response string) ports.Bounce {
		return ports.Bounce{
			ID: newID(), OrganizationID: job.OrganizationID, MessageID: job.MessageID, RecipientID: rc.ID,
			Address: rc.Address, Type: typ, Class: class, Status: enhancedStatus(response), Action: action,
			DiagnosticCode: "smtp; " + response, CreatedAt: r.At,
		}
	}
	for _, o := range outcomes {
		rc, ok := byID[o.RecipientID]
		if !ok || settled(rc.Status) {
			continue
		}
		kind := o.Kind
		switch kind {
		case ports.OutcomeDelivered, ports.OutcomeBounced, ports.OutcomeFailed:
		default: // deferred, or a kind this core does not know: try again later
			kind = ports.OutcomeDeferred
		}
		if kind == ports.OutcomeDeferred && expired {
			kind = ports.OutcomeFailed
		}
		switch kind {
		case ports.OutcomeDelivered:
			app.Recipients[rc.ID] = ports.StatusDelivered
			event(&handed, ports.EventEmailSent, rc.ID, "")
			event(&results, ports.EventEmailDelivered, rc.ID, o.Response)
		case ports.OutcomeBounced:
			class := bounceclass.ClassifyReply(o.Response)
			app.Recipients[rc.ID] = ports.StatusBounced
			event(&results, ports.EventEmailBounced, rc.ID, o.Response).BounceClass = class
			if bounceclass.Suppresses(class) {
				app.Suppressions = append(app.Suppressions, ports.Suppression{
					ID:             newID(),
					OrganizationID: job.OrganizationID,
					Address:        strings.ToLower(rc.Address),
					Scope:          ports.SuppressionScopeTenant,
					Reason:         ports.SuppressionBounce,
					CreatedAt:      r.At,
				})
			}
			app.Bounces = append(app.Bounces, bounce(rc, ports.BounceHard, class, "failed", o.Response))
		case ports.OutcomeFailed:
			app.Recipients[rc.ID] = ports.StatusFailed
			event(&results, ports.EventEmailFailed, rc.ID, o.Response)
		default:
			class := bounceclass.ClassifyReply(o.Response)
			app.Recipients[rc.ID] = ports.StatusDeliveryDelayed
			event(&results, ports.EventEmailDeliveryDelayed, rc.ID, o.Response).BounceClass = class
			retryIDs = append(retryIDs, rc.ID)
			if serverReply(o.Response, '4') {
				// The receiving server refused for now: a soft bounce, listed like one that arrives as a
				// report later. A connection that failed, or an answer never received, is not one.
				app.Bounces = append(app.Bounces, bounce(rc, ports.BounceSoft, class, "delayed", o.Response))
			}
		}
	}

	app.Events = append(handed, results...)

	if len(retryIDs) > 0 {
		app.Retry = &ports.DeliveryJob{
			ID:             newID(),
			OrganizationID: job.OrganizationID,
			MessageID:      job.MessageID,
			Domain:         job.Domain,
			RecipientIDs:   retryIDs,
			Attempt:        max(job.Attempt, 1) + 1,
			FirstQueuedAt:  firstQueued,
			NotBefore:      r.At.Add(RetryDelay(p.base, p.cap, job.Attempt)),
			Bulk:           job.Bulk, // a retry stays in its lane
		}
	}

	// MessageStatus stays "": the store derives it with ports.DeriveMessageStatus while it holds the
	// message's lock, so concurrent jobs of one message (several recipient domains) cannot each decide
	// from a stale read.
	return app
}

// serverReply reports whether response is an SMTP server's reply of the given class ('4' or '5'): three
// digits, then a space, a hyphen or nothing (RFC 5321 §4.2), rather than the MTA's own account of a failed
// connection or a reply that never came.
func serverReply(response string, class byte) bool {
	if len(response) < 3 || response[0] != class {
		return false
	}
	for _, c := range []byte(response[1:3]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(response) == 3 || response[3] == ' ' || response[3] == '-'
}

// enhancedStatusPattern finds an RFC 3463 enhanced status code (class 4 or 5) in an SMTP reply.
var enhancedStatusPattern = regexp.MustCompile(`\b[45]\.[0-9]{1,3}\.[0-9]{1,3}\b`)

// enhancedStatus returns the enhanced status code of a reply such as "550 5.1.1 user unknown", or for a
// reply without one the class from its reply code ("550 no" → "5.0.0", RFC 3463 §3.1); "" otherwise.
func enhancedStatus(reply string) string {
	for _, loc := range enhancedStatusPattern.FindAllStringIndex(reply, -1) {
		// Not part of a longer dotted number such as an IP address.
		if (loc[0] > 0 && reply[loc[0]-1] == '.') || (loc[1] < len(reply) && reply[loc[1]] == '.') {
			continue
		}
		return reply[loc[0]:loc[1]]
	}
	if len(reply) >= 3 && (reply[0] == '4' || reply[0] == '5') && reply[1] >= '0' && reply[1] <= '9' && reply[2] >= '0' && reply[2] <= '9' {
		return reply[:1] + ".0.0"
	}
	return ""
}
