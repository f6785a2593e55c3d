package edge

import (
	"errors"
	"io"
	"net/http"

	"github.com/postmill/postmill/ports"
)

// PaymentWebhookPath is where the payment provider posts its notifications (docs/billing.md "Payment"). It
// sits outside /v1: the caller is Stripe, authenticated by the Stripe-Signature header the core verifies,
// not by an API key.
const PaymentWebhookPath = "/billing/stripe/webhook"

// PaymentWebhookMaxBodyBytes bounds a notification body: Stripe's checkout and subscription events are a
// few KiB.
const PaymentWebhookMaxBodyBytes = 256 << 10

// maxSignatureHeader bounds the Stripe-Signature header passed on: a timestamp and a few signatures.
const maxSignatureHeader = 4 << 10

type paymentWebhookResponse struct {
	Received bool   `json:"received"`
	EventID  string `json:"eventId"`
	Outcome  string `json:"outcome"`
}

// registerPaymentWebhookRoute mounts POST /billing/stripe/webhook on the mux beside the tracking routes: it
// is not part of the REST contract, its body must reach the core byte for byte (the signature covers it),
// and it stays out of the OpenAPI document and the request log.
func (s *Server) registerPaymentWebhookRoute() {
	s.mux.HandleFunc("POST "+PaymentWebhookPath, s.paymentWebhook)
}

// paymentWebhook answers 200 for every notification the core accepted, applied or not (Stripe retries
// anything else for days), 400 in the SPEC §7 shape for a bad signature or body, 413 for an oversized body
// and 404 when no payment provider is configured.
func (s *Server) paymentWebhook(w http.ResponseWriter, r *http.Request) {
	sig := r.Header.Get("Stripe-Signature")
	if len(sig) > maxSignatureHeader {
		writeJSONError(w, problemFor(ports.Errorf(ports.CodeInvalidArgument, "The Stripe-Signature header is longer than %d bytes", maxSignatureHeader)))
		return
	}
	payload, err := io.ReadAll(http.MaxBytesReader(w, r.Body, PaymentWebhookMaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSONError(w, statusProblem(http.StatusRequestEntityTooLarge, "The notification is larger than 256 KiB"))
			return
		}
		writeJSONError(w, statusProblem(http.StatusBadRequest, "The notification body could not be read"))
		return
	}
	res, err := s.core.Billing.PaymentWebhook(r.Context(), payload, sig)
	if err != nil {
		body := problemFor(err)
		if body.StatusCode >= http.StatusInternalServerError {
			logInternal(r.Context(), "billing: payment webhook", err)
		}
		writeJSONError(w, body)
		return
	}
	writeJSON(w, http.StatusOK, paymentWebhookResponse{Received: true, EventID: res.EventID, Outcome: string(res.Outcome)})
}
