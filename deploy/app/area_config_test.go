package app

import (
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/kafka"
	"github.com/postmill/postmill/core/broadcast"
	"github.com/postmill/postmill/core/reputation"
	"github.com/postmill/postmill/ports"
)

// TestAreaSettingsReadAtStart: the reputation, analytics-tier, plan-catalogue and broadcast lease and backlog variables are read by
// LoadEnv into Config (not by the area builders from the environment), a value that does not parse stops
// the start with a message naming the variable, and unset variables keep the areas' defaults.
func TestAreaSettingsReadAtStart(t *testing.T) {
	t.Parallel()
	load := func(vars map[string]string) (Config, error) {
		t.Helper()
		base := map[string]string{"POSTMILL_SECRET_KEY": "0123456789abcdef0123", "POSTMILL_DATA_DIR": t.TempDir()}
		for k, v := range vars {
			base[k] = v
		}
		return LoadEnv(func(k string) string { return base[k] })
	}

	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Reputation.serviceConfig(); got != (reputation.Config{Thresholds: reputation.DefaultThresholds}) {
		t.Errorf("reputation defaults: %+v", got)
	}
	if r, err := c.AnalyticsTier.retention(); err != nil || r != ports.DefaultAnalyticsRetention {
		t.Errorf("retention defaults: %+v, %v", r, err)
	}
	if g := c.AnalyticsTier.kafkaGroup(); g != kafka.DefaultAnalyticsGroup || c.PlansFile != "" {
		t.Errorf("group %q, plans file %q", g, c.PlansFile)
	}
	if c.BroadcastLease != 0 { // 0: the broadcast service's DefaultLease
		t.Errorf("broadcast lease default: %v", c.BroadcastLease)
	}
	if c.BroadcastBacklog != broadcast.DefaultMaxBacklog {
		t.Errorf("broadcast backlog default: %v", c.BroadcastBacklog)
	}

	c, err = load(map[string]string{
		"POSTMILL_PROTECTION_COMPLAINT_RATE": "0.002", "POSTMILL_PROTECTION_BOUNCE_RATE": "-1",
		"POSTMILL_PROTECTION_MIN_VOLUME": "3", "POSTMILL_PROTECTION_WINDOW": "48h",
		"POSTMILL_PROTECTION_INTERVAL": "200ms", "POSTMILL_WARMUP_FACTOR": "2", "POSTMILL_WARMUP_CEILING": "5000",
		"POSTMILL_ANALYTICS_REQUEST_DAYS": "7", "POSTMILL_ANALYTICS_EVENT_DAYS": "365",
		"POSTMILL_ANALYTICS_KAFKA_GROUP": "analytics-eu", "POSTMILL_PLANS_FILE": " /etc/postmill/plans.json ",
		"POSTMILL_BROADCAST_LEASE": "45s", "POSTMILL_BROADCAST_BACKLOG": "1m",
	})
	if err != nil {
		t.Fatal(err)
	}
	rc := c.Reputation.serviceConfig()
	if rc.ProtectComplaintRate != 0.002 || rc.ProtectBounceRate != -1 || rc.Thresholds.MinVolume != 3 ||
		rc.ProtectWindow != 48*time.Hour || rc.Interval != 200*time.Millisecond || rc.WarmupFactor != 2 ||
		rc.WarmupCeiling != 5000 || rc.Thresholds.ComplaintAtRisk != reputation.DefaultThresholds.ComplaintAtRisk {
		t.Errorf("reputation: %+v", rc)
	}
	r, err := c.AnalyticsTier.retention()
	if err != nil || r.Requests != 7*24*time.Hour || r.Events != 365*24*time.Hour {
		t.Errorf("retention: %+v, %v", r, err)
	}
	if g := c.AnalyticsTier.kafkaGroup(); g != "analytics-eu" || c.PlansFile != "/etc/postmill/plans.json" {
		t.Errorf("group %q, plans file %q", g, c.PlansFile)
	}
	if c.BroadcastLease != 45*time.Second || c.BroadcastBacklog != time.Minute {
		t.Errorf("broadcast lease %v, backlog %v", c.BroadcastLease, c.BroadcastBacklog)
	}

	for name, value := range map[string]string{
		"POSTMILL_PROTECTION_COMPLAINT_RATE": "0.3%", "POSTMILL_PROTECTION_MIN_VOLUME": "-5",
		"POSTMILL_PROTECTION_INTERVAL": "5 minutes", "POSTMILL_WARMUP_CEILING": "1e5",
		"POSTMILL_ANALYTICS_REQUEST_DAYS": "0", "POSTMILL_ANALYTICS_EVENT_DAYS": "4000",
		"POSTMILL_BROADCAST_LEASE": "-1s", "POSTMILL_BROADCAST_BACKLOG": "10000",
	} {
		if _, err := load(map[string]string{name: value}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v, want an error naming it", name, value, err)
		}
	}
}
