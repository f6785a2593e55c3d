package app

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/smtpd/catcher"
)

func TestLocalSettingsFromEnv(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) {
		env["POSTMILL_SECRET_KEY"] = "local-settings-test-secret"
		env["POSTMILL_DATABASE_URL"] = "postgres://127.0.0.1/unused"
		return LoadEnv(func(k string) string { return env[k] })
	}
	cfg, err := load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Local.Enabled || cfg.Local.DNSAddr != "127.0.0.1:1053" || cfg.Local.CatcherAddr != "127.0.0.1:1025" || cfg.Local.CatcherMax != 1000 {
		t.Fatalf("defaults: %+v (postmill serve stays production-shaped)", cfg.Local)
	}
	cfg, err = load(map[string]string{"POSTMILL_LOCAL": "true", "POSTMILL_LOCAL_DNS_ADDR": "127.0.0.2:5300",
		"POSTMILL_CATCHER_ADDR": "127.0.0.1:2025", "POSTMILL_CATCHER_MAX": "20"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Local.Enabled || cfg.Local.DNSAddr != "127.0.0.2:5300" || cfg.Local.CatcherAddr != "127.0.0.1:2025" || cfg.Local.CatcherMax != 20 {
		t.Fatalf("set: %+v", cfg.Local)
	}
	if err := cfg.Validate(Targets(tiers)); err != nil {
		t.Fatalf("valid local configuration refused: %v", err)
	}

	// The retry schedule: local mode shortens what the user left unset, and only that.
	for _, c := range []struct {
		name            string
		env             map[string]string
		base, maxAge    time.Duration
		shortB, shortMA bool
	}{
		{"local, unset", map[string]string{"POSTMILL_LOCAL": "true"}, LocalMTARetryBase, LocalMTAMaxAge, true, true},
		{"local, both set", map[string]string{"POSTMILL_LOCAL": "true", "POSTMILL_MTA_RETRY_BASE": "2s", "POSTMILL_MTA_MAX_AGE": "20s"},
			2 * time.Second, 20 * time.Second, false, false},
		{"local, max age set", map[string]string{"POSTMILL_LOCAL": "true", "POSTMILL_MTA_MAX_AGE": "72h"}, LocalMTARetryBase, 72 * time.Hour, true, false},
		{"local, long retry base set", map[string]string{"POSTMILL_LOCAL": "true", "POSTMILL_MTA_RETRY_BASE": "10m"},
			10 * time.Minute, 10 * time.Minute, false, true},
		{"not local", map[string]string{}, time.Minute, 72 * time.Hour, false, false},
		{"local off", map[string]string{"POSTMILL_LOCAL": "false"}, time.Minute, 72 * time.Hour, false, false},
	} {
		cfg, err := load(c.env)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cfg.MTARetryBase != c.base || cfg.MTAMaxAge != c.maxAge || cfg.Local.ShortRetryBase != c.shortB || cfg.Local.ShortMaxAge != c.shortMA {
			t.Errorf("%s: retry base %s, max age %s, shortened %t %t; want %s, %s, %t %t", c.name, cfg.MTARetryBase, cfg.MTAMaxAge,
				cfg.Local.ShortRetryBase, cfg.Local.ShortMaxAge, c.base, c.maxAge, c.shortB, c.shortMA)
		}
	}
	if LocalMTAMaxAge > 2*time.Minute || LocalMTARetryBase > 10*time.Second {
		t.Errorf("local retry schedule %s/%s: delay@simulator.postmill.test would not fail within minutes", LocalMTARetryBase, LocalMTAMaxAge)
	}

	for _, env := range []map[string]string{{"POSTMILL_LOCAL": "yes please"}, {"POSTMILL_CATCHER_MAX": "0"}, {"POSTMILL_CATCHER_MAX": "many"}} {
		if _, err := load(env); err == nil {
			t.Errorf("%v was accepted", env)
		}
	}
	cfg.Local.CatcherAddr = "localhost:1025"
	if err := cfg.Validate(Targets(tiers)); err == nil || !strings.Contains(err.Error(), "POSTMILL_CATCHER_ADDR") {
		t.Errorf("a catcher address that is not IP:port: %v", err)
	}
	cfg.Local.CatcherAddr = "127.0.0.1:1025"
	if err := cfg.Validate(Targets{TargetCore, TargetEdge}); err == nil || !strings.Contains(err.Error(), "mta is missing") {
		t.Errorf("local mode without the MTA in the process: %v", err)
	}
}

// TestLocalMTARoute: with the local DNS as resolver the MTA keeps MX routing, takes the catcher's port and
// exempts exactly the catcher's address; with the user's resolver the catcher is the relay; a relay the
// user set is left alone; without local mode nothing changes.
func TestLocalMTARoute(t *testing.T) {
	t.Parallel()
	operator := netip.MustParsePrefix("10.1.0.0/16")
	a := &App{cfg: Config{MTAPort: 25, MTAAllowNets: []netip.Prefix{operator}}}
	if port, relay, allow := a.mtaRoute(); port != 25 || relay != "" || !slices.Equal(allow, []netip.Prefix{operator}) {
		t.Fatalf("without local mode: %d %q %v", port, relay, allow)
	}

	a.local.catcher = &catcher.Catcher{}
	a.local.catcherAddr = netip.MustParseAddrPort("127.0.0.1:40125")
	a.local.ownResolver = true
	port, relay, allow := a.mtaRoute()
	want := []netip.Prefix{operator, netip.MustParsePrefix("127.0.0.1/32")}
	if port != 40125 || relay != "" || !slices.Equal(allow, want) {
		t.Fatalf("local DNS: %d %q %v, want port 40125, MX routing, %v", port, relay, allow, want)
	}
	if !slices.Equal(a.cfg.MTAAllowNets, []netip.Prefix{operator}) {
		t.Fatal("the configured exemptions were changed in place")
	}

	a.local.ownResolver = false
	if port, relay, allow := a.mtaRoute(); port != 25 || relay != "127.0.0.1:40125" || !slices.Equal(allow, []netip.Prefix{operator}) {
		t.Fatalf("user's resolver: %d %q %v, want the catcher as relay", port, relay, allow)
	}

	a.cfg.MTARelay = "smtp.example:587"
	if port, relay, _ := a.mtaRoute(); port != 25 || relay != "smtp.example:587" {
		t.Fatalf("user's relay: %d %q", port, relay)
	}
}

// TestLocalWebhookAllowNets: local mode lets webhooks reach a receiver on loopback and nothing else the
// forbidden-address rule refuses; without local mode only POSTMILL_WEBHOOK_ALLOW_NETS is exempt.
func TestLocalWebhookAllowNets(t *testing.T) {
	t.Parallel()
	operator := netip.MustParsePrefix("10.2.0.0/16")
	a := &App{cfg: Config{WebhookAllowNets: []netip.Prefix{operator}}}
	if got := a.webhookAllowNets(); !slices.Equal(got, []netip.Prefix{operator}) {
		t.Fatalf("without local mode: %v", got)
	}
	a.cfg.Local.Enabled = true
	want := []netip.Prefix{operator, netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	if got := a.webhookAllowNets(); !slices.Equal(got, want) {
		t.Fatalf("local mode: %v, want %v", got, want)
	}
	if !slices.Equal(a.cfg.WebhookAllowNets, []netip.Prefix{operator}) {
		t.Fatal("the configured exemptions were changed in place")
	}
}
