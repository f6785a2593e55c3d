package sending

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/postmill/postmill/ports"
)

// Messages of SPEC §7 and the brief's send flow.
const (
	msgOrgPaused        = "organization sending is paused"
	msgSandboxDelivered = "sandbox: not delivered"
	msgEmailNotFound    = "email not found"
	reasonOrgSuspended  = "org_suspended"
	blobCleanupTimeout  = 10 * time.Second
)

// maxRecipientsPerJob splits a domain's recipients into several SMTP transactions: RFC 5321 §4.5.3.1.8 only
// obliges a server to accept 100 RCPT commands in one transaction.
const maxRecipientsPerJob = 100

// Send accepts one email (SPEC §4.2): validation, idempotency replay, from-domain, organization, suppression,
// template and attachment checks, then one store transaction that writes the message, its recipients,
// attachments' metadata, events and outbox jobs and meters what sendUsage decided the send may use. The
// store meters atomically and writes nothing for a send over a limit, which is refused here as SPEC §7
// words it (402 plan_limit_exceeded, 429 warmup_cap_reached). Attachment bytes are written to the blob
// store before that transaction and deleted again when it does not commit.
func (s *Service) Send(ctx context.Context, orgID string, req ports.SendRequest) (ports.SendResult, error) {
	req, violations := validateSend(req)
	if len(violations) > 0 {
		return ports.SendResult{}, ports.ValidationError(violations...)
	}

	// Rule 3 of SPEC §4.2's idempotency: a used key answers with the original message before any other
	// check, so a replay succeeds even when the domain or the plan would now refuse a new send. The unique
	// constraint inside InsertMessage covers two first uses racing past this read (rule 4).
	if req.IdempotencyKey != "" {
		id, status, err := s.messages.MessageByIdempotencyKey(ctx, orgID, req.IdempotencyKey)
		if err == nil {
			return ports.SendResult{ID: id, Status: status, Deduped: true}, nil
		}
		if ports.ErrorCode(err) != ports.CodeNotFound {
			return ports.SendResult{}, fmt.Errorf("sending: idempotency key: %w", err)
		}
	}

	domain, err := s.sendingDomain(ctx, orgID, addressDomain(senderAddress(req.From)))
	if err != nil {
		return ports.SendResult{}, err
	}
	org, err := s.organization(ctx, orgID)
	if err != nil {
		return ports.SendResult{}, err
	}
	if org.Paused {
		return ports.SendResult{}, orgPausedError()
	}

	recipients := dedupeRecipients(req.To, req.Cc, req.Bcc)
	if err := s.checkSuppressions(ctx, orgID, recipients); err != nil {
		return ports.SendResult{}, err
	}
	if req.Template != nil {
		if req, err = s.renderTemplate(ctx, orgID, req); err != nil {
			return ports.SendResult{}, err
		}
	}
	if err := s.scanAttachments(ctx, req.Attachments); err != nil {
		return ports.SendResult{}, err
	}

	now := s.now()
	messageID := newID()
	for i := range recipients {
		recipients[i].ID = newID()
	}
	stored, err := s.putAttachments(ctx, orgID, messageID, req.Attachments)
	if err != nil {
		return ports.SendResult{}, err
	}
	nm := acceptMessage(acceptance{
		messageID:    messageID,
		orgID:        orgID,
		domainID:     domain.ID,
		req:          req,
		recipients:   recipients,
		attachments:  stored,
		plan:         org.Plan,
		now:          now,
		perRecipient: tracked(domain, req.HTML),
	}, newID)
	ins, err := s.messages.InsertMessage(ctx, nm)
	if err != nil || ins.Existing || ins.OverLimit != nil {
		s.deleteBlobs(ctx, stored)
	}
	if err != nil {
		return ports.SendResult{}, fmt.Errorf("sending: insert message: %w", err)
	}
	if ins.OverLimit != nil {
		return ports.SendResult{}, overLimitError(*ins.OverLimit)
	}
	return ports.SendResult{ID: ins.ID, Status: ins.Status, Deduped: ins.Existing}, nil
}

// SendBatch runs each request through Send in order, so that when a plan limit or the warm-up cap runs out
// mid-batch the earlier items are the ones accepted. Idempotency keys are cleared (SPEC §4.2: the header is
// ignored on this route). A failed item never aborts the rest; results are aligned by Index.
func (s *Service) SendBatch(ctx context.Context, orgID string, reqs []ports.SendRequest) ([]ports.BatchItemResult, error) {
	if len(reqs) < 1 || len(reqs) > ports.MaxBatch {
		return nil, ports.ValidationError(ports.FieldViolation{Path: "emails", Message: fmt.Sprintf("must contain 1 to %d emails", ports.MaxBatch)})
	}
	results := make([]ports.BatchItemResult, len(reqs))
	for i, req := range reqs {
		req.IdempotencyKey = ""
		res, err := s.Send(ctx, orgID, req)
		results[i] = ports.BatchItemResult{Index: i, Result: res, Err: err}
	}
	return results, nil
}

