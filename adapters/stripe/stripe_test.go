package stripe_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
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
		{"subscription updated", "customer.subscription.updated", `{"id":"sub_1","object":"subscription","status":"active","pending_update":null,"metadata":{"postmill_organization_id":"org-a"},"items":{"object":"list","data":[{"id":"si_1","object":"subscription_item","price":{"id":"price_pro","object":"price"}}]}}`,
			ports.PaymentEvent{Type: ports.PaymentSubscriptionUpdated, OrganizationID: "org-a", SubscriptionID: "sub_1", PriceID: "price_pro"}},
		{"subscription trialing, price as id", "customer.subscription.updated", `{"id":"sub_1","object":"subscription","status":"trialing","metadata":{"postmill_organization_id":"org-a"},"items":{"data":[{"id":"si_1","price":"price_pro"}]}}`,
			ports.PaymentEvent{Type: ports.PaymentSubscriptionUpdated, OrganizationID: "org-a", SubscriptionID: "sub_1", PriceID: "price_pro"}},
		{"subscription update pending payment", "customer.subscription.updated", `{"id":"sub_1","object":"subscription","status":"active","pending_update":{"expires_at":1764165600},"metadata":{"postmill_organization_id":"org-a"},"items":{"data":[{"id":"si_1","price":{"id":"price_basic"}}]}}`,
			ports.PaymentEvent{Type: ports.PaymentEventOther}},
		{"subscription of two items", "customer.subscription.updated", `{"id":"sub_1","object":"subscription","status":"active","metadata":{"postmill_organization_id":"org-a"},"items":{"data":[{"price":{"id":"price_pro"}},{"price":{"id":"price_addon"}}]}}`,
			ports.PaymentEvent{Type: ports.PaymentSubscriptionUpdated, OrganizationID: "org-a", SubscriptionID: "sub_1"}},
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

// TestPlanChangeAgainstStripeMock: the calls a plan change and a cancellation make are ones Stripe's
// OpenAPI specification accepts (stripe-mock answers 400 to an unknown or malformed parameter, such as a
// wrong proration_behavior or payment_behavior value). stripe-mock answers a fixture, not the price asked
// for, so the change is not reported confirmed.
func TestPlanChangeAgainstStripeMock(t *testing.T) {
	t.Parallel()
	p := newProvider(t, stripemock.Start(t))
	ctx := context.Background()
	ch, err := p.ChangePlan(ctx, "0195d7a2-0000-7000-8000-000000000001", "sub_1PostmillSub", ports.PlanOffer{ID: "pro", PriceID: "price_1PostmillPro"})
	if err != nil {
		t.Fatalf("ChangePlan: %v", err)
	}
	if ch.Confirmed {
		t.Fatal("stripe-mock's fixture, on another price, was taken for a confirmation")
	}
	if err := p.CancelSubscription(ctx, "0195d7a2-0000-7000-8000-000000000001", "sub_1PostmillSub"); err != nil {
		t.Fatalf("CancelSubscription: %v", err)
	}
	if _, err := p.ChangePlan(ctx, "org", "sub_1", ports.PlanOffer{ID: "free"}); err == nil {
		t.Fatal("a plan without a price was sent to Stripe")
	}
}

// fakeStripe answers the subscription calls with what the test sets and records what Postmill sent.
type fakeStripe struct {
	mu       sync.Mutex
	requests []string     // "METHOD path"
	forms    []url.Values // the parameters of each request, body and query
	retrieve string       // the subscription GET answers
	update   string       // the subscription POST answers
	cancel   func(w http.ResponseWriter)
}

