package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

const testSecret = "whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestSignKnownVector(t *testing.T) {
	t.Parallel()
	// Computed outside Go (Python's hmac module and openssl dgst -hmac agree) from SPEC §6's formula:
	// hex(HMAC_SHA256(secret, "<t>.<event_id>.<raw_body>")).
	const eventID = "0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b"
	body := []byte(`{"id":"0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b","type":"email.delivered"}`)
	got := Sign(testSecret, 1700000000, eventID, body)
	want := "t=1700000000,v1=d5f4d98b7eef3fab127ce641a69e867eac3c0b13b7ba3683ebc30a8d083217f2"
	if got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

// verify is a receiver's check, written from the spec's description rather than from Sign.
func verify(tb testing.TB, header, secret, eventID string, body []byte) (int64, bool) {
	tb.Helper()
	ts, sig, ok := strings.Cut(header, ",")
	if !ok || !strings.HasPrefix(ts, "t=") || !strings.HasPrefix(sig, "v1=") {
		tb.Fatalf("signature header %q is not t=<t>,v1=<hex>", header)
	}
	t, err := strconv.ParseInt(ts[2:], 10, 64)
	if err != nil {
		tb.Fatalf("timestamp %q: %v", ts, err)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts[2:] + "." + eventID + "." + string(body)))
	got, err := hex.DecodeString(sig[3:])
	if err != nil {
		tb.Fatalf("v1 %q: %v", sig, err)
	}
	return t, hmac.Equal(got, mac.Sum(nil))
}

func TestSignVerifies(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"e1","type":"email.sent","created_at":"2026-04-01T09:00:00Z","data":{"message_id":null}}`)
	tests := []struct {
		name    string
		secret  string
		eventID string
		body    []byte
		want    bool
	}{
		{"same inputs", testSecret, "e1", body, true},
		{"other secret", testSecret[:len(testSecret)-1] + "0", "e1", body, false},
		{"other event id", testSecret, "e2", body, false},
		{"altered body", testSecret, "e1", []byte(strings.Replace(string(body), "email.sent", "email.bounced", 1)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			header := Sign(testSecret, 1775034000, "e1", body)
			if !regexp.MustCompile(`^t=1775034000,v1=[0-9a-f]{64}$`).MatchString(header) {
				t.Fatalf("header = %q", header)
			}
			ts, ok := verify(t, header, tt.secret, tt.eventID, tt.body)
			if ts != 1775034000 || ok != tt.want {
				t.Fatalf("verify = %d, %v; want 1775034000, %v", ts, ok, tt.want)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 4, 1, 9, 0, 0, 500_000_000, time.UTC)
	original := ports.WebhookDelivery{
		ID: "del-1", EndpointID: "ep-1", EventID: "0190a3c4-0000-7000-8000-000000000001", EventType: ports.EventEmailBounced,
		Payload: []byte(`{"id":"0190a3c4-0000-7000-8000-000000000001"}`),
	}
	replay := original
	replay.ID, replay.EventID, replay.OriginalEventID = "del-2", "evt_replay_x", original.EventID
	replay.Payload = []byte(`{"id":"evt_replay_x"}`)
	tests := []struct {
		name string
		d    ports.WebhookDelivery
		want map[string]string
	}{
		{"original", original, map[string]string{
			"content-type":       "application/json",
			"user-agent":         "Service-Webhooks/1",
			"x-service-event":    "email.bounced",
			"x-service-event-id": original.EventID,
			"x-service-delivery": "del-1",
		}},
		{"replay names the original event", replay, map[string]string{
			"content-type":                "application/json",
			"user-agent":                  "Service-Webhooks/1",
			"x-service-event":             "email.bounced",
			"x-service-event-id":          "evt_replay_x",
			"x-service-delivery":          "del-2",
			"x-service-original-event-id": original.EventID,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := Headers(tt.d, testSecret, now)
			sig := h["x-service-signature"]
			delete(h, "x-service-signature")
			if !maps.Equal(h, tt.want) {
				t.Fatalf("headers = %v, want %v", h, tt.want)
			}
			ts, ok := verify(t, sig, testSecret, tt.d.EventID, tt.d.Payload)
			if !ok || ts != now.Unix() {
				t.Fatalf("signature %q: t = %d (want %d), valid = %v", sig, ts, now.Unix(), ok)
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	format := regexp.MustCompile(`^whsec_[0-9a-f]{64}$`)
	seen := make(map[string]bool)
	for range 100 {
		s := newSecret()
		if !format.MatchString(s) {
			t.Fatalf("secret %q does not match %s", s, format)
		}
		if seen[s] {
			t.Fatalf("secret %q repeated", s)
		}
		seen[s] = true
	}
	if MaskedSecret != "whsec_***" {
		t.Fatalf("MaskedSecret = %q", MaskedSecret)
	}
}
