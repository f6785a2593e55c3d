package rpc_test

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/ports"
)

// Secret material of an endpoint as the core holds it: the sealed secret must never cross the hop, the
// plaintext only in the create and rotate answers.
var (
	sealedSecret = []byte("\x01sealed-whsec-ciphertext\x00\xff\xfe-aad-bound-to-endpoint")
	plainSecret  = "whsec_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
)

// fullEndpoint sets every field of an endpoint, the sealed secret included.
func fullEndpoint() ports.WebhookEndpoint {
	return ports.WebhookEndpoint{
		ID: "we1", OrganizationID: "org1", URL: "https://hooks.example.com/postmill?x=1",
		Enabled: true, EventTypes: []string{ports.EventEmailDelivered, ports.EventDomainVerified},
		Secret: sealedSecret, CreatedAt: t0,
	}
}

// withoutSealedSecret is an endpoint as the edge receives it: the sealed secret stays in the core.
func withoutSealedSecret(e ports.WebhookEndpoint) ports.WebhookEndpoint {
	e.Secret = nil
	return e
}

func fullCreatedEndpoint() ports.CreatedWebhookEndpoint {
	return ports.CreatedWebhookEndpoint{WebhookEndpoint: fullEndpoint(), PlainSecret: plainSecret}
}

// fullWebhookDelivery sets every field of a delivery: a failed replay waiting for its next attempt that
// had once been delivered and blocked, which no real row would be, but every field crosses.
func fullWebhookDelivery() ports.WebhookDelivery {
	return ports.WebhookDelivery{
		ID: "wd1", OrganizationID: "org1", EndpointID: "we1",
		EventID: "evt_replay_0190b9a2-0000-7000-8000-000000000001", EventType: ports.EventEmailBounced,
		Status: ports.WebhookFailed, Attempts: ports.WebhookMaxAttempts - 1, ResponseCode: 503,
		NextRetryAt: ptr(t2), DeliveredAt: ptr(t1), CreatedAt: t0,
		Payload:         []byte(`{"id":"evt_replay_0190b9a2","type":"email.bounced","created_at":"2026-11-21T09:36:12Z","data":{"message_id":null,"original_event_id":"0190b9a2"}}`),
		OriginalEventID: "0190b9a2-0000-7000-8000-0000000000e1",
		BlockedReason:   "hooks.example.com resolves to 10.0.0.5, a private address (10.0.0.0/8, RFC 1918) — ünïcödé",
	}
}

// TestWebhookFixturesComplete fails when a ports type of the webhook API grows a field that the full
// fixtures (and so the round trips that use them) leave unset.
func TestWebhookFixturesComplete(t *testing.T) {
	t.Parallel()
	for _, v := range []any{fullEndpoint(), fullCreatedEndpoint(), fullWebhookDelivery()} {
		mustSetEveryField(t, v)
	}
}

