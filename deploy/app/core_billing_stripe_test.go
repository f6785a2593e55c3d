package app

import (
	"strings"
	"testing"
)

// TestLoadEnvStripe: Stripe is off without its variables, on with both secrets and the return pages, and
// half a configuration (one secret, or no return pages) is refused at start by an error naming the
// variables and never their values.
func TestLoadEnvStripe(t *testing.T) {
	t.Parallel()
	const key, secret = "sk_test_ConfigTestKey42", "whsec_ConfigTestSecret"
	load := func(extra map[string]string) (Config, error) {
		env := map[string]string{"POSTMILL_SECRET_KEY": "stripe-test-secret-key", "POSTMILL_DATA_DIR": t.TempDir()}
		for k, v := range extra {
			env[k] = v
		}
		cfg, err := LoadEnv(func(k string) string { return env[k] })
		if err != nil {
			return cfg, err
		}
		return cfg, cfg.Stripe.validate()
	}
	cfg, err := load(nil)
	if err != nil || cfg.Stripe.Enabled() {
		t.Fatalf("without variables: enabled=%v, %v", cfg.Stripe.Enabled(), err)
	}
	full := map[string]string{
		"POSTMILL_STRIPE_SECRET_KEY": key, "POSTMILL_STRIPE_WEBHOOK_SECRET": secret,
		"POSTMILL_STRIPE_SUCCESS_URL": "https://app.example.test/done", "POSTMILL_STRIPE_CANCEL_URL": "https://app.example.test/",
		"POSTMILL_STRIPE_API_URL": "http://127.0.0.1:12111/",
	}
	cfg, err = load(full)
	if err != nil || !cfg.Stripe.Enabled() || cfg.Stripe.APIURL != "http://127.0.0.1:12111" {
		t.Fatalf("full configuration: %+v, %v", cfg.Stripe.APIURL, err)
	}
	for _, c := range []struct {
		drop, set, value, want string
	}{
		{drop: "POSTMILL_STRIPE_WEBHOOK_SECRET", want: "POSTMILL_STRIPE_SECRET_KEY and POSTMILL_STRIPE_WEBHOOK_SECRET go together"},
		{drop: "POSTMILL_STRIPE_SECRET_KEY", want: "POSTMILL_STRIPE_SECRET_KEY and POSTMILL_STRIPE_WEBHOOK_SECRET go together"},
		{drop: "POSTMILL_STRIPE_SUCCESS_URL", want: "POSTMILL_STRIPE_SUCCESS_URL"},
		{set: "POSTMILL_STRIPE_CANCEL_URL", value: "/billing", want: "POSTMILL_STRIPE_CANCEL_URL"},
		{set: "POSTMILL_STRIPE_API_URL", value: "api.stripe.com", want: "POSTMILL_STRIPE_API_URL"},
	} {
		env := map[string]string{}
		for k, v := range full {
			env[k] = v
		}
		delete(env, c.drop)
		if c.set != "" {
			env[c.set] = c.value
		}
		_, err := load(env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s%s: %v, want an error naming %s", c.drop, c.set, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), secret) {
			t.Errorf("the error names a secret: %v", err)
		}
	}
}
