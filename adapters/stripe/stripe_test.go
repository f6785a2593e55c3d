package stripe_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/postmill/postmill/adapters/stripe"
	"github.com/postmill/postmill/adapters/stripe/stripemock"
	"github.com/postmill/postmill/ports"
)

const (
	testKey    = "sk_test_PostmillAdapterKey4242"
	testSecret = "whsec_postmill_adapter_secret"
)

// Sign signs payload the way Stripe does: t=<unix>,v1=<hex HMAC-SHA256 of "<unix>.<payload>">.
func sign(secret string, at time.Time, payload []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.", at.Unix())
	mac.Write(payload)
	return fmt.Sprintf("t=%d,v1=%s", at.Unix(), hex.EncodeToString(mac.Sum(nil)))
}

func newProvider(t *testing.T, apiURL string) *stripe.Provider {
	t.Helper()
	p, err := stripe.New(stripe.Config{
		SecretKey: testKey, WebhookSecret: testSecret, APIURL: apiURL,
		SuccessURL: "https://app.example.test/billing?checkout=done", CancelURL: "https://app.example.test/billing",
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckoutAgainstStripeMock creates sessions against Stripe's own stripe-mock, which validates every
// parameter against Stripe's OpenAPI specification: an unknown or malformed parameter is a 400 there.
func TestCheckoutAgainstStripeMock(t *testing.T) {
	t.Parallel()
	p := newProvider(t, stripemock.Start(t))
	ctx := context.Background()
	offer := ports.PlanOffer{ID: "pro", Name: "Pro", PriceID: "price_1PostmillPro"}
	a, err := p.Checkout(ctx, "0195d7a2-0000-7000-8000-000000000001", offer)
	if err != nil {
		t.Fatalf("Checkout: %v", err)
	}
	if !strings.HasPrefix(a.ID, "cs_") || !strings.HasPrefix(a.URL, "https://checkout.stripe.com/") {
		t.Fatalf("checkout = %+v", a)
	}
	b, err := p.Checkout(ctx, "0195d7a2-0000-7000-8000-000000000002", offer)
	if err != nil {
		t.Fatal(err)
	}
	if b.ID == a.ID {
		t.Fatalf("two sessions share the id %s", a.ID)
	}

	// A plan without a price never reaches Stripe.
	if _, err := p.Checkout(ctx, "org", ports.PlanOffer{ID: "free"}); err == nil {
		t.Fatal("a plan without a price was sent to checkout")
	}
}

// TestCheckoutErrorKeepsTheKeySecret: a failed call says what failed and never carries the API key.
func TestCheckoutErrorKeepsTheKeySecret(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_postmill")
		w.WriteHeader(http.StatusUnauthorized)
		// Stripe quotes the key it was sent in some messages.
		msg := "Invalid API Key provided. Authorization was '" + r.Header.Get("Authorization") + "'."
		_, _ = fmt.Fprintf(w, `{"error":{"type":"invalid_request_error","message":%q}}`, msg)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	p := newProvider(t, "http://"+l.Addr().String())
	_, err = p.Checkout(context.Background(), "org", ports.PlanOffer{ID: "pro", PriceID: "price_1"})
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "Invalid API Key") {
		t.Fatalf("error = %v, want the 401 and Stripe's message", err)
	}
	if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "PostmillAdapterKey") {
		t.Fatalf("the error carries the API key: %v", err)
	}
}

func TestNewRefusesHalfAConfiguration(t *testing.T) {
	t.Parallel()
	for _, cfg := range []stripe.Config{
		{SecretKey: testKey, SuccessURL: "https://a.test/", CancelURL: "https://a.test/"},
		{WebhookSecret: testSecret, SuccessURL: "https://a.test/", CancelURL: "https://a.test/"},
		{SecretKey: testKey, WebhookSecret: testSecret, CancelURL: "https://a.test/"},
		{SecretKey: testKey, WebhookSecret: testSecret, SuccessURL: "/relative", CancelURL: "https://a.test/"},
		{SecretKey: testKey, WebhookSecret: testSecret, SuccessURL: "https://a.test/", CancelURL: "https://a.test/", APIURL: "ftp://x"},
	} {
		if _, err := stripe.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		} else if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), testSecret) {
			t.Errorf("the error names a secret: %v", err)
		}
	}
}

func event(id, typ, object string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","api_version":%q,"created":1764162000,"type":%q,"livemode":false,"pending_webhooks":1,"data":{"object":%s}}`,
		id, stripego.APIVersion, typ, object))
}

