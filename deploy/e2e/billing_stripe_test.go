package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/adapters/stripe/stripemock"
	"github.com/postmill/postmill/deploy/app"
)

const (
	e2eStripeKey    = "sk_test_PostmillEndToEnd4242"
	e2eStripeSecret = "whsec_PostmillEndToEndSecret"
)

// stripeRecorder stands between Postmill and stripe-mock on loopback and keeps what went each way, since
// stripe-mock remembers nothing: the form Postmill sent and the session stripe-mock answered.
type stripeRecorder struct {
	mu       sync.Mutex
	forms    []url.Values
	sessions []map[string]any
	requests []string // "METHOD path?query", every call
}

func startStripe(t *testing.T) (*stripeRecorder, string) {
	t.Helper()
	target, err := url.Parse(stripemock.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := &stripeRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(res *http.Response) error {
		body, err := io.ReadAll(res.Body)
		if err != nil {
			return err
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
		var obj map[string]any
		if json.Unmarshal(body, &obj) == nil && obj["object"] == "checkout.session" {
			rec.mu.Lock()
			rec.sessions = append(rec.sessions, obj)
			rec.mu.Unlock()
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.requests = append(rec.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		rec.mu.Unlock()
		if form, err := url.ParseQuery(string(body)); err == nil && r.Method == http.MethodPost {
			rec.mu.Lock()
			rec.forms = append(rec.forms, form)
			rec.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

func (r *stripeRecorder) last(t *testing.T) (url.Values, map[string]any) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.forms) == 0 || len(r.sessions) == 0 {
		t.Fatal("no checkout session went through stripe-mock")
	}
	return r.forms[len(r.forms)-1], r.sessions[len(r.sessions)-1]
}

// stripeEvent is a notification as Stripe sends it, signed with the endpoint's secret the way Stripe signs:
// Stripe-Signature t=<unix>,v1=<hex HMAC-SHA256 of "<unix>.<body>">.
func stripeEvent(t *testing.T, secret, id, typ string, object map[string]any) (body []byte, signature string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": "2025-08-27.basil", "created": time.Now().Unix(),
		"type": typ, "livemode": false, "pending_webhooks": 1, "data": map[string]any{"object": object},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Now().Unix()
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.", ts)
	mac.Write(body)
	return body, fmt.Sprintf("t=%d,v1=%s", ts, hex.EncodeToString(mac.Sum(nil)))
}

func (e *env) stripeWebhook(body []byte, signature string) resp {
	e.t.Helper()
	h := map[string]string{}
	if signature != "" {
		h["Stripe-Signature"] = signature
	}
	return e.do(req{method: "POST", path: "/billing/stripe/webhook", body: string(body), header: h})
}

// TestBillingStripeCheckout is a customer paying for a plan through Stripe, with Stripe's own stripe-mock
// behind the API: subscribing to a plan with a priceId answers the session's checkoutUrl and changes
// nothing; Stripe's signed checkout.session.completed then moves the organization to the plan, and the
// very next sends meet its limits. A replayed event changes nothing twice, a forged or unsigned one is a
// 400 that changes nothing, an event naming another organization's checkout changes neither, unknown
// events are acknowledged and ignored, and the subscription's end moves the organization back to free.
func TestBillingStripeCheckout(t *testing.T) {
	rec, stripeURL := startStripe(t)
	plans := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(plans, []byte(`[
		{"id": "free", "name": "Free", "monthlyLimit": 3000},
		{"id": "tiny", "name": "Tiny", "monthlyLimit": 1, "priceId": "price_1PostmillTiny"},
		{"id": "pro", "name": "Pro", "monthlyLimit": 100000, "warmupCap": 5000, "priceId": "price_1PostmillPro"}
	]`), 0o600); err != nil {
		t.Fatal(err)
	}
	w := MustMailWorld(t, func(c *app.Config) {
		c.PlansFile = plans
		c.Stripe = app.StripeConfig{
			SecretKey: e2eStripeKey, WebhookSecret: e2eStripeSecret, APIURL: stripeURL,
			SuccessURL: "https://app.example.test/billing/done", CancelURL: "https://app.example.test/billing",
		}
	})
	_, read := w.MustKey(w.owner, []string{"billing:read"})
	_, write := w.MustKey(w.owner, []string{"billing:write"})
	mail := map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "x", "text": "x", "sandbox": true}

	// Subscribing to a priced plan answers stripe-mock's checkout URL and leaves the plan as it was.
	r := expect(t, w.post("/v1/billing/subscribe", write, map[string]any{"plan": "tiny"}), 200)
	form, session := rec.last(t)
	if r.str("checkoutUrl") == "" || r.str("checkoutUrl") != session["url"] {
		t.Fatalf("checkoutUrl %q, stripe-mock's session url %v", r.str("checkoutUrl"), session["url"])
	}
	if p := r.body["plan"].(map[string]any); p["id"] != "free" || p["monthlyLimit"] != float64(3000) {
		t.Fatalf("the plan changed before payment: %s", r.raw)
	}
	for k, want := range map[string]string{
		"mode": "subscription", "line_items[0][price]": "price_1PostmillTiny", "line_items[0][quantity]": "1",
		"client_reference_id": w.owner.orgID, "metadata[postmill_organization_id]": w.owner.orgID,
		"metadata[postmill_plan_id]": "tiny", "subscription_data[metadata][postmill_organization_id]": w.owner.orgID,
		"success_url": "https://app.example.test/billing/done", "cancel_url": "https://app.example.test/billing",
	} {
		if got := form.Get(k); got != want {
			t.Errorf("Postmill sent %s=%q, want %q", k, got, want)
		}
	}
	checkoutID := session["id"].(string)

	// Another organization starts its own checkout.
	other := w.MustSignup("other@stripe.example", "")
	_, otherWrite := w.MustKey(other, []string{"billing:write", "billing:read"})
	expect(t, w.post("/v1/billing/subscribe", otherWrite, map[string]any{"plan": "pro"}), 200)
	_, otherSession := rec.last(t)
	otherCheckout := otherSession["id"].(string)

	completed := func(org, checkout, sub string) map[string]any {
		return map[string]any{
			"id": checkout, "object": "checkout.session", "mode": "subscription", "payment_status": "paid", "status": "complete",
			"client_reference_id": org, "subscription": sub,
			"metadata": map[string]any{"postmill_organization_id": org, "postmill_plan_id": "pro"},
		}
	}
	planOf := func(token string) map[string]any {
		return expect(t, w.get("/v1/billing/subscription", token), 200).body["plan"].(map[string]any)
	}

	// Forged, unsigned and stale notifications are 400s in the SPEC §7 shape and change nothing.
	body, sig := stripeEvent(t, e2eStripeSecret, "evt_forged", "checkout.session.completed", completed(w.owner.orgID, checkoutID, "sub_1"))
	_, forged := stripeEvent(t, "whsec_attacker", "evt_forged", "checkout.session.completed", completed(w.owner.orgID, checkoutID, "sub_1"))
	errorBody(t, w.stripeWebhook(body, forged), 400, "Bad Request", "The Stripe-Signature does not match the notification")
	errorBody(t, w.stripeWebhook(body, ""), 400, "Bad Request", "The Stripe-Signature header is missing")
	stale := fmt.Sprintf("t=%d,v1=%s", time.Now().Add(-10*time.Minute).Unix(), hex.EncodeToString(make([]byte, 32)))
	errorBody(t, w.stripeWebhook(body, stale), 400, "Bad Request", "")
	tampered := bytes.Replace(body, []byte(`"paid"`), []byte(`"PAID"`), 1)
	errorBody(t, w.stripeWebhook(tampered, sig), 400, "Bad Request", "The Stripe-Signature does not match the notification")

	// Tenancy: an event naming this organization's checkout for the other organization (and the reverse)
	// is acknowledged and changes neither.
	for _, ev := range []struct{ id, org, checkout string }{
		{"evt_cross_1", other.orgID, checkoutID}, {"evt_cross_2", w.owner.orgID, otherCheckout},
	} {
		b, s := stripeEvent(t, e2eStripeSecret, ev.id, "checkout.session.completed", completed(ev.org, ev.checkout, "sub_x"))
		if r := expect(t, w.stripeWebhook(b, s), 200); r.str("outcome") != "ignored" {
			t.Fatalf("cross-organization event: %s", r.raw)
		}
	}
	// Unknown events are acknowledged and ignored.
	b, s := stripeEvent(t, e2eStripeSecret, "evt_invoice", "invoice.paid", map[string]any{"id": "in_1", "object": "invoice"})
	if r := expect(t, w.stripeWebhook(b, s), 200); r.str("outcome") != "ignored" || r.body["received"] != true {
		t.Fatalf("unknown event: %s", r.raw)
	}
	if p := planOf(read); p["id"] != "free" {
		t.Fatalf("refused or ignored events changed the plan: %v", p)
	}
	if p := planOf(otherWrite); p["id"] != "free" {
		t.Fatalf("refused or ignored events changed the other organization's plan: %v", p)
	}

	// Stripe confirms the payment: the plan the checkout was started for (tiny, whatever the metadata of
	// the event says) and its limits hold for the very next sends.
	r = expect(t, w.stripeWebhook(body, sig), 200)
	if r.str("outcome") != "applied" || r.str("eventId") != "evt_forged" {
		t.Fatalf("signed completion: %s", r.raw)
	}
	if p := planOf(read); p["id"] != "tiny" || p["monthlyLimit"] != float64(1) {
		t.Fatalf("after payment: %v", p)
	}
	expect(t, w.send(t, mail, nil), 202)
	errorBody(t, w.send(t, mail, nil), 402, "plan_limit_exceeded", "Plan limit reached for emails_sent")

	// A replay, even freshly signed, changes nothing twice: an operator's limit set since stands.
	admin := w.MustSignup("root@admin.example", "")
	expect(t, w.do(req{method: "PUT", path: "/v1/admin/organizations/" + w.owner.orgID + "/limits", token: admin.access,
		body: map[string]any{"monthlyLimit": 50, "warmupCap": nil}}), 200)
	ts := time.Now().Unix()
	mac := hmac.New(sha256.New, []byte(e2eStripeSecret))
	fmt.Fprintf(mac, "%d.", ts)
	mac.Write(body)
	if r := expect(t, w.stripeWebhook(body, fmt.Sprintf("t=%d,v1=%s", ts, hex.EncodeToString(mac.Sum(nil)))), 200); r.str("outcome") != "duplicate" {
		t.Fatalf("replay: %s", r.raw)
	}
	if p := planOf(read); p["id"] != "tiny" || p["monthlyLimit"] != float64(50) {
		t.Fatalf("a replay changed the plan or limits: %v", p)
	}

	// The other organization's own completion applies to it alone.
	b, s = stripeEvent(t, e2eStripeSecret, "evt_other_paid", "checkout.session.completed", completed(other.orgID, otherCheckout, "sub_2"))
	expect(t, w.stripeWebhook(b, s), 200)
	if p := planOf(otherWrite); p["id"] != "pro" || p["monthlyLimit"] != float64(100000) || p["warmupCap"] != float64(5000) {
		t.Fatalf("other organization after its payment: %v", p)
	}
	if p := planOf(read); p["id"] != "tiny" {
		t.Fatalf("the other organization's payment changed this one: %v", p)
	}

	// The subscription ends: back to free. The other organization's subscription id named for this one
	// changes nothing.
	ended := func(id, org, sub string) ([]byte, string) {
		return stripeEvent(t, e2eStripeSecret, id, "customer.subscription.deleted", map[string]any{
			"id": sub, "object": "subscription", "status": "canceled", "metadata": map[string]any{"postmill_organization_id": org},
		})
	}
	b, s = ended("evt_end_wrong", w.owner.orgID, "sub_2")
	if r := expect(t, w.stripeWebhook(b, s), 200); r.str("outcome") != "ignored" {
		t.Fatalf("ending a subscription the organization is not on: %s", r.raw)
	}
	b, s = ended("evt_end", w.owner.orgID, "sub_1")
	if r := expect(t, w.stripeWebhook(b, s), 200); r.str("outcome") != "applied" {
		t.Fatalf("subscription ended: %s", r.raw)
	}
	if p := planOf(read); p["id"] != "free" || p["monthlyLimit"] != float64(3000) {
		t.Fatalf("after the subscription ended: %v", p)
	}
	if p := planOf(otherWrite); p["id"] != "pro" {
		t.Fatalf("this organization's end changed the other's plan: %v", p)
	}

	// The other organization, paying for pro through sub_2, moves to tiny: its subscription's price is
	// changed, no second checkout is opened, and stripe-mock's answer (a fixture, not on tiny's price)
	// leaves the plan as it was until Stripe's notification confirms it.
	rec.mu.Lock()
	sessionsBefore, requestsBefore := len(rec.sessions), len(rec.requests)
	rec.mu.Unlock()
	r = expect(t, w.post("/v1/billing/subscribe", otherWrite, map[string]any{"plan": "tiny"}), 200)
	if r.body["checkoutUrl"] != nil || r.body["plan"].(map[string]any)["id"] != "pro" || r.body["pendingPlan"] != "tiny" {
		t.Fatalf("plan change: %s", r.raw)
	}
	if r := expect(t, w.get("/v1/billing/subscription", otherWrite), 200); r.body["pendingPlan"] != "tiny" {
		t.Fatalf("the subscription while the change waits: %s", r.raw)
	}
	if r := expect(t, w.get("/v1/billing/subscription", read), 200); r.body["pendingPlan"] != nil {
		t.Fatalf("another organization's subscription shows the change: %s", r.raw)
	}
	form, _ = rec.last(t)
	rec.mu.Lock()
	calls := append([]string(nil), rec.requests[requestsBefore:]...)
	sessionsAfter := len(rec.sessions)
	rec.mu.Unlock()
	if sessionsAfter != sessionsBefore || len(calls) != 2 || calls[0] != "GET /v1/subscriptions/sub_2?" || calls[1] != "POST /v1/subscriptions/sub_2?" {
		t.Fatalf("calls to Stripe for the plan change: %v (sessions %d -> %d)", calls, sessionsBefore, sessionsAfter)
	}
	for k, want := range map[string]string{
		"items[0][price]": "price_1PostmillTiny", "proration_behavior": "always_invoice", "payment_behavior": "pending_if_incomplete",
	} {
		if got := form.Get(k); got != want {
			t.Errorf("Postmill sent %s=%q, want %q", k, got, want)
		}
	}
	updated := func(id, org, sub, price string) ([]byte, string) {
		return stripeEvent(t, e2eStripeSecret, id, "customer.subscription.updated", map[string]any{
			"id": sub, "object": "subscription", "status": "active", "pending_update": nil,
			"metadata": map[string]any{"postmill_organization_id": org},
			"items":    map[string]any{"object": "list", "data": []any{map[string]any{"id": "si_1", "object": "subscription_item", "price": map[string]any{"id": price, "object": "price"}}}},
		})
	}
	for _, ev := range []struct{ id, org, price string }{
		{"evt_upd_foreign", w.owner.orgID, "price_1PostmillTiny"}, {"evt_upd_renewal", other.orgID, "price_1PostmillPro"},
	} {
		b, s = updated(ev.id, ev.org, "sub_2", ev.price)
		if r := expect(t, w.stripeWebhook(b, s), 200); r.str("outcome") != "ignored" {
			t.Fatalf("%s: %s", ev.id, r.raw)
		}
	}
	if p := planOf(otherWrite); p["id"] != "pro" {
		t.Fatalf("an update confirming nothing changed the plan: %v", p)
	}
	if p := planOf(read); p["id"] != "free" {
		t.Fatalf("the other organization's change named for this one changed it: %v", p)
	}
	b, s = updated("evt_upd", other.orgID, "sub_2", "price_1PostmillTiny")
	if r := expect(t, w.stripeWebhook(b, s), 200); r.str("outcome") != "applied" {
		t.Fatalf("confirmed plan change: %s", r.raw)
	}
	if p := planOf(otherWrite); p["id"] != "tiny" || p["monthlyLimit"] != float64(1) {
		t.Fatalf("after the confirmed change: %v", p)
	}
	if r := expect(t, w.get("/v1/billing/subscription", otherWrite), 200); r.body["pendingPlan"] != nil {
		t.Fatalf("the subscription after the confirmed change: %s", r.raw)
	}
	if r := expect(t, w.stripeWebhook(b, s), 200); r.str("outcome") != "duplicate" {
		t.Fatalf("replayed plan change: %s", r.raw)
	}

	// Moving to free cancels sub_2 at once, crediting the unused time, and free's limits hold at once; the
	// end Stripe then notifies changes nothing more.
	rec.mu.Lock()
	requestsBefore = len(rec.requests)
	rec.mu.Unlock()
	if p := expect(t, w.post("/v1/billing/subscribe", otherWrite, map[string]any{"plan": "free"}), 200).body["plan"].(map[string]any); p["id"] != "free" || p["monthlyLimit"] != float64(3000) {
		t.Fatalf("moving to free: %v", p)
	}
	rec.mu.Lock()
	calls = append([]string(nil), rec.requests[requestsBefore:]...)
	rec.mu.Unlock()
	if len(calls) != 1 || calls[0] != "DELETE /v1/subscriptions/sub_2?invoice_now=true&prorate=true" {
		t.Fatalf("calls to Stripe moving to free: %v", calls)
	}
	b, s = ended("evt_end_2", other.orgID, "sub_2")
	if r := expect(t, w.stripeWebhook(b, s), 200); r.str("outcome") != "ignored" {
		t.Fatalf("the end after the cancellation: %s", r.raw)
	}
}

// TestBillingStripeWebhookWithoutStripe: without Stripe configured the route answers 404 and no plan is
// ever priced.
func TestBillingStripeWebhookWithoutStripe(t *testing.T) {
	e := MustStartAll(t)
	errorBody(t, e.stripeWebhook([]byte(`{}`), "t=1,v1=00"), 404, "Not Found", "No payment provider is configured")
}

// TestBillingStripeOverTheSplit: an edge that reaches its core over Connect holds no Stripe secret; the
// checkout and the signed notification go through it to the core, which alone verifies and applies them.
func TestBillingStripeOverTheSplit(t *testing.T) {
	rec, stripeURL := startStripe(t)
	plans := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(plans, []byte(`[{"id": "tiny", "monthlyLimit": 1, "priceId": "price_1PostmillTiny"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	coreCfg := testConfig(t, pgtest.URL(t))
	coreCfg.PlansFile = plans
	coreCfg.Stripe = app.StripeConfig{
		SecretKey: e2eStripeKey, WebhookSecret: e2eStripeSecret, APIURL: stripeURL,
		SuccessURL: "https://app.example.test/done", CancelURL: "https://app.example.test/",
	}
	core := MustStart(t, coreCfg, "core")
	edgeCfg := testConfig(t, "")
	edgeCfg.SecretKeys, edgeCfg.CoreURL = coreCfg.SecretKeys, core.app.RPCURL()
	e := MustStart(t, edgeCfg, "edge")

	a := e.MustSignup("split@stripe.example", "")
	_, key := e.MustKey(a, []string{"billing:read", "billing:write"})
	r := expect(t, e.post("/v1/billing/subscribe", key, map[string]any{"plan": "tiny"}), 200)
	_, session := rec.last(t)
	if r.str("checkoutUrl") != session["url"] {
		t.Fatalf("checkoutUrl through the split: %s", r.raw)
	}
	obj := map[string]any{
		"id": session["id"], "object": "checkout.session", "payment_status": "paid", "client_reference_id": a.orgID, "subscription": "sub_split",
	}
	body, sig := stripeEvent(t, e2eStripeSecret, "evt_split", "checkout.session.completed", obj)
	_, forged := stripeEvent(t, "whsec_attacker", "evt_split", "checkout.session.completed", obj)
	errorBody(t, e.stripeWebhook(body, forged), 400, "Bad Request", "The Stripe-Signature does not match the notification")
	if r := expect(t, e.stripeWebhook(body, sig), 200); r.str("outcome") != "applied" {
		t.Fatalf("signed completion through the split: %s", r.raw)
	}
	if r := expect(t, e.stripeWebhook(body, sig), 200); r.str("outcome") != "duplicate" {
		t.Fatalf("replay through the split: %s", r.raw)
	}
	if p := expect(t, e.get("/v1/billing/subscription", key), 200).body["plan"].(map[string]any); p["id"] != "tiny" || p["monthlyLimit"] != float64(1) {
		t.Fatalf("plan after payment through the split: %v", p)
	}
}