// GetEmail returns the message with its recipients and timeline. An id that is not a UUID names no message.
func (s *Service) GetEmail(ctx context.Context, orgID, id string) (ports.Message, error) {
	if !validID(id) {
		return ports.Message{}, ports.NotFound(msgEmailNotFound)
	}
	m, err := s.messages.GetMessage(ctx, orgID, id)
	if err != nil {
		return ports.Message{}, fmt.Errorf("sending: get message: %w", err)
	}
	return m, nil
}

// CancelEmail moves a scheduled message to cancelled with an email.cancelled event (SPEC §3); any other
// state is failed_precondition (409).
func (s *Service) CancelEmail(ctx context.Context, orgID, id string) (ports.Message, error) {
	if !validID(id) {
		return ports.Message{}, ports.NotFound(msgEmailNotFound)
	}
	ev := ports.Event{
		ID:             newID(),
		OrganizationID: orgID,
		Type:           ports.EventEmailCancelled,
		MessageID:      id,
		OccurredAt:     s.now(),
	}
	m, err := s.messages.CancelScheduled(ctx, orgID, id, ev)
	if err != nil {
		return ports.Message{}, fmt.Errorf("sending: cancel: %w", err)
	}
	return m, nil
}

// ListEmails pages through the organization's messages, newest first. Limit 0 means 25; 1-100 is allowed
// (SPEC §8). The cursor is the store's own token: the store rejects a bad one.
func (s *Service) ListEmails(ctx context.Context, orgID string, q ports.ListEmailsQuery) (ports.EmailPage, error) {
	q, violations := normaliseListQuery(q)
	if len(violations) > 0 {
		return ports.EmailPage{}, ports.ValidationError(violations...)
	}
	page, err := s.messages.ListMessages(ctx, orgID, q)
	if err != nil {
		return ports.EmailPage{}, fmt.Errorf("sending: list messages: %w", err)
	}
	return page, nil
}

// normaliseListQuery applies the default limit and checks the limit and the status filter.
func normaliseListQuery(q ports.ListEmailsQuery) (ports.ListEmailsQuery, []ports.FieldViolation) {
	var v violations
	if q.Limit == 0 {
		q.Limit = ports.DefaultListLimit
	}
	if q.Limit < 1 || q.Limit > ports.MaxListLimit {
		v.add("limit", fmt.Sprintf("must be between 1 and %d", ports.MaxListLimit))
	}
	if q.Status != "" && !knownStatus(q.Status) {
		v.add("status", "must be a message status")
	}
	return q, v.list
}

// knownStatus reports whether st is one of SPEC §3's message states.
func knownStatus(st ports.MessageStatus) bool {
	switch st {
	case ports.StatusQueued, ports.StatusScheduled, ports.StatusSent, ports.StatusDelivered,
		ports.StatusDeliveryDelayed, ports.StatusBounced, ports.StatusComplained, ports.StatusOpened,
		ports.StatusClicked, ports.StatusFailed, ports.StatusCancelled:
		return true
	}
	return false
}

func validID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

// orgPausedError is SPEC §7's 403 org_suspended, with the way out as its hint.
func orgPausedError() *ports.Error {
	return (&ports.Error{Code: ports.CodePermissionDenied, Reason: reasonOrgSuspended, Message: msgOrgPaused}).
		WithHint(hintOrgPaused)
}

// sendingDomain returns the organization's verified domain of that name, or SPEC §7's 400 when it is missing
// or not verified (pending, failed and suspended alike). Only verified domains are cached, so a domain that
// has just been verified can send at once, and a suspension is honoured within LookupCacheTTL.
func (s *Service) sendingDomain(ctx context.Context, orgID, name string) (ports.Domain, error) {
	key := domainKey{orgID: orgID, name: name}
	if d, ok := s.domainCache.Get(key); ok {
		return d, nil
	}
	d, err := s.domains.DomainByName(ctx, orgID, name)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return ports.Domain{}, ports.Errorf(ports.CodeInvalidArgument, "domain %s not found for this org", name).
			WithHint(hintDomainNotFound)
	}
	if err != nil {
		return ports.Domain{}, fmt.Errorf("sending: domain: %w", err)
	}
	if d.Status != ports.DomainVerified {
		return ports.Domain{}, ports.Errorf(ports.CodeInvalidArgument, "domain %s is not verified", name).
			WithHint(unverifiedDomainHint(d))
	}
	s.domainCache.Put(key, d)
	return d, nil
}