func (f *fakeStripe) start(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		// stripe-go sends a DELETE's parameters in the query string.
		query, _ := url.ParseQuery(r.URL.RawQuery)
		for k, v := range query {
			form[k] = v
		}
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		f.forms = append(f.forms, form)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet:
			_, _ = io.WriteString(w, f.retrieve)
		case r.Method == http.MethodPost:
			_, _ = io.WriteString(w, f.update)
		case f.cancel != nil:
			f.cancel(w)
		default:
			_, _ = io.WriteString(w, `{"id":"sub_1","object":"subscription","status":"canceled"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func subscriptionJSON(org, status, pending string, prices ...string) string {
	items := make([]string, 0, len(prices))
	for i, p := range prices {
		items = append(items, fmt.Sprintf(`{"id":"si_%d","object":"subscription_item","price":{"id":%q,"object":"price"},"quantity":1}`, i+1, p))
	}
	return fmt.Sprintf(`{"id":"sub_1","object":"subscription","status":%q,"metadata":{"postmill_organization_id":%q},"pending_update":%s,"items":{"object":"list","data":[%s]}}`,
		status, org, pending, strings.Join(items, ","))
}

// TestChangePlanRequests: the change reads the subscription, then moves its one item to the new price
// with prorations invoiced at once and the change held until paid; it is confirmed only when Stripe's answer
// shows the subscription live on the new price with nothing pending. A subscription Stripe says belongs to
// another organization, one that ended, or one of several items is never updated.
func TestChangePlanRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pro := ports.PlanOffer{ID: "pro", PriceID: "price_pro"}

	f := &fakeStripe{retrieve: subscriptionJSON("org-a", "active", "null", "price_basic"), update: subscriptionJSON("org-a", "active", "null", "price_pro")}
	p := newProvider(t, f.start(t))
	ch, err := p.ChangePlan(ctx, "org-a", "sub_1", pro)
	if err != nil || !ch.Confirmed {
		t.Fatalf("ChangePlan = %+v, %v; want confirmed", ch, err)
	}
	if got := strings.Join(f.requests, ", "); got != "GET /v1/subscriptions/sub_1, POST /v1/subscriptions/sub_1" {
		t.Fatalf("requests: %s", got)
	}
	form := f.forms[1]
	for k, want := range map[string]string{
		"items[0][id]": "si_1", "items[0][price]": "price_pro", "items[0][quantity]": "1",
		"proration_behavior": "always_invoice", "payment_behavior": "pending_if_incomplete",
	} {
		if got := form.Get(k); got != want {
			t.Errorf("sent %s=%q, want %q", k, got, want)
		}
	}
	for k := range form {
		if strings.HasPrefix(k, "metadata") {
			t.Errorf("sent %s, which a pending update refuses", k)
		}
	}

	// Held until the customer pays: not confirmed.
	f.update = subscriptionJSON("org-a", "active", `{"expires_at":1764165600,"subscription_items":[]}`, "price_basic")
	if ch, err := p.ChangePlan(ctx, "org-a", "sub_1", pro); err != nil || ch.Confirmed {
		t.Fatalf("pending update: %+v, %v; want unconfirmed", ch, err)
	}
	f.update = subscriptionJSON("org-a", "past_due", "null", "price_pro")
	if ch, err := p.ChangePlan(ctx, "org-a", "sub_1", pro); err != nil || ch.Confirmed {
		t.Fatalf("past due: %+v, %v; want unconfirmed", ch, err)
	}

	for name, retrieve := range map[string]string{
		"another organization": subscriptionJSON("org-b", "active", "null", "price_basic"),
		"ended":                subscriptionJSON("org-a", "canceled", "null", "price_basic"),
		"two items":            subscriptionJSON("org-a", "active", "null", "price_basic", "price_addon"),
	} {
		g := &fakeStripe{retrieve: retrieve, update: subscriptionJSON("org-a", "active", "null", "price_pro")}
		q := newProvider(t, g.start(t))
		if _, err := q.ChangePlan(ctx, "org-a", "sub_1", pro); err == nil {
			t.Errorf("%s: changed", name)
		}
		for _, r := range g.requests {
			if strings.HasPrefix(r, "POST") {
				t.Errorf("%s: the subscription was updated", name)
			}
		}
	}
}

// TestCancelSubscriptionRequests: the subscription ends at once with a final invoice crediting the unused
// time; one Stripe no longer has counts as ended, any other error is reported without the key.
func TestCancelSubscriptionRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeStripe{}
	p := newProvider(t, f.start(t))
	if err := p.CancelSubscription(ctx, "org-a", "sub_1"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.requests, ", "); got != "DELETE /v1/subscriptions/sub_1" {
		t.Fatalf("requests: %s", got)
	}
	if f.forms[0].Get("invoice_now") != "true" || f.forms[0].Get("prorate") != "true" {
		t.Fatalf("cancel form: %v", f.forms[0])
	}

	f.cancel = func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such subscription: 'sub_1'"}}`)
	}
	if err := p.CancelSubscription(ctx, "org-a", "sub_1"); err != nil {
		t.Fatalf("a subscription Stripe no longer has: %v", err)
	}
	f.cancel = func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"type":"invalid_request_error","message":"Bad key `+testKey+`"}}`)
	}
	err := p.CancelSubscription(ctx, "org-a", "sub_1")
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("a failed cancellation: %v", err)
	}
}
