package sending

import (
	"context"
	"fmt"
	"strings"

	"github.com/postmill/postmill/ports"
)

// MaxBulk bounds one SendBulk call: a page of a broadcast's audience.
const MaxBulk = 1000

// BulkStore is what SendBulk needs of the message store besides ports.MessageStore to accept a page with
// one idempotency look-up and one transaction. The PostgreSQL store has it; with a store that does not,
// SendBulk looks keys up and inserts one message at a time (the same rules, more round trips).
type BulkStore interface {
	// MessagesByIdempotencyKeys returns, for each of keys already used in the organization, the message
	// holding it (ID and Status).
	MessagesByIdempotencyKeys(ctx context.Context, orgID string, keys []string) (map[string]ports.SendResult, error)
	// InsertMessages is InsertMessage for several sends of one organization, written and metered in their
	// order (an earlier send gets a limit's room first) by multi-row transactions; results align with nms.
	InsertMessages(ctx context.Context, nms []ports.NewMessage) ([]ports.Inserted, error)
}

// SendBulk accepts a page of emails of one organization — a broadcast's messages — by the rules of Send,
// with one look-up of each kind for the whole page instead of one per email: validation of each request,
// idempotency replay (one query for every key of the page), the From domain (once per domain), the
// organization (once), suppressions (one query for every recipient of the page), template and attachment
// checks, then the store's bulk insert (a few group-commit transactions per page, BulkStore) that writes
// every accepted message with its recipients, events and delivery jobs and meters the plan allowance and
// the warm-up cap in page order, so that when a limit runs out mid-page the earlier emails are the ones
// accepted and every later one is refused with Send's error.
//
// The delivery jobs it writes are bulk (ports.DeliveryJob.Bulk): the queue hands out transactional jobs
// before them. Results align with reqs by Index; each carries what Send would have answered for that
// email alone (a deduplicated replay, a validation error, `recipient suppressed: <address>`, 402, 429,
// 403 org_suspended, ...). The error is for the page as a whole: more than MaxBulk emails.
func (s *Service) SendBulk(ctx context.Context, orgID string, reqs []ports.SendRequest) ([]ports.BatchItemResult, error) {
	if len(reqs) > MaxBulk {
		return nil, ports.ValidationError(ports.FieldViolation{Path: "emails", Message: fmt.Sprintf("must contain at most %d emails", MaxBulk)})
	}
	results := make([]ports.BatchItemResult, len(reqs))
	type item struct {
		i          int
		req        ports.SendRequest
		recipients []ports.Recipient
		domain     ports.Domain
	}
	live := make([]*item, 0, len(reqs))
	for i, r := range reqs {
		results[i].Index = i
		r, violations := validateSend(r)
		if len(violations) > 0 {
			results[i].Err = ports.ValidationError(violations...)
			continue
		}
		live = append(live, &item{i: i, req: r})
	}
	keep := func(ok func(*item) bool) {
		n := 0
		for _, it := range live {
			if ok(it) {
				live[n] = it
				n++
			}
		}
		live = live[:n]
	}
	failAll := func(err error) {
		for _, it := range live {
			results[it.i].Err = err
		}
		live = nil
	}

	// Idempotency first, as in Send: a replay answers with the original message before any other check.
	var keys []string
	for _, it := range live {
		if it.req.IdempotencyKey != "" {
			keys = append(keys, it.req.IdempotencyKey)
		}
	}
	if len(keys) > 0 {
		used, err := s.messagesByKeys(ctx, orgID, keys)
		if err != nil {
			failAll(fmt.Errorf("sending: idempotency keys: %w", err))
		}
		keep(func(it *item) bool {
			r, ok := used[it.req.IdempotencyKey]
			if ok && it.req.IdempotencyKey != "" {
				results[it.i].Result = ports.SendResult{ID: r.ID, Status: r.Status, Deduped: true}
				return false
			}
			return true
		})
	}
	if len(live) == 0 {
		return results, nil
	}

	domains := map[string]ports.Domain{}
	domainErrs := map[string]error{}
	keep(func(it *item) bool {
		name := addressDomain(senderAddress(it.req.From))
		d, ok := domains[name]
		err := domainErrs[name]
		if !ok && err == nil {
			if d, err = s.sendingDomain(ctx, orgID, name); err != nil {
				domainErrs[name] = err
			} else {
				domains[name] = d
			}
		}
		if err != nil {
			results[it.i].Err = err
			return false
		}
		it.domain = d
		return true
	})
	if len(live) == 0 {
		return results, nil
	}
	org, err := s.organization(ctx, orgID)
	if err != nil {
		failAll(err)
		return results, nil
	}
	if org.Paused {
		failAll(orgPausedError())
		return results, nil
	}

	var addrs []string
	for _, it := range live {
		it.recipients = dedupeRecipients(it.req.To, it.req.Cc, it.req.Bcc)
		for _, r := range it.recipients {
			addrs = append(addrs, strings.ToLower(r.Address))
		}
	}
	suppressed, err := s.messages.SuppressedAmong(ctx, orgID, addrs)
	if err != nil {
		failAll(fmt.Errorf("sending: suppressions: %w", err))
		return results, nil
	}
	keep(func(it *item) bool {
		for _, r := range it.recipients {
			if suppressed[strings.ToLower(r.Address)] {
				results[it.i].Err = ports.RecipientSuppressed(r.Address)
				return false
			}
		}
		return true
	})

	now := s.now()
	nms := make([]ports.NewMessage, 0, len(live))
	stored := make([][]ports.StoredAttachment, 0, len(live))
	keep(func(it *item) bool {
		req := it.req
		var err error
		if req.Template != nil {
			if req, err = s.renderTemplate(ctx, orgID, req); err != nil {
				results[it.i].Err = err
				return false
			}
		}
		if err := s.scanAttachments(ctx, req.Attachments); err != nil {
			results[it.i].Err = err
			return false
		}
		messageID := newID()
		for i := range it.recipients {
			it.recipients[i].ID = newID()
		}
		atts, err := s.putAttachments(ctx, orgID, messageID, req.Attachments)
		if err != nil {
			results[it.i].Err = err
			return false
		}
		nm := acceptMessage(acceptance{
			messageID:    messageID,
			orgID:        orgID,
			domainID:     it.domain.ID,
			req:          req,
			recipients:   it.recipients,
			attachments:  atts,
			plan:         org.Plan,
			now:          now,
			perRecipient: tracked(it.domain, req.HTML),
		}, newID)
		for j := range nm.Outbox {
			nm.Outbox[j].Bulk = true
		}
		nms = append(nms, nm)
		stored = append(stored, atts)
		return true
	})
	if len(live) == 0 {
		return results, nil
	}

	ins, errs := s.insertMessages(ctx, nms)
	for k, it := range live {
		if errs[k] != nil || ins[k].Existing || ins[k].OverLimit != nil {
			s.deleteBlobs(ctx, stored[k])
		}
		switch {
		case errs[k] != nil:
			results[it.i].Err = fmt.Errorf("sending: insert message: %w", errs[k])
		case ins[k].OverLimit != nil:
			results[it.i].Err = overLimitError(*ins[k].OverLimit)
		default:
			results[it.i].Result = ports.SendResult{ID: ins[k].ID, Status: ins[k].Status, Deduped: ins[k].Existing}
		}
	}
	return results, nil
}

