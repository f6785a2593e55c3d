package deliverability

import (
	"context"
	"strings"
	"time"

	"github.com/postmill/postmill/core/deliverability/bounceclass"
	"github.com/postmill/postmill/core/sending"
	"github.com/postmill/postmill/ports"
)

// RecordBounce implements ports.FeedbackService. The VERP token in the envelope recipient names the
// recipient or the message (a DSN goes back to the envelope sender of the mail, RFC 3464 §2); the report's
// per-recipient parts say which addresses failed and how; decideBounce turns that and the recipients'
// current statuses into what the store writes.
//
// A recipient token names the one recipient of its delivery job. The report's part for that address is
// used (matched on Final-Recipient or Original-Recipient); when no part names it but the report has exactly
// one part, that part is about this recipient under another name (a forwarding or aliasing server reports
// the address it tried last). A message token maps each part to the message's recipients by address, inside
// the store's transaction.
func (s *Service) RecordBounce(ctx context.Context, r ports.BounceReport) error {
	v, ok := s.decodeVERP(bareAddress(r.Rcpt))
	if !ok {
		return errNoVERP("bounce")
	}
	if len(r.Recipients) == 0 {
		return ports.Errorf(ports.CodeInvalidArgument, "bounce report names no recipient")
	}
	c := bounceCall{reportingMTA: r.ReportingMTA, now: s.now(), ids: newIDSeq(), reportID: bounceReportID(r)}
	switch v.kind {
	case sending.VERPRecipient:
		ref, err := s.store.RecipientByID(ctx, v.id)
		if err != nil {
			return unmapped("bounce", err)
		}
		part, ok := partForRecipient(ref.Address, r.Recipients)
		if !ok {
			return errNoRecipient("bounce")
		}
		c.orgID, c.messageID, c.targetID, c.target = ref.OrganizationID, ref.MessageID, ref.RecipientID, part
	default: // sending.VERPMessage; DecodeVERP knows no other kind
		orgID, err := s.store.MessageOrganization(ctx, v.id)
		if err != nil {
			return unmapped("bounce", err)
		}
		c.orgID, c.messageID, c.parts = orgID, v.id, r.Recipients
	}

	// matched is written by each call of decide; the last call is the one whose result was committed.
	var matched bool
	err := s.store.ApplyFeedback(ctx, c.orgID, c.messageID, func(current []ports.Recipient) ports.FeedbackApplication {
		app, m := decideBounce(c, current)
		matched = m
		return app
	})
	if err != nil {
		return unmapped("bounce", err)
	}
	if !matched {
		// Nothing was written: decide found no recipient to change.
		return errNoRecipient("bounce")
	}
	return nil
}

// bounceCall is everything decideBounce needs besides the current recipients, fixed before the store is
// called so that every call of decide sees the same input.
type bounceCall struct {
	orgID, messageID string
	// targetID and target: a recipient token's recipient and the report part chosen for it
	// (partForRecipient). Empty for a message token.
	targetID string
	target   ports.DSNRecipient
	// parts are a message token's report parts, mapped to recipients by address.
	parts        []ports.DSNRecipient
	reportingMTA string
	now          time.Time
	ids          idSeq
	// reportID names the report, so the store applies it once (bounceReportID).
	reportID string
}

// chosenPart is the report part that decides one recipient's fate, with its classification.
type chosenPart struct {
	part ports.DSNRecipient
	cls  classification
}

// partForRecipient picks the report part about address: the most severe of the parts naming it as their
// Final-Recipient or Original-Recipient (RFC 3464 §2.3.1, §2.3.2), else the only part of a one-part report.
func partForRecipient(address string, parts []ports.DSNRecipient) (ports.DSNRecipient, bool) {
	addr := bareAddress(address)
	var (
		best  chosenPart
		found bool
	)
	for _, p := range parts {
		if addr == "" || (bareAddress(p.FinalRecipient) != addr && bareAddress(p.OriginalRecipient) != addr) {
			continue
		}
		if cls := classify(p); !found || cls.severity() > best.cls.severity() {
			best, found = chosenPart{part: p, cls: cls}, true
		}
	}
	if found {
		return best.part, true
	}
	if len(parts) == 1 {
		return parts[0], true
	}
	return ports.DSNRecipient{}, false
}

// matchParts maps a message token's report parts to the message's recipients: each part by its
// Final-Recipient, else its Original-Recipient, compared without letter case; a part naming no recipient
// is ignored (a server may report addresses it expanded to). When parts disagree about a recipient the most
// severe wins. matched reports whether any part named a recipient, whatever it said.
func matchParts(parts []ports.DSNRecipient, current []ports.Recipient) (chosen map[string]chosenPart, matched bool) {
	byAddr := make(map[string][]string, len(current))
	for _, rc := range current {
		a := bareAddress(rc.Address)
		byAddr[a] = append(byAddr[a], rc.ID)
	}
	chosen = make(map[string]chosenPart)
	for _, p := range parts {
		var ids []string
		if a := bareAddress(p.FinalRecipient); a != "" {
			ids = byAddr[a]
		}
		if a := bareAddress(p.OriginalRecipient); len(ids) == 0 && a != "" {
			ids = byAddr[a]
		}
		if len(ids) == 0 {
			continue
		}
		matched = true
		cls := classify(p)
		for _, id := range ids {
			if prev, ok := chosen[id]; !ok || cls.severity() > prev.cls.severity() {
				chosen[id] = chosenPart{part: p, cls: cls}
			}
		}
	}
	return chosen, matched
}