func TestParseEvent(t *testing.T) {
	t.Parallel()
	p := newProvider(t, "")
	now := time.Now()
	completed := event("evt_completed", "checkout.session.completed",
		`{"id":"cs_test_1","object":"checkout.session","client_reference_id":"org-a","payment_status":"paid","mode":"subscription","subscription":"sub_1","metadata":{"postmill_organization_id":"org-a","postmill_plan_id":"pro"}}`)

	cases := []struct {
		name    string
		payload []byte
		sig     string
		want    ports.PaymentEvent
		bad     string // part of the invalid_argument message, or "" when accepted
	}{
		{name: "completed", payload: completed, sig: sign(testSecret, now, completed),
			want: ports.PaymentEvent{ID: "evt_completed", Type: ports.PaymentCheckoutCompleted, OrganizationID: "org-a", CheckoutID: "cs_test_1", SubscriptionID: "sub_1"}},
		{name: "wrong secret", payload: completed, sig: sign("whsec_other", now, completed), bad: "does not match"},
		{name: "tampered body", payload: []byte(strings.Replace(string(completed), "org-a", "org-b", 1)), sig: sign(testSecret, now, completed), bad: "does not match"},
		{name: "too old", payload: completed, sig: sign(testSecret, now.Add(-6*time.Minute), completed), bad: "more than 5 minutes old"},
		{name: "no header", payload: completed, sig: "", bad: "missing"},
		{name: "malformed header", payload: completed, sig: "v1", bad: "malformed"},
		{name: "not JSON", payload: []byte("nope"), sig: sign(testSecret, now, []byte("nope")), bad: "not a readable"},
		{name: "too large", payload: make([]byte, stripe.MaxEventBytes+1), sig: "t=1,v1=00", bad: "larger than"},
	}
	// One signature among several (Stripe sends one per active secret during a rotation) is enough.
	rotated := sign("whsec_old", now, completed) + "," + strings.SplitN(sign(testSecret, now, completed), ",", 2)[1]
	cases = append(cases, struct {
		name    string
		payload []byte
		sig     string
		want    ports.PaymentEvent
		bad     string
	}{name: "rotated secret", payload: completed, sig: rotated, want: cases[0].want})

	for _, obj := range []struct {
		name, typ, object string
		want              ports.PaymentEvent
	}{
		{"unpaid completion", "checkout.session.completed", `{"id":"cs_2","object":"checkout.session","client_reference_id":"org-a","payment_status":"unpaid"}`,
			ports.PaymentEvent{Type: ports.PaymentEventOther}},
		{"async payment succeeded", "checkout.session.async_payment_succeeded", `{"id":"cs_3","object":"checkout.session","payment_status":"paid","subscription":{"id":"sub_3","object":"subscription"},"metadata":{"postmill_organization_id":"org-c"}}`,
			ports.PaymentEvent{Type: ports.PaymentCheckoutCompleted, OrganizationID: "org-c", CheckoutID: "cs_3", SubscriptionID: "sub_3"}},
		{"subscription deleted", "customer.subscription.deleted", `{"id":"sub_1","object":"subscription","status":"canceled","metadata":{"postmill_organization_id":"org-a"}}`,
			ports.PaymentEvent{Type: ports.PaymentSubscriptionEnded, OrganizationID: "org-a", SubscriptionID: "sub_1"}},
		{"subscription updated to canceled", "customer.subscription.updated", `{"id":"sub_1","object":"subscription","status":"canceled","metadata":{"postmill_organization_id":"org-a"}}`,
			ports.PaymentEvent{Type: ports.PaymentSubscriptionEnded, OrganizationID: "org-a", SubscriptionID: "sub_1"}},
		{"subscription past due", "customer.subscription.updated", `{"id":"sub_1","object":"subscription","status":"past_due","metadata":{"postmill_organization_id":"org-a"}}`,
			ports.PaymentEvent{Type: ports.PaymentEventOther}},
		{"invoice", "invoice.paid", `{"id":"in_1","object":"invoice"}`, ports.PaymentEvent{Type: ports.PaymentEventOther}},
	} {
		payload := event("evt_"+strings.ReplaceAll(obj.name, " ", "_"), obj.typ, obj.object)
		want := obj.want
		want.ID = "evt_" + strings.ReplaceAll(obj.name, " ", "_")
		cases = append(cases, struct {
			name    string
			payload []byte
			sig     string
			want    ports.PaymentEvent
			bad     string
		}{name: obj.name, payload: payload, sig: sign(testSecret, now, payload), want: want})
	}

	for _, c := range cases {
		got, err := p.ParseEvent(c.payload, c.sig)
		if c.bad != "" {
			pe, ok := ports.AsError(err)
			if !ok || pe.Code != ports.CodeInvalidArgument || !strings.Contains(pe.Message, c.bad) {
				t.Errorf("%s: %+v, %v; want invalid_argument containing %q", c.name, got, err, c.bad)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

// TestParseEventOtherAPIVersion: an endpoint pinned to another API version still works, since only fields
// every version has are read.
func TestParseEventOtherAPIVersion(t *testing.T) {
	t.Parallel()
	p := newProvider(t, "")
	payload := []byte(`{"id":"evt_old","object":"event","api_version":"2024-06-20","type":"checkout.session.completed","data":{"object":{"id":"cs_9","object":"checkout.session","client_reference_id":"org-z","payment_status":"paid","subscription":"sub_9"}}}`)
	got, err := p.ParseEvent(payload, sign(testSecret, time.Now(), payload))
	if err != nil || got.Type != ports.PaymentCheckoutCompleted || got.OrganizationID != "org-z" {
		t.Fatalf("ParseEvent = %+v, %v", got, err)
	}
}
