package deliverability

import (
	"context"
	"strings"
	"time"

	"github.com/postmill/postmill/core/sending"
	"github.com/postmill/postmill/ports"
)

// Feedback types (the RFC 5965 §7.3 registry, with auth-failure of RFC 6591 and not-spam of RFC 6650),
// lower-cased.
const (
	feedbackAbuse       = "abuse"
	feedbackFraud       = "fraud"
	feedbackVirus       = "virus"
	feedbackOther       = "other"
	feedbackNotSpam     = "not-spam"
	feedbackAuthFailure = "auth-failure"
)

// feedbackType normalises a report's Feedback-Type into the type a complaint records, or "" when the report
// is not a complaint at all:
//   - not-spam (RFC 6650) is a user taking a spam verdict back, the opposite of a complaint;
//   - auth-failure (RFC 6591) reports a failed SPF or DKIM check to the domain owner, not a user's verdict;
//   - empty means abuse, the type feedback loops send for the "this is spam" button (RFC 6449);
//   - a type outside the registry is recorded as other (RFC 5965 §7.3's catch-all), so the record keeps a
//     value every reader knows.
func feedbackType(t string) string {
	switch t = strings.ToLower(strings.TrimSpace(t)); t {
	case feedbackNotSpam, feedbackAuthFailure:
		return ""
	case "":
		return feedbackAbuse
	case feedbackAbuse, feedbackFraud, feedbackVirus, feedbackOther:
		return t
	}
	return feedbackOther
}

// RecordComplaint implements ports.FeedbackService. The report maps to Postmill's mail through a VERP
// address: the envelope recipient when the provider sent the report to the return path, else the
// Original-Mail-From of the report (RFC 5965 §3.2), which is the return path of the mail complained about
// when the report went to the feedback-loop mailbox. A recipient token names the complainer; a message
// token is narrowed by Original-Rcpt-To, or by the message having one recipient only.
func (s *Service) RecordComplaint(ctx context.Context, r ports.ComplaintReport) error {
	ft := feedbackType(r.FeedbackType)
	if ft == "" {
		s.logger.DebugContext(ctx, "feedback report is not a complaint", "feedbackType", r.FeedbackType)
		return nil
	}
	v, ok := s.decodeVERP(bareAddress(r.Rcpt))
	if !ok {
		v, ok = s.decodeVERP(bareAddress(r.OriginalMailFrom))
	}
	if !ok {
		return errNoVERP("complaint")
	}
	c := complaintCall{
		feedbackType:   ft,
		userAgent:      r.UserAgent,
		reportedDomain: r.ReportedDomain,
		sourceIP:       r.SourceIP,
		now:            s.now(),
		ids:            newIDSeq(),
		reportID:       complaintReportID(r),
	}
	if r.ArrivalDate != nil {
		at := r.ArrivalDate.UTC()
		c.arrivalDate = &at
	}
	switch v.kind {
	case sending.VERPRecipient:
		ref, err := s.store.RecipientByID(ctx, v.id)
		if err != nil {
			return unmapped("complaint", err)
		}
		c.orgID, c.messageID, c.targetID = ref.OrganizationID, ref.MessageID, ref.RecipientID
	default: // sending.VERPMessage
		orgID, err := s.store.MessageOrganization(ctx, v.id)
		if err != nil {
			return unmapped("complaint", err)
		}
		c.orgID, c.messageID = orgID, v.id
		for _, a := range r.OriginalRcptTo {
			if a = bareAddress(a); a != "" {
				c.rcptTo = append(c.rcptTo, a)
			}
		}
	}

	var matched bool
	err := s.store.ApplyFeedback(ctx, c.orgID, c.messageID, func(current []ports.Recipient) ports.FeedbackApplication {
		app, m := decideComplaint(c, current)
		matched = m
		return app
	})
	if err != nil {
		return unmapped("complaint", err)
	}
	if !matched {
		return errNoRecipient("complaint")
	}
	return nil
}

