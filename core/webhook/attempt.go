package webhook

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// NextAttempt decides a delivery's state after attempt number attempts (1 for the first) ended at now with
// resp or err, following SPEC §3 and §6:
//   - any 2xx response: delivered, DeliveredAt now (the body is ignored);
//   - a guard refusal (resp.Blocked): blocked, never retried, with the guard's reason (bounded) kept as
//     BlockedReason so the delivery says what to fix;
//   - anything else (another status, including 3xx since redirects are not followed; a network error; a
//     timeout): failed with NextRetryAt = now + schedule[attempts-1] while attempts < WebhookMaxAttempts,
//     dead from the WebhookMaxAttempts-th failure on.
//
// ResponseCode is the HTTP status, 0 when none arrived. DeliveryID and Lease are left to the caller.
func NextAttempt(attempts int, now time.Time, schedule []time.Duration, resp ports.WebhookResponse, err error) ports.WebhookAttempt {
	a := ports.WebhookAttempt{Attempts: attempts}
	if err == nil {
		a.ResponseCode = resp.StatusCode
	}
	switch {
	case err == nil && resp.Blocked:
		a.Status = ports.WebhookBlocked
		a.BlockedReason = boundedReason(resp.Reason)
	case err == nil && resp.StatusCode >= 200 && resp.StatusCode <= 299:
		a.Status = ports.WebhookDelivered
		a.DeliveredAt = &now
	case attempts >= ports.WebhookMaxAttempts || len(schedule) == 0:
		a.Status = ports.WebhookDead
	default:
		a.Status = ports.WebhookFailed
		next := now.Add(schedule[min(max(attempts, 1), len(schedule))-1])
		a.NextRetryAt = &next
	}
	return a
}

// apply returns d with an attempt's outcome, as the store records it.
func apply(d ports.WebhookDelivery, a ports.WebhookAttempt) ports.WebhookDelivery {
	d.Status = a.Status
	d.Attempts = a.Attempts
	d.ResponseCode = a.ResponseCode
	d.NextRetryAt = a.NextRetryAt
	d.DeliveredAt = a.DeliveredAt
	d.BlockedReason = a.BlockedReason
	return d
}

// maxReasonBytes bounds a stored refusal: the guard's sentences are a few hundred bytes, but they carry the
// endpoint's host name, which the tenant chose.
const maxReasonBytes = 512

// boundedReason keeps a refusal printable and short before it is stored, listed and logged: control
// characters become spaces and the text is cut at maxReasonBytes on a rune boundary. An empty reason (a
// sender that gave none) becomes a generic one, so a blocked delivery never says nothing.
func boundedReason(r string) string {
	r = strings.Map(func(c rune) rune {
		if unicode.IsControl(c) {
			return ' '
		}
		return c
	}, strings.ToValidUTF8(r, "?"))
	r = strings.TrimSpace(r)
	if r == "" {
		return "the endpoint's address is refused by the webhook address guard"
	}
	if len(r) > maxReasonBytes {
		cut := maxReasonBytes
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		r = r[:cut] + "…"
	}
	return r
}

// attempt sends one signed request for d to ep and decides the outcome. The dispatcher and TestEndpoint both
// use it, so a test exercises exactly what a real delivery does. It fails only when the endpoint's secret
// cannot be opened (a keyring that lost the master that sealed it); nothing is sent then.
func (s *Service) attempt(ctx context.Context, d ports.WebhookDelivery, ep ports.WebhookEndpoint) (ports.WebhookAttempt, error) {
	key, err := s.openSecret(ep)
	if err != nil {
		return ports.WebhookAttempt{}, err
	}
	req := ports.WebhookRequest{URL: ep.URL, Headers: Headers(d, key, s.now()), Body: d.Payload}
	sendCtx, cancel := context.WithTimeout(ctx, s.cfg.AttemptTimeout)
	resp, err := s.sender.Send(sendCtx, req)
	cancel()
	a := NextAttempt(d.Attempts+1, s.now(), s.cfg.Schedule, resp, err)
	a.DeliveryID = d.ID
	if a.Status == ports.WebhookBlocked {
		// A refusal is permanent and the owner has to act on it, so it is worth more than a debug line.
		s.logger.WarnContext(ctx, "webhook delivery blocked", "delivery", d.ID, "endpoint", ep.ID,
			"organization", d.OrganizationID, "reason", a.BlockedReason)
		return a, nil
	}
	s.logger.DebugContext(ctx, "webhook attempt", "delivery", d.ID, "endpoint", ep.ID, "attempt", a.Attempts,
		"status", a.Status, "code", a.ResponseCode, "error", err)
	return a, nil
}

// maxCachedSecrets bounds the opened-secret cache; past it the cache starts over, which costs one AES-GCM
// open per endpoint.
const maxCachedSecrets = 10000

// secretCache keeps opened signing secrets by endpoint id, so the dispatcher does not decrypt the same
// secret for every delivery. An entry is valid only for the sealed bytes it was opened from: a rotated
// secret has new sealed bytes and is opened afresh.
type secretCache struct {
	mu sync.Mutex
	m  map[string]openedSecret
}

type openedSecret struct {
	sealed []byte
	plain  string
}

// openSecret returns ep's plaintext secret, from the cache when its sealed bytes are unchanged.
func (s *Service) openSecret(ep ports.WebhookEndpoint) (string, error) {
	c := &s.secrets
	c.mu.Lock()
	o, ok := c.m[ep.ID]
	c.mu.Unlock()
	if ok && bytes.Equal(o.sealed, ep.Secret) {
		return o.plain, nil
	}
	plain, err := s.keyring.Open(ep.Secret, []byte(ep.ID))
	if err != nil {
		return "", fmt.Errorf("webhook: open secret of endpoint %s: %w", ep.ID, err)
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedSecrets {
		clear(c.m)
	}
	c.m[ep.ID] = openedSecret{sealed: bytes.Clone(ep.Secret), plain: string(plain)}
	c.mu.Unlock()
	return string(plain), nil
}
