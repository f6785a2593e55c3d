package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// paymentCalls records what the fake billing service's PaymentWebhook was given.
var paymentCalls sync.Map // string(signature) -> []byte payload

// PaymentWebhook accepts the signature "good" and refuses any other the way a provider does.
func (fakeAnalysis) PaymentWebhook(_ context.Context, payload []byte, signature string) (ports.PaymentWebhookResult, error) {
	paymentCalls.Store(signature, append([]byte(nil), payload...))
	if !strings.HasPrefix(signature, "good") {
		return ports.PaymentWebhookResult{}, ports.Errorf(ports.CodeInvalidArgument, "The Stripe-Signature does not match the notification")
	}
	return ports.PaymentWebhookResult{EventID: "evt_1", Outcome: ports.PaymentApplied}, nil
}

func newBillingEdge(t *testing.T, billing ports.BillingService) *httptest.Server {
	t.Helper()
	core := newFakeCore().core()
	core.Billing = billing
	s, err := edge.New(edge.Config{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()}, core)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func postWebhook(t *testing.T, url, sig string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+edge.PaymentWebhookPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set("Stripe-Signature", sig)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func TestPaymentWebhookRoute(t *testing.T) {
	t.Parallel()
	srv := newBillingEdge(t, fakeAnalysis{})

	// The body reaches the core byte for byte, whitespace and all: the signature covers it.
	payload := []byte("{ \"id\": \"evt_1\",\n  \"type\": \"checkout.session.completed\" }")
	status, out := postWebhook(t, srv.URL, "good-route", payload)
	if status != http.StatusOK || out["received"] != true || out["eventId"] != "evt_1" || out["outcome"] != "applied" {
		t.Fatalf("signed notification: %d %v", status, out)
	}
	if got, _ := paymentCalls.Load("good-route"); !bytes.Equal(got.([]byte), payload) {
		t.Fatalf("the core got %q, want %q", got, payload)
	}

	// A bad signature is a 400 in the SPEC §7 shape.
	status, out = postWebhook(t, srv.URL, "bad-route", payload)
	if status != http.StatusBadRequest || out["statusCode"] != float64(400) || out["error"] != "Bad Request" ||
		!strings.Contains(out["message"].(string), "Stripe-Signature") {
		t.Fatalf("bad signature: %d %v", status, out)
	}

	// A body over the bound never reaches the core.
	status, out = postWebhook(t, srv.URL, "good-huge", bytes.Repeat([]byte("x"), edge.PaymentWebhookMaxBodyBytes+1))
	if status != http.StatusRequestEntityTooLarge || out["statusCode"] != float64(413) {
		t.Fatalf("oversized body: %d %v", status, out)
	}
	if _, called := paymentCalls.Load("good-huge"); called {
		t.Fatal("an oversized notification reached the core")
	}

	// An oversized signature header is refused before the core.
	status, _ = postWebhook(t, srv.URL, "good"+strings.Repeat("a", 5000), payload)
	if status != http.StatusBadRequest {
		t.Fatalf("oversized signature: %d", status)
	}

	// Only POST.
	res, err := http.Get(srv.URL + edge.PaymentWebhookPath)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed && res.StatusCode != http.StatusNotFound {
		t.Fatalf("GET: %d", res.StatusCode)
	}
}

func TestPaymentWebhookRouteWithoutBilling(t *testing.T) {
	t.Parallel()
	srv := newBillingEdge(t, nil)
	status, out := postWebhook(t, srv.URL, "good", []byte(`{}`))
	if status != http.StatusNotFound || out["statusCode"] != float64(404) {
		t.Fatalf("without billing: %d %v", status, out)
	}
}
