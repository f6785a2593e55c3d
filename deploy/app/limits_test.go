package app

import (
	"strings"
	"testing"
)

// TestLoadEnvPerOrganizationBounds: the three per-organization counts default to 100 domains, 20 webhook
// endpoints and 100 API keys, take a positive override, and refuse anything else at start.
func TestLoadEnvPerOrganizationBounds(t *testing.T) {
	t.Parallel()
	load := func(extra map[string]string) (Config, error) {
		env := map[string]string{"POSTMILL_SECRET_KEY": "limits-test-secret-key", "POSTMILL_DATA_DIR": t.TempDir()}
		for k, v := range extra {
			env[k] = v
		}
		return LoadEnv(func(k string) string { return env[k] })
	}
	cfg, err := load(nil)
	if err != nil || cfg.MaxDomainsPerOrg != 100 || cfg.MaxWebhooksPerOrg != 20 || cfg.MaxAPIKeysPerOrg != 100 {
		t.Fatalf("defaults: %d %d %d (%v)", cfg.MaxDomainsPerOrg, cfg.MaxWebhooksPerOrg, cfg.MaxAPIKeysPerOrg, err)
	}
	cfg, err = load(map[string]string{"POSTMILL_MAX_DOMAINS_PER_ORG": "3", "POSTMILL_MAX_WEBHOOKS_PER_ORG": "1", "POSTMILL_MAX_API_KEYS_PER_ORG": "5000"})
	if err != nil || cfg.MaxDomainsPerOrg != 3 || cfg.MaxWebhooksPerOrg != 1 || cfg.MaxAPIKeysPerOrg != 5000 {
		t.Fatalf("overrides: %d %d %d (%v)", cfg.MaxDomainsPerOrg, cfg.MaxWebhooksPerOrg, cfg.MaxAPIKeysPerOrg, err)
	}
	for _, name := range []string{"POSTMILL_MAX_DOMAINS_PER_ORG", "POSTMILL_MAX_WEBHOOKS_PER_ORG", "POSTMILL_MAX_API_KEYS_PER_ORG"} {
		for _, bad := range []string{"0", "-1", "many"} {
			if _, err := load(map[string]string{name: bad}); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: %v", name, bad, err)
			}
		}
	}
	c := Config{MaxWebhooksPerOrg: -1}
	if err := c.Validate(Targets{}); err == nil || !strings.Contains(err.Error(), "POSTMILL_MAX_WEBHOOKS_PER_ORG") {
		t.Errorf("Validate with a negative bound: %v", err)
	}
}
