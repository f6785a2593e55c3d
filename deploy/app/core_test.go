package app

import (
	"context"
	"log/slog"
	"reflect"
	"testing"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// testApp is an App that has not started, configured as `make run` would be, with its store set.
func testApp(t *testing.T) *App {
	t.Helper()
	env := map[string]string{"POSTMILL_SECRET_KEY": "core-areas-test-secret", "POSTMILL_DATA_DIR": t.TempDir()}
	cfg, err := LoadEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	keyring, err := secret.NewKeyring(cfg.SecretKeys...)
	if err != nil {
		t.Fatal(err)
	}
	a := &App{cfg: cfg, logger: slog.New(slog.DiscardHandler), keyring: keyring, store: pgtest.Store(t)}
	t.Cleanup(a.closeShared)
	return a
}

// Every area together fills every port of ports.Core, the template service serves as the Renderer too, and
// the core runs each area's background loops: a port or loop left out by an area would leave a tier, or
// the RPC server, calling nil.
func TestBuildCoreFillsEveryPort(t *testing.T) {
	t.Parallel()
	a := testApp(t)
	core, loops, err := a.buildCore(context.Background(), a.Store())
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(core)
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			t.Errorf("ports.Core.%s is nil after every area was built", v.Type().Field(i).Name)
		}
	}
	if r, ok := core.Templates.(ports.TemplateRenderer); !ok || core.Renderer != r {
		t.Error("the core's Renderer is not its template service")
	}
	// the change feed's listener, account, rate limit, sending (relay, scheduler, pruner, held-delivery
	// release), webhook (fan-out, dispatcher), inbound (webhook routes), broadcast (expander), reputation
	if len(loops) != 12 {
		t.Errorf("the core runs %d background loops, want 12", len(loops))
	}
}

// An area built before the areas it uses fails at start instead of running without them.
func TestCoreAreasNeedTheirDependencies(t *testing.T) {
	t.Parallel()
	a := testApp(t)
	env := &coreEnv{ctx: context.Background(), store: a.Store(), keyring: a.keyring, clock: ports.SystemClock{}, logger: a.logger}
	if err := a.coreAccount(env); err == nil {
		t.Error("the account area was built without the rate limiter")
	}
	if err := a.coreDomain(env); err == nil {
		t.Error("the domain area was built without the rate limiter")
	}
	if err := a.coreSending(env); err == nil {
		t.Error("the sending area was built without the tracker and the template renderer")
	}
	if err := a.coreTracking(env); err != nil {
		t.Fatal(err)
	}
	if err := a.coreSending(env); err == nil {
		t.Error("the sending area was built without the template renderer")
	}
}
