package app

import (
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/core/secret"
)

func TestAdminRequire2FAFromEnv(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		value   string
		want    bool
		wantErr bool
	}{{"", true, false}, {"true", true, false}, {"false", false, false}, {"0", false, false}, {"maybe", true, true}} {
		env := map[string]string{"POSTMILL_SECRET_KEY": "admin-2fa-test-secret", "POSTMILL_ADMIN_REQUIRE_2FA": c.value}
		cfg, err := LoadEnv(func(k string) string { return env[k] })
		if (err != nil) != c.wantErr {
			t.Errorf("POSTMILL_ADMIN_REQUIRE_2FA=%q: err %v", c.value, err)
			continue
		}
		if err == nil && cfg.AdminRequire2FA != c.want {
			t.Errorf("POSTMILL_ADMIN_REQUIRE_2FA=%q gives %v, want %v", c.value, cfg.AdminRequire2FA, c.want)
		}
	}
}

// During a rotation the core admits every tier's credential of every master on its keyring: a process
// whose primary is still the old master presents exactly one of them per tier.
func TestServerCredentialsFollowRotation(t *testing.T) {
	t.Parallel()
	keys := func(masters ...string) [][]byte {
		bs := make([][]byte, len(masters))
		for i, m := range masters {
			bs[i] = []byte(m)
		}
		return bs
	}
	core := func(masters ...string) *App {
		k, err := secret.NewKeyring(keys(masters...)...)
		if err != nil {
			t.Fatal(err)
		}
		return &App{keyring: k}
	}
	oldKeys, newKeys := keys("rpc token test old master"), keys("rpc token test new master", "rpc token test old master")
	admitted := core("rpc token test new master", "rpc token test old master").serverCredentials()
	oldOnly := core("rpc token test old master").serverCredentials()
	for _, tier := range []string{TargetEdge, TargetMTA, TargetInbound} {
		oldCred, err := TierCredential(oldKeys, tier)
		if err != nil {
			t.Fatal(err)
		}
		newCred, _ := TierCredential(newKeys, tier)
		if !slices.Contains(admitted, oldCred) || !slices.Contains(admitted, newCred) {
			t.Errorf("%s: the rotating core does not admit both masters' credentials", tier)
		}
		if !slices.Contains(oldOnly, oldCred) || slices.Contains(oldOnly, newCred) {
			t.Errorf("%s: a core with only the old master admits the wrong credentials", tier)
		}
		if !strings.HasPrefix(newCred, "pmrpc_"+tier+"_") || newCred == oldCred {
			t.Errorf("%s: credential does not name its tier or does not follow the primary", tier)
		}
	}
	if len(admitted) != 6 || len(oldOnly) != 3 {
		t.Errorf("admitted %d and %d credentials, want one per tier and master", len(admitted), len(oldOnly))
	}
}