func webhookRoundTrips() []roundTrip {
	var trips []roundTrip
	add := func(r roundTrip) { trips = append(trips, r) }

	bareEndpoint := ports.WebhookEndpoint{ID: "we2"} // nil event types, unset time, no secret
	emptyEndpoint := ports.WebhookEndpoint{ID: "we3", EventTypes: []string{}, Secret: []byte{}}
	wantCreated := ports.CreatedWebhookEndpoint{WebhookEndpoint: withoutSealedSecret(fullEndpoint()), PlainSecret: plainSecret}

	for name, types := range map[string][]string{
		"event types": {ports.EventEmailQueued, "email.unknown", ""},
		"nil types":   nil,
		"empty types": {},
	} {
		add(roundTrip{
			name:   "CreateEndpoint/" + name,
			answer: func(f *fakeCore) { f.created = fullCreatedEndpoint() },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Webhooks.CreateEndpoint(ctx, "org1", "HTTP://Hooks.Example.com:8443/ä?q=1#frag", types)
			},
			want:   wantCreated,
			method: "CreateEndpoint",
			args:   []any{"org1", "HTTP://Hooks.Example.com:8443/ä?q=1#frag", types},
		})
	}
	add(roundTrip{
		name:   "CreateEndpoint/zero answer",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Webhooks.CreateEndpoint(ctx, "", "", nil)
		},
		want:   ports.CreatedWebhookEndpoint{},
		method: "CreateEndpoint",
		args:   []any{"", "", []string(nil)},
	})
	for name, endpoints := range map[string][]ports.WebhookEndpoint{
		"set":   {fullEndpoint(), bareEndpoint, emptyEndpoint},
		"empty": {},
		"nil":   nil,
	} {
		want := []ports.WebhookEndpoint(nil)
		if endpoints != nil {
			want = []ports.WebhookEndpoint{}
			for _, e := range endpoints {
				want = append(want, withoutSealedSecret(e))
			}
		}
		add(roundTrip{
			name:   "ListEndpoints/" + name,
			answer: func(f *fakeCore) { f.endpoints = endpoints },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Webhooks.ListEndpoints(ctx, "org1")
			},
			want:   want,
			method: "ListEndpoints",
			args:   []any{"org1"},
		})
		q := ports.PageQuery{Limit: 3}
		add(roundTrip{
			name: "ListEndpointsPage/" + name,
			answer: func(f *fakeCore) {
				f.endpointPage = ports.Page[ports.WebhookEndpoint]{Data: endpoints, NextCursor: "n"}
			},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Webhooks.ListEndpointsPage(ctx, "org1", q)
			},
			want:   ports.Page[ports.WebhookEndpoint]{Data: want, NextCursor: "n"},
			method: "ListEndpointsPage",
			args:   []any{"org1", q},
		})
	}
	add(roundTrip{
		name:   "DeleteEndpoint",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Webhooks.DeleteEndpoint(ctx, "org1", "we1")
		},
		want:   nil,
		method: "DeleteEndpoint",
		args:   []any{"org1", "we1"},
	})

	// Deliveries: every field; nothing set; an empty payload, which must not come back as nil.
	emptyPayload := ports.WebhookDelivery{ID: "wd2", Status: ports.WebhookBlocked, Payload: []byte{}}
	for name, d := range map[string]ports.WebhookDelivery{
		"full": fullWebhookDelivery(), "zero": {}, "empty payload": emptyPayload,
	} {
		add(roundTrip{
			name:   "TestEndpoint/" + name,
			answer: func(f *fakeCore) { f.delivery = d },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Webhooks.TestEndpoint(ctx, "org1", "we1")
			},
			want:   d,
			method: "TestEndpoint",
			args:   []any{"org1", "we1"},
		})
		add(roundTrip{
			name:   "Replay/" + name,
			answer: func(f *fakeCore) { f.delivery = d },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Webhooks.Replay(ctx, "org1", "we1", "wd1")
			},
			want:   d,
			method: "Replay",
			args:   []any{"org1", "we1", "wd1"},
		})
	}
	for name, created := range map[string]ports.CreatedWebhookEndpoint{
		"full": fullCreatedEndpoint(),
		"bare": {WebhookEndpoint: bareEndpoint, PlainSecret: plainSecret},
	} {
		want := created
		want.WebhookEndpoint = withoutSealedSecret(created.WebhookEndpoint)
		add(roundTrip{
			name:   "RotateSecret/" + name,
			answer: func(f *fakeCore) { f.created = created },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Webhooks.RotateSecret(ctx, "org1", "we1")
			},
			want:   want,
			method: "RotateSecret",
			args:   []any{"org1", "we1"},
		})
	}
	for name, deliveries := range map[string][]ports.WebhookDelivery{
		"set":   {fullWebhookDelivery(), {}, emptyPayload},
		"empty": {},
		"nil":   nil,
	} {
		add(roundTrip{
			name:   "ListDeliveries/" + name,
			answer: func(f *fakeCore) { f.deliveries = deliveries },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Webhooks.ListDeliveries(ctx, "org1")
			},
			want:   deliveries,
			method: "ListDeliveries",
			args:   []any{"org1"},
		})
	}
	return trips
}

// TestWebhookPayloadPresence checks that a nil payload stays nil and an empty one empty, which
// reflect.DeepEqual in the round trips would not tell apart from each other's wrong twin on its own.
func TestWebhookPayloadPresence(t *testing.T) {
	t.Parallel()
	for name, payload := range map[string][]byte{"nil": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &fakeCore{deliveries: []ports.WebhookDelivery{{ID: "wd", Payload: payload}}})
			got, err := b.client.Core().Webhooks.ListDeliveries(context.Background(), "org1")
			if err != nil {
				t.Fatal(err)
			}
			if (got[0].Payload == nil) != (payload == nil) || len(got[0].Payload) != 0 {
				t.Errorf("payload = %#v, want %#v", got[0].Payload, payload)
			}
		})
	}
}

