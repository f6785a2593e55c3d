package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/postmill/postmill/ports"
)

// Header names and fixed values of every webhook request (SPEC §6).
const (
	HeaderContentType     = "content-type"
	HeaderUserAgent       = "user-agent"
	HeaderEvent           = "x-service-event"
	HeaderEventID         = "x-service-event-id"
	HeaderDelivery        = "x-service-delivery"
	HeaderSignature       = "x-service-signature"
	HeaderOriginalEventID = "x-service-original-event-id"

	// ContentType is the body's media type.
	ContentType = "application/json"
	// UserAgent names the sender, so receivers can route or allow-list webhook traffic.
	UserAgent = "Service-Webhooks/1"
)

// SecretPrefix starts every signing secret, so a leaked one is recognisable as a webhook secret (secret
// scanners key on such prefixes). MaskedSecret is what listings show instead.
const (
	SecretPrefix = "whsec_"
	MaskedSecret = SecretPrefix + "***"
)

// secretBytes is the secret's entropy: 256 bits, the HMAC-SHA256 key size (RFC 2104 §3 recommends a key
// at least as long as the hash output).
const secretBytes = 32

// newSecret returns a fresh signing secret: "whsec_" and 64 lower-case hex digits.
func newSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand since Go 1.24)
	return SecretPrefix + hex.EncodeToString(b)
}

// Sign returns the x-service-signature value for a body sent at unix time t: "t=<t>,v1=<hex>" where v1 is
// HMAC-SHA256 keyed with the whole secret string over "<t>.<event id>.<raw body>" (SPEC §6). Putting t and
// the event id under the MAC lets receivers reject replays of old requests and requests whose event id
// header was swapped.
func Sign(secret string, t int64, eventID string, body []byte) string {
	ts := strconv.FormatInt(t, 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write([]byte(eventID))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Headers returns the headers of one attempt of d signed at now. The signature's timestamp is the attempt's,
// not the event's, so a retry hours later still passes the receiver's freshness check.
// x-service-original-event-id appears only on replays.
func Headers(d ports.WebhookDelivery, secret string, now time.Time) map[string]string {
	h := map[string]string{
		HeaderContentType: ContentType,
		HeaderUserAgent:   UserAgent,
		HeaderEvent:       d.EventType,
		HeaderEventID:     d.EventID,
		HeaderDelivery:    d.ID,
		HeaderSignature:   Sign(secret, now.Unix(), d.EventID, d.Payload),
	}
	if d.OriginalEventID != "" {
		h[HeaderOriginalEventID] = d.OriginalEventID
	}
	return h
}
