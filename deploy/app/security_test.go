package app

import (
	"slices"
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

// During a rotation the core admits the RPC token of every master on its keyring: a process whose primary
// is still the old master presents exactly one of them.
func TestOlderRPCTokens(t *testing.T) {
	t.Parallel()
	keyring := func(masters ...string) *App {
		bs := make([][]byte, len(masters))
		for i, m := range masters {
			bs[i] = []byte(m)
		}
		k, err := secret.NewKeyring(bs...)
		if err != nil {
			t.Fatal(err)
		}
		return &App{keyring: k}
	}
	oldProc, newProc := keyring("rpc token test old master"), keyring("rpc token test new master", "rpc token test old master")
	if got := newProc.olderRPCTokens(); !slices.Equal(got, []string{oldProc.rpcToken()}) {
		t.Fatalf("older tokens %v, want the old process's token", got)
	}
	if newProc.rpcToken() == oldProc.rpcToken() || len(oldProc.olderRPCTokens()) != 0 {
		t.Fatal("tokens do not follow the primary")
	}
}
