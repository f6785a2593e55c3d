package inbound

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/postmill/postmill/core/poll"
	"github.com/postmill/postmill/core/webhook"
	"github.com/postmill/postmill/ports"
)

// Webhook routes. Each message a webhook route takes is posted to the route's destination as a signed
// request like SPEC §6's events: the same headers (x-service-event is email.received, x-service-event-id
// the message's email.received event id, x-service-delivery the received email's id), the same signature
// scheme keyed with the route's own signing secret (returned once, when the route is created), the same
// SSRF guard (a private destination is blocked at delivery, never retried) and the same retry schedule
// (5 attempts, then the message's status is failed). The body is documented in docs/inbound.md.

const (
	actionInterval = 100 * time.Millisecond
	actionBatch    = 50
	// actionParallel bounds the attempts of one round made at once.
	actionParallel = 8
	// actionLease is how long a claimed attempt may take before another process may claim it again; it
	// bounds one request (the sender's own timeout is shorter).
	actionLease = 2 * time.Minute
)

// routeSecretAAD binds a sealed route secret to its route, so a secret copied to another row does not open.
func routeSecretAAD(routeID string) []byte { return []byte("inbound-route:" + routeID) }

// newRouteSecret is a fresh signing secret in the webhook endpoints' form: "whsec_" and 64 hex digits.
func newRouteSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return webhook.SecretPrefix + hex.EncodeToString(b)
}

// webhookPayload is the body posted for a received email: SPEC §6's envelope with the parsed message under
// data.received_email. Attachments carry the API path to download them, never a storage key.
func webhookPayload(e ports.ReceivedEmail, eventID string) ([]byte, error) {
	type attachment struct {
		ID            string     `json:"id"`
		Filename      string     `json:"filename"`
		ContentType   string     `json:"contentType"`
		Size          int64      `json:"size"`
		Inline        bool       `json:"inline"`
		ContentID     string     `json:"contentId"`
		ScanStatus    string     `json:"scanStatus"`
		ScanSignature string     `json:"scanSignature"`
		ScannedAt     *time.Time `json:"scannedAt"`
		Downloadable  bool       `json:"downloadable"`
		DownloadPath  string     `json:"downloadPath"`
	}
	atts := make([]attachment, 0, len(e.Attachments))
	for _, a := range e.Attachments {
		atts = append(atts, attachment{ID: a.ID, Filename: a.Filename, ContentType: a.ContentType, Size: a.Size,
			Inline: a.Inline, ContentID: a.ContentID, ScanStatus: a.ScanStatus, ScanSignature: a.ScanSignature,
			ScannedAt: a.ScannedAt, Downloadable: a.Downloadable(),
			DownloadPath: "/v1/received-emails/" + e.ID + "/attachments/" + a.ID})
	}
	headers := map[string]any{}
	for k, v := range e.Headers {
		if len(v) == 1 {
			headers[k] = v[0]
		} else {
			headers[k] = v
		}
	}
	body := map[string]any{
		"id": eventID, "type": ports.EventEmailReceived, "created_at": e.ReceivedAt.UTC(),
		"data": map[string]any{
			"message_id": e.ID,
			"received_email": map[string]any{
				"id": e.ID, "to": e.To, "from": e.From, "headerFrom": e.HeaderFrom, "headerFromName": e.HeaderFromName,
				"toAddresses": e.ToAddresses, "ccAddresses": e.CcAddresses, "subject": e.Subject, "messageId": e.MessageID,
				"inReplyTo": e.InReplyTo, "references": e.References, "sizeBytes": e.SizeBytes, "spamStatus": e.SpamStatus,
				"scanStatus": e.ScanStatus, "routeId": e.RouteID, "routeAction": e.RouteAction, "receivedAt": e.ReceivedAt.UTC(),
				"text": e.Text, "html": e.HTML, "headers": headers, "attachments": atts,
				"rawPath": "/v1/received-emails/" + e.ID + "/raw",
			},
		},
	}
	return json.Marshal(body)
}

// RunActions attempts due webhook deliveries of received mail until ctx ends.
func (s *Service) RunActions(ctx context.Context) error {
	return poll.Run(ctx, s.deps.Logger, "inbound-actions", actionInterval, s.actionRound)
}

func (s *Service) actionRound(ctx context.Context) (bool, error) {
	due, err := s.deps.Store.ClaimDueActions(ctx, s.now(), actionLease, actionBatch)
	if err != nil {
		return false, err
	}
	// Attempts run side by side, so that one slow destination does not hold up the messages claimed with it.
	errs := make([]error, len(due))
	var wg sync.WaitGroup
	sem := make(chan struct{}, actionParallel)
	for i, d := range due {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = s.attempt(ctx, d)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	return len(due) == actionBatch, nil
}

// attempt makes one attempt of d and records it.
func (s *Service) attempt(ctx context.Context, d ports.DueAction) error {
	e := d.Email
	if d.Route.ID != "" && d.Route.Action == ports.ActionForwardEmail {
		return s.forward(ctx, d)
	}
	if d.Route.ID == "" || d.Route.Action != ports.ActionWebhook || s.deps.Sender == nil || s.deps.Keyring == nil {
		// The route was deleted (or this process cannot post): nothing can be done for the message.
		return s.deps.Store.RecordAction(ctx, e.ID, d.Lease, ports.ReceivedFailed, d.Attempts, nil, 0, "", "")
	}
	secret, err := s.deps.Keyring.Open(d.Route.Secret, routeSecretAAD(d.Route.ID))
	if err != nil {
		return fmt.Errorf("inbound: opening a route secret: %w", err)
	}
	body, err := webhookPayload(e, e.ActionEventID)
	if err != nil {
		return err
	}
	now := s.now()
	delivery := ports.WebhookDelivery{ID: e.ID, EventID: e.ActionEventID, EventType: ports.EventEmailReceived, Payload: body}
	resp, sendErr := s.deps.Sender.Send(ctx, ports.WebhookRequest{URL: d.Route.Destination,
		Headers: webhook.Headers(delivery, string(secret), now), Body: body})
	a := webhook.NextAttempt(d.Attempts+1, now, s.cfg.Schedule, resp, sendErr)
	status := ports.ReceivedPending
	switch a.Status {
	case ports.WebhookDelivered:
		status = ports.ReceivedDelivered
	case ports.WebhookBlocked:
		status = ports.ReceivedBlocked
	case ports.WebhookDead:
		status = ports.ReceivedFailed
	}
	attrs := []slog.Attr{slog.String("id", e.ID), slog.String("status", status), slog.Int("attempt", a.Attempts),
		slog.Int("response_code", a.ResponseCode)}
	if sendErr != nil {
		attrs = append(attrs, slog.String("error", sendErr.Error()))
	}
	s.deps.Logger.LogAttrs(ctx, slog.LevelInfo, "inbound webhook attempt", attrs...)
	return s.deps.Store.RecordAction(ctx, e.ID, d.Lease, status, a.Attempts, a.NextRetryAt, a.ResponseCode, a.BlockedReason, "")
}