// TestWebhookSecretsStayInCore checks on the wire itself that no WebhookService answer carries the sealed
// secret, and that the plaintext secret travels only in the create and rotate answers.
func TestWebhookSecretsStayInCore(t *testing.T) {
	t.Parallel()
	fake := &fakeCore{
		created: fullCreatedEndpoint(), endpoints: []ports.WebhookEndpoint{fullEndpoint()},
		delivery: fullWebhookDelivery(), deliveries: []ports.WebhookDelivery{fullWebhookDelivery()},
	}
	srv := mustServe(t, fake.core(), testToken)
	cap := &capture{next: srv.Client().Transport, bodies: map[string][]byte{}}
	c := rpc.NewClient(srv.URL, testToken, &http.Client{Transport: cap}).Core()
	ctx := context.Background()

	created, err := c.Webhooks.CreateEndpoint(ctx, "org1", "https://hooks.example.com", []string{ports.EventEmailSent})
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := c.Webhooks.RotateSecret(ctx, "org1", "we1")
	if err != nil {
		t.Fatal(err)
	}
	if created.PlainSecret != plainSecret || rotated.PlainSecret != plainSecret || created.Secret != nil || rotated.Secret != nil {
		t.Errorf("create/rotate: plain %q/%q, sealed %q/%q; want the plaintext and no sealed secret",
			created.PlainSecret, rotated.PlainSecret, created.Secret, rotated.Secret)
	}
	for name, call := range map[string]func() error{
		"ListEndpoints":  func() error { _, err := c.Webhooks.ListEndpoints(ctx, "org1"); return err },
		"DeleteEndpoint": func() error { return c.Webhooks.DeleteEndpoint(ctx, "org1", "we1") },
		"TestEndpoint":   func() error { _, err := c.Webhooks.TestEndpoint(ctx, "org1", "we1"); return err },
		"Replay":         func() error { _, err := c.Webhooks.Replay(ctx, "org1", "we1", "wd1"); return err },
		"ListDeliveries": func() error { _, err := c.Webhooks.ListDeliveries(ctx, "org1"); return err },
	} {
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	cap.mu.Lock()
	defer cap.mu.Unlock()
	if len(cap.bodies) != 7 {
		t.Fatalf("captured %d bodies, want 7", len(cap.bodies))
	}
	for path, body := range cap.bodies {
		if bytes.Contains(body, sealedSecret) {
			t.Errorf("%s: the sealed secret is on the wire", path)
		}
		hasPlain := bytes.Contains(body, []byte(plainSecret))
		answersSecret := strings.HasSuffix(path, "/CreateEndpoint") || strings.HasSuffix(path, "/RotateSecret")
		if hasPlain != answersSecret {
			t.Errorf("%s: plaintext secret on the wire %v, want %v", path, hasPlain, answersSecret)
		}
	}
}

// TestWebhookSchemaKeepsSecretsInCore checks the schema itself: the only field of the webhook package
// named like a secret is the plaintext of CreatedWebhookEndpoint, which only the create and rotate
// answers carry; and WebhookEndpoint has no bytes field at all, so a sealed secret cannot slip onto the
// wire under another name.
func TestWebhookSchemaKeepsSecretsInCore(t *testing.T) {
	t.Parallel()
	fd, err := protoregistry.GlobalFiles.FindFileByPath("postmill/webhook/v1/webhook.proto")
	if err != nil {
		t.Fatal(err)
	}
	const created = protoreflect.FullName("postmill.webhook.v1.CreatedWebhookEndpoint")
	var secretFields []protoreflect.FullName
	var carriers []protoreflect.FullName
	msgs := fd.Messages()
	for i := range msgs.Len() {
		m := msgs.Get(i)
		for j := range m.Fields().Len() {
			f := m.Fields().Get(j)
			lower := strings.ToLower(string(f.Name()))
			if strings.Contains(lower, "secret") || strings.Contains(lower, "seal") || strings.Contains(lower, "key") {
				secretFields = append(secretFields, f.FullName())
			}
			if f.Message() != nil && f.Message().FullName() == created {
				carriers = append(carriers, m.FullName())
			}
			if m.Name() == "WebhookEndpoint" && f.Kind() == protoreflect.BytesKind {
				t.Errorf("%s is a bytes field of the endpoint", f.FullName())
			}
		}
	}
	if want := []protoreflect.FullName{created + ".plain_secret"}; !reflect.DeepEqual(secretFields, want) {
		t.Errorf("fields named like a secret: %v, want only %v", secretFields, want)
	}
	wantCarriers := []protoreflect.FullName{"postmill.webhook.v1.CreateEndpointResponse", "postmill.webhook.v1.RotateSecretResponse"}
	if !reflect.DeepEqual(carriers, wantCarriers) {
		t.Errorf("messages carrying CreatedWebhookEndpoint: %v, want %v", carriers, wantCarriers)
	}
	// No message of another package may carry the endpoint's secret either.
	protoregistry.GlobalFiles.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(f.Path(), "postmill/") || f.Path() == fd.Path() {
			return true
		}
		ms := f.Messages()
		for i := range ms.Len() {
			for j := range ms.Get(i).Fields().Len() {
				if fm := ms.Get(i).Fields().Get(j).Message(); fm != nil && fm.ParentFile().Path() == fd.Path() {
					t.Errorf("%s uses %s", ms.Get(i).Fields().Get(j).FullName(), fm.FullName())
				}
			}
		}
		return true
	})
}