// complaintCall is everything decideComplaint needs besides the current recipients.
type complaintCall struct {
	orgID, messageID string
	// targetID is a recipient token's recipient; empty for a message token.
	targetID string
	// rcptTo are a message token's Original-Rcpt-To addresses, normalised by bareAddress.
	rcptTo         []string
	feedbackType   string
	userAgent      string
	reportedDomain string
	sourceIP       string
	arrivalDate    *time.Time
	now            time.Time
	ids            idSeq
	// reportID names the report, so the store applies it once (complaintReportID).
	reportID string
}

// complainers returns the recipient a complaint is about: a recipient token's recipient; for a message
// token the one recipient whose address is among Original-Rcpt-To, else the message's only recipient when
// it has exactly one (the provider redacted or rewrote the address, as feedback loops often do). A message
// token whose report names several of the message's recipients names none: a complaint comes from one
// mailbox, and a list of addresses (a returned To header standing in for a redacted Original-Rcpt-To, or a
// report forged by one recipient of a shared transaction) must not suppress all of them.
func complainers(c complaintCall, current []ports.Recipient) []ports.Recipient {
	if c.targetID != "" {
		for _, rc := range current {
			if rc.ID == c.targetID {
				return []ports.Recipient{rc}
			}
		}
		return nil
	}
	var out []ports.Recipient
	for _, rc := range current {
		a := bareAddress(rc.Address)
		for _, want := range c.rcptTo {
			if a == want {
				out = append(out, rc)
				break
			}
		}
	}
	if len(out) == 0 && len(current) == 1 {
		out = current
	}
	if len(out) > 1 {
		return nil
	}
	return out
}

// decideComplaint is the pure rule of a complaint. For each complainer not already complained (the same
// report delivered twice changes nothing): a complaint record, status complained when
// ports.EngagementAdvances allows it (a bounced or failed recipient keeps its status, the complaint is still
// recorded), email.complained, and a tenant suppression of the address with reason complaint: a recipient
// who called the mail spam must not get more of it (RFC 6449). matched is false when the report names
// no recipient of the message. Ids come from c.ids in a fixed order, so a repeated call returns the same
// application.
func decideComplaint(c complaintCall, current []ports.Recipient) (ports.FeedbackApplication, bool) {
	targets := complainers(c, current)
	app := ports.FeedbackApplication{ReportID: c.reportID, Recipients: make(map[string]ports.MessageStatus)}
	ids := c.ids
	for _, rc := range targets {
		if rc.Status == ports.StatusComplained {
			continue
		}
		var arrival *time.Time
		if c.arrivalDate != nil {
			at := *c.arrivalDate
			arrival = &at
		}
		app.Complaints = append(app.Complaints, ports.Complaint{
			ID:             ids.next(),
			OrganizationID: c.orgID,
			MessageID:      c.messageID,
			RecipientID:    rc.ID,
			Address:        rc.Address,
			FeedbackType:   c.feedbackType,
			UserAgent:      c.userAgent,
			ReportedDomain: c.reportedDomain,
			SourceIP:       c.sourceIP,
			ArrivalDate:    arrival,
			CreatedAt:      c.now,
		})
		if ports.EngagementAdvances(rc.Status, ports.StatusComplained) {
			app.Recipients[rc.ID] = ports.StatusComplained
		}
		app.Events = append(app.Events, ports.Event{
			ID:             ids.next(),
			OrganizationID: c.orgID,
			Type:           ports.EventEmailComplained,
			MessageID:      c.messageID,
			RecipientID:    rc.ID,
			OccurredAt:     c.now,
		})
		app.Suppressions = append(app.Suppressions, ports.Suppression{
			ID:             ids.next(),
			OrganizationID: c.orgID,
			Address:        strings.ToLower(rc.Address),
			Scope:          ports.SuppressionScopeTenant,
			Reason:         ports.SuppressionComplaint,
			CreatedAt:      c.now,
		})
	}
	return app, len(targets) > 0
}
