package app

import (
	"errors"
	"net/url"
	"strings"
)

// StripeConfig is the Stripe payment provider (docs/billing.md "Payment"): off unless both secrets are
// set. SecretKey and WebhookSecret are secrets and are never logged.
type StripeConfig struct {
	// SecretKey creates the Checkout sessions (POSTMILL_STRIPE_SECRET_KEY, sk_live_… or sk_test_…).
	SecretKey string
	// WebhookSecret verifies the notifications posted to /billing/stripe/webhook
	// (POSTMILL_STRIPE_WEBHOOK_SECRET, whsec_…).
	WebhookSecret string
	// SuccessURL and CancelURL are where Stripe sends the customer back (POSTMILL_STRIPE_SUCCESS_URL,
	// POSTMILL_STRIPE_CANCEL_URL): the operator's own pages, required with Stripe.
	SuccessURL string
	CancelURL  string
	// APIURL replaces https://api.stripe.com (POSTMILL_STRIPE_API_URL); the tests point it at stripe-mock.
	APIURL string
}

// loadStripe reads the POSTMILL_STRIPE_* variables.
func loadStripe(getenv Getenv) StripeConfig {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	return StripeConfig{
		SecretKey:     get("POSTMILL_STRIPE_SECRET_KEY"),
		WebhookSecret: get("POSTMILL_STRIPE_WEBHOOK_SECRET"),
		SuccessURL:    get("POSTMILL_STRIPE_SUCCESS_URL"),
		CancelURL:     get("POSTMILL_STRIPE_CANCEL_URL"),
		APIURL:        strings.TrimRight(get("POSTMILL_STRIPE_API_URL"), "/"),
	}
}

// Enabled reports whether Stripe takes payment for plans with a priceId.
func (s StripeConfig) Enabled() bool { return s.SecretKey != "" && s.WebhookSecret != "" }

// validate refuses half a Stripe configuration: a key without the webhook secret would take payments that
// never change a plan, and the reverse would check signatures of checkouts it never started. No error
// repeats a secret.
func (s StripeConfig) validate() error {
	if (s.SecretKey == "") != (s.WebhookSecret == "") {
		return errors.New("POSTMILL_STRIPE_SECRET_KEY and POSTMILL_STRIPE_WEBHOOK_SECRET go together")
	}
	if !s.Enabled() {
		return nil
	}
	var errs []error
	for _, v := range []struct{ name, value string }{
		{"POSTMILL_STRIPE_SUCCESS_URL", s.SuccessURL}, {"POSTMILL_STRIPE_CANCEL_URL", s.CancelURL}, {"POSTMILL_STRIPE_API_URL", s.APIURL},
	} {
		if v.value == "" && v.name == "POSTMILL_STRIPE_API_URL" {
			continue
		}
		if u, err := url.Parse(v.value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New(v.name+" must be an absolute http or https URL when Stripe is configured"))
		}
	}
	return errors.Join(errs...)
}