// organization returns the organization (paused flag and plan). Only organizations that may send are cached,
// so resuming one takes effect at once and pausing one within LookupCacheTTL.
func (s *Service) organization(ctx context.Context, orgID string) (ports.Organization, error) {
	if o, ok := s.orgCache.Get(orgID); ok {
		return o, nil
	}
	o, err := s.orgs.Organization(ctx, orgID)
	if err != nil {
		return ports.Organization{}, fmt.Errorf("sending: organization: %w", err)
	}
	if !o.Paused {
		s.orgCache.Put(orgID, o)
	}
	return o, nil
}

// checkSuppressions refuses the send naming the first suppressed recipient in request order (SPEC §7
// `recipient suppressed: <address>`), whether the address itself or its domain is suppressed.
func (s *Service) checkSuppressions(ctx context.Context, orgID string, recipients []ports.Recipient) error {
	addrs := make([]string, len(recipients))
	for i, r := range recipients {
		addrs[i] = strings.ToLower(r.Address)
	}
	suppressed, err := s.messages.SuppressedAmong(ctx, orgID, addrs)
	if err != nil {
		return fmt.Errorf("sending: suppressions: %w", err)
	}
	if len(suppressed) == 0 {
		return nil
	}
	for i, r := range recipients {
		if suppressed[addrs[i]] {
			return ports.RecipientSuppressed(r.Address)
		}
	}
	return nil
}

// scanAttachments runs every attachment through the scanner before anything is written; the first one that
// is not clean rejects the whole send (SPEC §4.2).
func (s *Service) scanAttachments(ctx context.Context, atts []ports.Attachment) error {
	for _, a := range atts {
		verdict, err := s.scanner.Scan(ctx, a.Filename, a.ContentType, a.Content)
		if err != nil {
			return fmt.Errorf("sending: scan attachment: %w", err)
		}
		if !verdict.Clean {
			return ports.Errorf(ports.CodeInvalidArgument, "attachment %s rejected: %s", a.Filename, verdict.Signature)
		}
	}
	return nil
}

// putAttachments writes the bytes under generated keys (att/<org>/<message>/<attachment>): the filename is
// metadata only and never part of a key. On a failure the blobs written so far are deleted.
func (s *Service) putAttachments(ctx context.Context, orgID, messageID string, atts []ports.Attachment) ([]ports.StoredAttachment, error) {
	if len(atts) == 0 {
		return nil, nil
	}
	stored := make([]ports.StoredAttachment, 0, len(atts))
	for _, a := range atts {
		id := newID()
		sa := ports.StoredAttachment{
			ID:          id,
			Filename:    a.Filename,
			ContentType: a.ContentType,
			Size:        int64(len(a.Content)),
			Inline:      a.Inline,
			ContentID:   a.ContentID,
			Key:         attachmentKey(orgID, messageID, id),
		}
		if err := s.blobs.Put(ctx, sa.Key, a.Content, a.ContentType); err != nil {
			s.deleteBlobs(ctx, stored)
			return nil, fmt.Errorf("sending: store attachment: %w", err)
		}
		stored = append(stored, sa)
	}
	return stored, nil
}

// attachmentKey is the blob key of an attachment.
func attachmentKey(orgID, messageID, attachmentID string) string {
	return "att/" + orgID + "/" + messageID + "/" + attachmentID
}

// deleteBlobs removes attachments of a send that did not commit (or was a replay). It runs even when ctx has
// ended, since the request giving up is one reason to clean up; a failure only leaves an unreferenced blob.
func (s *Service) deleteBlobs(ctx context.Context, stored []ports.StoredAttachment) {
	if len(stored) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), blobCleanupTimeout)
	defer cancel()
	for _, a := range stored {
		if err := s.blobs.Delete(ctx, a.Key); err != nil {
			s.logger.WarnContext(ctx, "deleting the attachment of an uncommitted send failed", "key", a.Key, "error", err)
		}
	}
}

