package webhook

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

func TestPayload(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 4, 1, 9, 30, 15, 123456000, time.FixedZone("CEST", 2*3600))
	resp := "250 2.0.0 OK <queued as 4F2>"
	tests := []struct {
		name string
		ev   ports.Event
		want string
	}{
		{"message event without provider response",
			ports.Event{ID: "e1", Type: ports.EventEmailQueued, MessageID: "m1", OccurredAt: at},
			`{"id":"e1","type":"email.queued","created_at":"2026-04-01T07:30:15.123456Z","data":{"message_id":"m1"}}`},
		{"recipient event with provider response, unescaped",
			ports.Event{ID: "e2", Type: ports.EventEmailDelivered, MessageID: "m1", RecipientID: "r1", ProviderResponse: &resp, OccurredAt: at},
			`{"id":"e2","type":"email.delivered","created_at":"2026-04-01T07:30:15.123456Z","data":{"message_id":"m1","provider_response":"250 2.0.0 OK <queued as 4F2>","recipient_id":"r1"}}`},
		{"empty provider response is still a response",
			ports.Event{ID: "e3", Type: ports.EventEmailBounced, MessageID: "m1", ProviderResponse: new(string), OccurredAt: at},
			`{"id":"e3","type":"email.bounced","created_at":"2026-04-01T07:30:15.123456Z","data":{"message_id":"m1","provider_response":""}}`},
		{"bounce carries its class after the provider response",
			ports.Event{ID: "e9", Type: ports.EventEmailBounced, MessageID: "m1", RecipientID: "r1", ProviderResponse: &resp,
				BounceClass: ports.BounceClassSpamBlock, OccurredAt: at},
			`{"id":"e9","type":"email.bounced","created_at":"2026-04-01T07:30:15.123456Z","data":{"message_id":"m1","provider_response":"250 2.0.0 OK <queued as 4F2>","bounce_class":"spam_block","recipient_id":"r1"}}`},
		{"domain event has a null message id",
			ports.Event{ID: "e4", Type: ports.EventDomainVerified, DomainID: "d1", OccurredAt: at},
			`{"id":"e4","type":"domain.verified","created_at":"2026-04-01T07:30:15.123456Z","data":{"message_id":null,"domain_id":"d1"}}`},
		{"click carries the recipient, the URL unescaped and the link id",
			ports.Event{ID: "e6", Type: ports.EventEmailClicked, MessageID: "m1", RecipientID: "r1",
				URL: "https://shop.test/?a=1&b=<2>", LinkID: "3", OccurredAt: at},
			`{"id":"e6","type":"email.clicked","created_at":"2026-04-01T07:30:15.123456Z","data":{"message_id":"m1","recipient_id":"r1","url":"https://shop.test/?a=1&b=<2>","link_id":"3"}}`},
		{"the first link's id is \"0\", not omitted",
			ports.Event{ID: "e7", Type: ports.EventEmailClicked, MessageID: "m1", RecipientID: "r1",
				URL: "https://shop.test/", LinkID: "0", OccurredAt: at},
			`{"id":"e7","type":"email.clicked","created_at":"2026-04-01T07:30:15.123456Z","data":{"message_id":"m1","recipient_id":"r1","url":"https://shop.test/","link_id":"0"}}`},
		{"open carries the recipient only",
			ports.Event{ID: "e8", Type: ports.EventEmailOpened, MessageID: "m1", RecipientID: "r1", OccurredAt: at},
			`{"id":"e8","type":"email.opened","created_at":"2026-04-01T07:30:15.123456Z","data":{"message_id":"m1","recipient_id":"r1"}}`},
		{"whole seconds",
			ports.Event{ID: "e5", Type: ports.EventEmailSent, MessageID: "m1", OccurredAt: time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)},
			`{"id":"e5","type":"email.sent","created_at":"2026-04-01T09:00:00Z","data":{"message_id":"m1"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := string(Payload(tt.ev)); got != tt.want {
				t.Fatalf("Payload =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestTestPayload(t *testing.T) {
	t.Parallel()
	got := string(testPayload("evt_test_1", time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)))
	want := `{"id":"evt_test_1","type":"email.delivered","created_at":"2026-04-01T09:00:00Z","data":{"test":true,"message_id":null}}`
	if got != want {
		t.Fatalf("testPayload =\n%s\nwant\n%s", got, want)
	}
}

func TestReplayPayload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		original string
		want     string
		wantErr  bool
	}{
		{"message event keeps created_at and data",
			`{"id":"e2","type":"email.delivered","created_at":"2026-04-01T07:30:15.123456Z","data":{"message_id":"m1","provider_response":"250 <ok>","recipient_id":"r1"}}`,
			`{"id":"evt_replay_n","type":"email.delivered","created_at":"2026-04-01T07:30:15.123456Z","data":{"message_id":"m1","provider_response":"250 <ok>","recipient_id":"r1","original_event_id":"orig"}}`, false},
		{"created_at is kept byte for byte, not reformatted",
			`{"id":"e1","type":"email.sent","created_at":"2026-04-01T09:00:00.100Z","data":{"message_id":"m1"}}`,
			`{"id":"evt_replay_n","type":"email.sent","created_at":"2026-04-01T09:00:00.100Z","data":{"message_id":"m1","original_event_id":"orig"}}`, false},
		{"domain event",
			`{"id":"e4","type":"domain.failed","created_at":"2026-04-01T09:00:00Z","data":{"message_id":null,"domain_id":"d1"}}`,
			`{"id":"evt_replay_n","type":"domain.failed","created_at":"2026-04-01T09:00:00Z","data":{"message_id":null,"domain_id":"d1","original_event_id":"orig"}}`, false},
		{"test delivery stays a test",
			`{"id":"evt_test_1","type":"email.delivered","created_at":"2026-04-01T09:00:00Z","data":{"test":true,"message_id":null}}`,
			`{"id":"evt_replay_n","type":"email.delivered","created_at":"2026-04-01T09:00:00Z","data":{"test":true,"message_id":null,"original_event_id":"orig"}}`, false},
		{"click fields survive",
			`{"id":"e6","type":"email.clicked","created_at":"2026-04-01T09:00:00Z","data":{"message_id":"m1","recipient_id":"r1","url":"https://x.test/?a=1&b=2","link_id":"l1"}}`,
			`{"id":"evt_replay_n","type":"email.clicked","created_at":"2026-04-01T09:00:00Z","data":{"message_id":"m1","recipient_id":"r1","url":"https://x.test/?a=1&b=2","link_id":"l1","original_event_id":"orig"}}`, false},
		{"replay of a replay is re-pointed",
			`{"id":"evt_replay_a","type":"email.sent","created_at":"2026-04-01T09:00:00Z","data":{"message_id":"m1","original_event_id":"orig"}}`,
			`{"id":"evt_replay_n","type":"email.sent","created_at":"2026-04-01T09:00:00Z","data":{"message_id":"m1","original_event_id":"orig"}}`, false},
		{"corrupt stored body", `{"id":`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := replayPayload([]byte(tt.original), "evt_replay_n", "orig")
			if (err != nil) != tt.wantErr {
				t.Fatalf("replayPayload err = %v, wantErr %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Fatalf("replayPayload =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestReplayOfPayload checks the round trip the replay path relies on: whatever Payload writes, a replay
// reproduces with only id and original_event_id changed.
func TestReplayOfPayload(t *testing.T) {
	t.Parallel()
	resp := "550 5.1.1 <a@x.test>: unknown"
	at := time.Date(2026, 4, 1, 9, 0, 0, 999_999_000, time.UTC)
	for _, ev := range []ports.Event{
		{ID: "e1", Type: ports.EventEmailBounced, MessageID: "m1", RecipientID: "r1", ProviderResponse: &resp,
			BounceClass: ports.BounceClassBadMailbox, OccurredAt: at},
		{ID: "e2", Type: ports.EventEmailClicked, MessageID: "m1", RecipientID: "r1", URL: "https://x.test/?a=1&b=2", LinkID: "0", OccurredAt: at},
	} {
		replayed, err := replayPayload(Payload(ev), "evt_replay_n", ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		var orig, got map[string]any
		if err := json.Unmarshal(Payload(ev), &orig); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(replayed, &got); err != nil {
			t.Fatal(err)
		}
		orig["id"] = "evt_replay_n"
		orig["data"].(map[string]any)["original_event_id"] = ev.ID
		if o, g := mustJSON(t, orig), mustJSON(t, got); o != g {
			t.Fatalf("replay = %s, want %s", g, o)
		}
	}
}

func mustJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}
