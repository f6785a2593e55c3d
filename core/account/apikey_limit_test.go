package account

import (
	"context"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

// boundKeys answers InsertAPIKeyWithin as an organization holding `held` active keys would.
type boundKeys struct {
	ports.APIKeyStore
	held   int
	gotMax int
	got    ports.APIKey
}

func (s *boundKeys) InsertAPIKeyWithin(_ context.Context, k ports.APIKey, max int) (bool, error) {
	s.gotMax = max
	if max > 0 && s.held >= max {
		return false, nil
	}
	s.held++
	s.got = k
	return true, nil
}

func newKeyService(tb testing.TB, cfg Config, keys *boundKeys) *Service {
	tb.Helper()
	cfg.PasswordParams = testPasswordParams
	unused := unusedStores{}
	svc, err := New(cfg, Deps{
		Accounts: newMemoryAccounts(), Organizations: unused, APIKeys: keys, SMTPCredentials: unused,
		RateLimiter: &countingLimiter{}, Clock: &testClock{now: testNow}, Keyring: mustKeyring(tb, testMasterOld),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return svc
}

// TestCreateAPIKeyPastTheBound: the store is asked with the configured bound (default 100); an organization
// at it gets the 403 that names the limit and the setting that raises it; a 400 stays a 400.
func TestCreateAPIKeyPastTheBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys := &boundKeys{held: 99}
	svc := newKeyService(t, Config{}, keys)
	created, err := svc.CreateAPIKey(ctx, "org1", "k", nil)
	if err != nil || keys.gotMax != DefaultMaxAPIKeys || created.Token == "" || keys.got.OrganizationID != "org1" {
		t.Fatalf("100th key: %v (max %d)", err, keys.gotMax)
	}
	_, err = svc.CreateAPIKey(ctx, "org1", "k", nil)
	e, ok := ports.AsError(err)
	if !ok || e.Code != ports.CodePermissionDenied || e.Reason != ports.ReasonResourceLimit ||
		e.Fields["limit"] != 100 || e.Fields["resource"] != ports.ResourceAPIKeys {
		t.Fatalf("101st key: %#v", err)
	}
	if !strings.Contains(e.Message, "100 active API keys") || !strings.Contains(e.Message, MaxAPIKeysSetting) {
		t.Errorf("message %q", e.Message)
	}
	if _, err := svc.CreateAPIKey(ctx, "org1", "", nil); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Errorf("an invalid name at the bound: %v", err)
	}

	small := &boundKeys{held: 3}
	if _, err := newKeyService(t, Config{MaxAPIKeys: 3}, small).CreateAPIKey(ctx, "org1", "k", nil); ports.ErrorCode(err) != ports.CodePermissionDenied || small.gotMax != 3 {
		t.Fatalf("configured bound 3: %v (max %d)", err, small.gotMax)
	}
	if (Config{MaxAPIKeys: -1}).Validate() == nil {
		t.Error("a negative bound was accepted")
	}
}