// dedupeRecipients turns to, cc and bcc into recipients, each address once: an address repeated in or across
// the lists (compared case-insensitively) keeps its first occurrence and type, in the order to, cc, bcc, so
// nobody receives two copies and nobody is metered twice. IDs and statuses are left to the caller.
func dedupeRecipients(to, cc, bcc []string) []ports.Recipient {
	out := make([]ports.Recipient, 0, len(to)+len(cc)+len(bcc))
	seen := make(map[string]bool, cap(out))
	for _, list := range []struct {
		typ   string
		addrs []string
	}{{ports.RecipientTo, to}, {ports.RecipientCc, cc}, {ports.RecipientBcc, bcc}} {
		for _, a := range list.addrs {
			r := recipientOf(list.typ, a) // the bare address, and the display name for the header
			k := strings.ToLower(r.Address)
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}

// renderTemplate replaces the request's subject and bodies with the template's published version rendered
// with its variables (SPEC §4.2: the published subject wins over a given one, which was still validated).
// An unknown or unpublished template is refused before anything is written.
func (s *Service) renderTemplate(ctx context.Context, orgID string, req ports.SendRequest) (ports.SendRequest, error) {
	if s.templates == nil {
		return req, errors.New("sending: a template was referenced but no template renderer is configured")
	}
	r, err := s.templates.RenderTemplate(ctx, orgID, req.Template.ID, req.Template.Variables)
	if err != nil {
		return req, fmt.Errorf("sending: render template: %w", err)
	}
	req.Subject, req.HTML, req.Text = r.Subject, r.HTML, r.Text
	// Variables are arbitrary JSON: a value may be empty (leaving the subject empty) or carry a NUL, which
	// PostgreSQL text cannot store. Both are the caller's to fix, so a 400 rather than a failed insert.
	// The rendered parts have the bounds of a send's own (the renderer stops just past them).
	var v violations
	if req.Subject == "" {
		v.add("template.variables", "the rendered subject is empty")
	}
	if req.HTML == "" && req.Text == "" {
		v.add("template.variables", "the rendered template has no body")
	}
	tooLong := false
	if utf8.RuneCountInString(req.Subject) > ports.MaxSubjectChars {
		v.add("template.variables", "the rendered subject "+msgSubjectLen)
		tooLong = true
	}
	for _, part := range []struct{ name, body string }{{"html", req.HTML}, {"text", req.Text}} {
		if len(part.body) > ports.MaxBodyPartBytes {
			v.add("template.variables", "the rendered "+part.name+" "+msgBodyPartLen)
			tooLong = true
		}
	}
	if !tooLong && (!storable(req.Subject) || !storable(req.HTML) || !storable(req.Text)) {
		v.add("template.variables", msgStorable)
	}
	if len(v.list) > 0 {
		return req, ports.ValidationError(v.list...)
	}
	return req, nil
}

// tracked reports whether mail with this HTML body from domain d carries tracking: the domain tracks opens
// or clicks and there is HTML to put the pixel and links in. Such a message goes out one recipient per job.
func tracked(d ports.Domain, html string) bool {
	return (d.OpenTracking || d.ClickTracking) && html != ""
}

// jobGroup is the recipients of one message that one SMTP transaction serves.
type jobGroup struct {
	Domain       string
	RecipientIDs []string
}

// groupJobs groups recipients by lower-cased domain, in order of first appearance, with at most
// maxRecipientsPerJob recipients per group: one DeliveryJob per recipient domain (several for a domain with
// more than 100 recipients), so the MTA sends one transaction per destination.
func groupJobs(recipients []ports.Recipient) []jobGroup {
	var groups []jobGroup
	open := make(map[string]int) // domain → index of its group still accepting recipients
	for _, r := range recipients {
		d := addressDomain(r.Address)
		i, ok := open[d]
		if !ok || len(groups[i].RecipientIDs) >= maxRecipientsPerJob {
			groups = append(groups, jobGroup{Domain: d})
			i = len(groups) - 1
			open[d] = i
		}
		groups[i].RecipientIDs = append(groups[i].RecipientIDs, r.ID)
	}
	return groups
}

// newJobs builds the first-attempt delivery jobs of a message, due at once.
func newJobs(orgID, messageID string, recipients []ports.Recipient, now time.Time, newID func() string) []ports.DeliveryJob {
	return jobsOf(orgID, messageID, groupJobs(recipients), now, newID)
}

// newJobsPerRecipient builds one first-attempt job per recipient: a tracked message carries tokens naming its
// recipient, so every copy is its own SMTP transaction (and its VERP return path names the recipient).
func newJobsPerRecipient(orgID, messageID string, recipients []ports.Recipient, now time.Time, newID func() string) []ports.DeliveryJob {
	groups := make([]jobGroup, len(recipients))
	for i, r := range recipients {
		groups[i] = jobGroup{Domain: addressDomain(r.Address), RecipientIDs: []string{r.ID}}
	}
	return jobsOf(orgID, messageID, groups, now, newID)
}

func jobsOf(orgID, messageID string, groups []jobGroup, now time.Time, newID func() string) []ports.DeliveryJob {
	jobs := make([]ports.DeliveryJob, len(groups))
	for i, g := range groups {
		jobs[i] = ports.DeliveryJob{
			ID:             newID(),
			OrganizationID: orgID,
			MessageID:      messageID,
			Domain:         g.Domain,
			RecipientIDs:   g.RecipientIDs,
			Attempt:        1,
			FirstQueuedAt:  now,
			NotBefore:      now,
		}
	}
	return jobs
}

// acceptance is everything acceptMessage needs: a validated request whose checks have passed, its
// recipients (with ids) and stored attachments.
type acceptance struct {
	messageID   string
	orgID       string
	domainID    string
	req         ports.SendRequest
	recipients  []ports.Recipient
	attachments []ports.StoredAttachment
	plan        ports.Plan
	now         time.Time
	// perRecipient delivers each recipient in its own job: the From domain tracks opens or clicks.
	perRecipient bool
}

// acceptMessage decides what one accepted send writes (SPEC §3 message table):
//   - scheduledAt in the future: status scheduled, event email.scheduled, no job (the scheduler promotes it,
//     sandbox included);
//   - sandbox: status sent, events email.queued then email.sent with providerResponse
//     `sandbox: not delivered`, no job;
//   - otherwise: status queued, event email.queued, one job per recipient domain.
//
// scheduledAt at or before now sends at once and is not stored. What it meters is sendUsage's decision.
func acceptMessage(a acceptance, newID func() string) ports.NewMessage {
	status := ports.StatusQueued
	var scheduledAt *time.Time
	if a.req.ScheduledAt != nil && a.req.ScheduledAt.After(a.now) {
		status = ports.StatusScheduled
		scheduledAt = a.req.ScheduledAt
	} else if a.req.Sandbox {
		status = ports.StatusSent
	}
	recipients := make([]ports.Recipient, len(a.recipients))
	for i, r := range a.recipients {
		r.Status = status
		recipients[i] = r
	}
	msg := ports.Message{
		ID:             a.messageID,
		OrganizationID: a.orgID,
		DomainID:       a.domainID,
		Status:         status,
		From:           a.req.From,
		Subject:        a.req.Subject,
		HTML:           a.req.HTML,
		Text:           a.req.Text,
		ReplyTo:        a.req.ReplyTo,
		Headers:        a.req.Headers,
		Tags:           a.req.Tags,
		Metadata:       a.req.Metadata,
		Sandbox:        a.req.Sandbox,
		ScheduledAt:    scheduledAt,
		IdempotencyKey: a.req.IdempotencyKey,
		CreatedAt:      a.now,
		Recipients:     recipients,
		Attachments:    a.attachments,
	}
	nm := ports.NewMessage{
		Message: msg,
		Usage:   sendUsage(a.plan, len(recipients), a.now),
	}
	switch status {
	case ports.StatusScheduled:
		nm.Events = []ports.Event{messageEvent(newID, a.orgID, a.messageID, ports.EventEmailScheduled, a.now, nil)}
	case ports.StatusSent:
		nm.Events = sandboxEvents(newID, a.orgID, a.messageID, a.now)
	default:
		nm.Events = []ports.Event{messageEvent(newID, a.orgID, a.messageID, ports.EventEmailQueued, a.now, nil)}
		if a.perRecipient {
			nm.Outbox = newJobsPerRecipient(a.orgID, a.messageID, recipients, a.now, newID)
		} else {
			nm.Outbox = newJobs(a.orgID, a.messageID, recipients, a.now, newID)
		}
	}
	return nm
}

// sandboxEvents are the queued and simulated sent events of a sandbox message. The sent event is one
// microsecond (PostgreSQL's resolution) later so the timeline's oldest-first order never depends on ids.
func sandboxEvents(newID func() string, orgID, messageID string, now time.Time) []ports.Event {
	resp := msgSandboxDelivered
	return []ports.Event{
		messageEvent(newID, orgID, messageID, ports.EventEmailQueued, now, nil),
		messageEvent(newID, orgID, messageID, ports.EventEmailSent, now.Add(time.Microsecond), &resp),
	}
}

// messageEvent is an event about the whole message.
func messageEvent(newID func() string, orgID, messageID, typ string, at time.Time, providerResponse *string) ports.Event {
	return ports.Event{
		ID:               newID(),
		OrganizationID:   orgID,
		Type:             typ,
		MessageID:        messageID,
		ProviderResponse: providerResponse,
		OccurredAt:       at,
	}
}
