package inbound

import (
	"context"
	"net/mail"
	"strconv"
	"strings"

	"github.com/postmill/postmill/core/webhook"
	"github.com/postmill/postmill/ports"
)

// Forwarding. A forward_email route re-sends the message through the ordinary send path (POST /v1/emails's
// use case: suppressions, metering, DKIM signing, delivery) from a verified sending domain of the
// organization, to the route's destination. The original sender is kept as Reply-To, not rewritten with
// SRS: SRS would fix only the envelope, and a header From of the original sender's domain, signed by
// Postmill, would fail DMARC alignment at the receiver; from the organization's own domain the forward is
// SPF-, DKIM- and DMARC-aligned, and replying still reaches the original sender. The send's idempotency key
// is the received email's id, so a retried forward is sent once.

// forwardLocalPart is the mailbox a forward is sent from, at the organization's sending domain.
const forwardLocalPart = "forwarding"

// Loop bounds. A forward is a new message, so the trace fields of the mail it forwards do not travel with
// it; it carries forwardHopsHeader instead, one more than the mail it forwards had, and mail that already
// went through maxForwardHops forwards, or that carries maxReceived Received fields (RFC 5321 §6.3: a
// loop is suspected past a bound; Postfix's hopcount_limit is 50), is not forwarded again. Without it a
// route forwarding to its own address, or two organizations forwarding to each other, sent a metered,
// signed message every tenth of a second until a field grew too long.
const (
	forwardHopsHeader = "X-Postmill-Forward-Hops"
	maxForwardHops    = 10
	maxReceived       = 50
)

// forwardHops returns the hop count e carries, and how many Received fields it has.
func forwardHops(e ports.ReceivedEmail) (hops, received int) {
	for k, vs := range e.Headers {
		switch {
		case strings.EqualFold(k, forwardHopsHeader) && len(vs) > 0:
			for _, v := range vs {
				if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > hops {
					hops = n
				}
			}
		case strings.EqualFold(k, "Received"):
			received += len(vs)
		}
	}
	return hops, received
}

// permanentSendError reports a refusal that retrying cannot change.
func permanentSendError(err error) bool {
	switch ports.ErrorCode(err) {
	case ports.CodeInvalidArgument, ports.CodeNotFound, ports.CodeFailedPrecondition, ports.CodePermissionDenied,
		ports.CodePaymentRequired, ports.CodeAlreadyExists:
		return true
	}
	return false
}

// forward makes one attempt at re-sending d's message and records it: forwardStatus sent (status
// delivered), failed (status failed) on a permanent refusal or the last attempt, pending with a retry
// otherwise.
func (s *Service) forward(ctx context.Context, d ports.DueAction) error {
	e := d.Email
	record := func(status, fwd string, attempts int, err error) error {
		a := webhook.NextAttempt(attempts, s.now(), s.cfg.Schedule, ports.WebhookResponse{}, err)
		next := a.NextRetryAt
		if status != ports.ReceivedPending {
			next = nil
		} else if next == nil {
			status, fwd = ports.ReceivedFailed, ports.ForwardFailed
		}
		return s.deps.Store.RecordAction(ctx, e.ID, d.Lease, status, attempts, next, 0, "", fwd)
	}
	attempts := d.Attempts + 1
	if s.deps.Emails == nil || s.deps.Domains == nil {
		return record(ports.ReceivedFailed, ports.ForwardFailed, attempts, nil)
	}
	hops, received := forwardHops(e)
	if hops >= maxForwardHops || received >= maxReceived {
		s.deps.Logger.WarnContext(ctx, "inbound forward refused: mail loop suspected", "id", e.ID,
			"forward_hops", hops, "received_fields", received)
		return record(ports.ReceivedFailed, ports.ForwardFailed, attempts, nil)
	}
	req, err := s.forwardRequest(ctx, e, d.Route.Destination, hops)
	if err == nil {
		_, err = s.deps.Emails.Send(ctx, e.OrganizationID, req)
	}
	switch {
	case err == nil:
		return record(ports.ReceivedDelivered, ports.ForwardSent, attempts, nil)
	case permanentSendError(err):
		s.deps.Logger.InfoContext(ctx, "inbound forward refused", "id", e.ID, "error", err.Error())
		return record(ports.ReceivedFailed, ports.ForwardFailed, attempts, nil)
	default:
		s.deps.Logger.WarnContext(ctx, "inbound forward failed", "id", e.ID, "error", err.Error())
		return record(ports.ReceivedPending, "", attempts, err)
	}
}

// forwardRequest builds the send of a forward: from forwarding@<a verified sending domain>, named after the
// original sender, Reply-To the original sender, with the bodies and the clean attachments, and one hop
// more than the hops e carries (forwardHops).
func (s *Service) forwardRequest(ctx context.Context, e ports.ReceivedEmail, to string, hops int) (ports.SendRequest, error) {
	domains, err := s.deps.Domains.ListDomains(ctx, e.OrganizationID)
	if err != nil {
		return ports.SendRequest{}, err
	}
	sending := ""
	for _, d := range domains {
		if d.Status == ports.DomainVerified {
			sending = d.Name
			break
		}
	}
	if sending == "" {
		return ports.SendRequest{}, ports.Errorf(ports.CodeFailedPrecondition, "no verified sending domain to forward from")
	}
	original := e.HeaderFrom
	if original == "" {
		original = e.From
	}
	name := e.HeaderFromName
	if name == "" {
		name = original
	}
	req := ports.SendRequest{
		From:           (&mail.Address{Name: name + " via " + sending, Address: forwardLocalPart + "@" + sending}).String(),
		To:             []string{to},
		Subject:        e.Subject,
		Text:           e.Text,
		HTML:           e.HTML,
		Headers:        map[string]string{"X-Postmill-Forwarded-For": e.To, forwardHopsHeader: strconv.Itoa(hops + 1)},
		IdempotencyKey: "inbound-forward:" + e.ID,
	}
	if original != "" && !strings.ContainsAny(original, "\r\n") {
		req.ReplyTo = original
	}
	if req.Text == "" && req.HTML == "" {
		req.Text = "(no body)"
	}
	var raw []byte
	for _, a := range e.Attachments {
		if !a.Downloadable() {
			continue
		}
		data, err := s.attachmentBytes(ctx, e, a, &raw)
		if err != nil {
			return ports.SendRequest{}, err
		}
		filename := a.Filename
		if filename == "" {
			filename = "attachment"
		}
		req.Attachments = append(req.Attachments, ports.Attachment{Filename: filename, ContentType: a.ContentType,
			Content: data, Inline: a.Inline, ContentID: a.ContentID})
	}
	return req, nil
}