// messagesByKeys looks the keys up in one query when the store can, else one at a time.
func (s *Service) messagesByKeys(ctx context.Context, orgID string, keys []string) (map[string]ports.SendResult, error) {
	if b, ok := s.messages.(BulkStore); ok {
		return b.MessagesByIdempotencyKeys(ctx, orgID, keys)
	}
	out := map[string]ports.SendResult{}
	for _, k := range keys {
		id, status, err := s.messages.MessageByIdempotencyKey(ctx, orgID, k)
		if ports.ErrorCode(err) == ports.CodeNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[k] = ports.SendResult{ID: id, Status: status}
	}
	return out, nil
}

// insertMessages writes nms in one transaction when the store can (a failure is every send's), else one
// at a time in order. Results and errors align with nms.
func (s *Service) insertMessages(ctx context.Context, nms []ports.NewMessage) ([]ports.Inserted, []error) {
	out, errs := make([]ports.Inserted, len(nms)), make([]error, len(nms))
	if b, ok := s.messages.(BulkStore); ok {
		ins, err := b.InsertMessages(ctx, nms)
		if err == nil && len(ins) != len(nms) {
			err = fmt.Errorf("the store answered %d of %d sends", len(ins), len(nms))
		}
		for i := range nms {
			if err != nil {
				errs[i] = err
			} else {
				out[i] = ins[i]
			}
		}
		return out, errs
	}
	for i, nm := range nms {
		out[i], errs[i] = s.messages.InsertMessage(ctx, nm)
	}
	return out, errs
}