// decideBounce is the pure rule of a bounce. For each recipient the report is about, in the order of
// current:
//
//   - hard: unless the recipient is already bounced (the same report delivered twice, or the MTA saw the
//     5xx first) or cancelled (it was never sent), a bounce record, status bounced from any other state
//     (a bounce after delivered is the normal case: the receiving server accepted with 250 and failed
//     later), email.bounced with the diagnostic as provider response, and, when the class says the address
//     will never work (bounceclass.Suppresses: an unknown mailbox or domain, a disabled mailbox), a tenant
//     suppression of the address with reason bounce. A spam or policy block, a full mailbox or an
//     unreadable refusal bounces the recipient without suppressing the address;
//   - soft: a bounce record and email.delivery_delayed, no status change and no suppression: the reporting
//     server is still trying or gave up on a transient condition. A recipient that already ended (bounced,
//     failed, cancelled) gets nothing: a late delay notice cannot undo the end, and would read as a retry on
//     the timeline;
//   - no failure (delivered, relayed, expanded): nothing.
//
// matched is false when the report names none of current's recipients; the application is then empty.
// Ids come from c.ids in a fixed order, so calling decideBounce again with the same input returns the same
// application.
func decideBounce(c bounceCall, current []ports.Recipient) (ports.FeedbackApplication, bool) {
	var (
		chosen  map[string]chosenPart
		matched bool
	)
	if c.targetID != "" {
		for _, rc := range current {
			if rc.ID == c.targetID {
				chosen = map[string]chosenPart{rc.ID: {part: c.target, cls: classify(c.target)}}
				matched = true
				break
			}
		}
	} else {
		chosen, matched = matchParts(c.parts, current)
	}

	app := ports.FeedbackApplication{ReportID: c.reportID, Recipients: make(map[string]ports.MessageStatus)}
	ids := c.ids
	for _, rc := range current {
		ch, ok := chosen[rc.ID]
		if !ok || ch.cls.Type == "" || rc.Status == ports.StatusCancelled || rc.Status == ports.StatusBounced {
			continue
		}
		hard := ch.cls.Type == ports.BounceHard
		if !hard && rc.Status == ports.StatusFailed {
			continue
		}
		app.Bounces = append(app.Bounces, ports.Bounce{
			ID:             ids.next(),
			OrganizationID: c.orgID,
			MessageID:      c.messageID,
			RecipientID:    rc.ID,
			Address:        rc.Address,
			Type:           ch.cls.Type,
			Class:          ch.cls.Class,
			Status:         ch.cls.Status,
			Action:         bounceAction(ch.part.Action, hard),
			DiagnosticCode: ch.part.DiagnosticCode,
			RemoteMTA:      ch.part.RemoteMTA,
			ReportingMTA:   c.reportingMTA,
			CreatedAt:      c.now,
		})
		event := ports.Event{
			ID:               ids.next(),
			OrganizationID:   c.orgID,
			Type:             ports.EventEmailDeliveryDelayed,
			MessageID:        c.messageID,
			RecipientID:      rc.ID,
			ProviderResponse: providerResponse(ch.part.DiagnosticCode, ch.cls.Status),
			BounceClass:      ch.cls.Class,
			OccurredAt:       c.now,
		}
		if !hard {
			app.Events = append(app.Events, event)
			continue
		}
		event.Type = ports.EventEmailBounced
		app.Events = append(app.Events, event)
		app.Recipients[rc.ID] = ports.StatusBounced
		if !bounceclass.Suppresses(ch.cls.Class) {
			continue
		}
		app.Suppressions = append(app.Suppressions, ports.Suppression{
			ID:             ids.next(),
			OrganizationID: c.orgID,
			Address:        strings.ToLower(rc.Address),
			Scope:          ports.SuppressionScopeTenant,
			Reason:         ports.SuppressionBounce,
			CreatedAt:      c.now,
		})
	}
	return app, matched
}

// bounceAction is the Action of a bounce record: the report's, lower-cased, or, for a non-standard bounce
// that gave none, the RFC 3464 §2.3.3 action its type implies.
func bounceAction(action string, hard bool) string {
	if a := strings.ToLower(strings.TrimSpace(action)); a != "" {
		return a
	}
	if hard {
		return actionFailed
	}
	return actionDelayed
}

// providerResponse is the timeline's provider response of a bounce: the remote server's words, else the
// status code, else none.
func providerResponse(diagnostic, status string) *string {
	resp := strings.TrimSpace(diagnostic)
	if resp == "" && status != "" {
		resp = "Status " + status
	}
	if resp == "" {
		return nil
	}
	return &resp
}
