package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postmill/postmill/adapters/rpc"
)

// TestRPCSettingsFromEnv: the RPC TLS files make the default core URL https; a process given its tier
// credential and no secret key neither reads nor creates a master secret.
func TestRPCSettingsFromEnv(t *testing.T) {
	t.Parallel()
	cred, err := TierCredential([][]byte{[]byte("rpc settings test master")}, "edge")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := map[string]string{
		"POSTMILL_DATA_DIR":       dir,
		"POSTMILL_RPC_ADDR":       "core.internal:8443",
		"POSTMILL_RPC_TLS_CERT":   "/etc/postmill/edge.pem",
		"POSTMILL_RPC_TLS_KEY":    "/etc/postmill/edge-key.pem",
		"POSTMILL_RPC_TLS_CA":     "/etc/postmill/ca.pem",
		"POSTMILL_RPC_CREDENTIAL": " " + cred + " ",
	}
	cfg, err := LoadEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CoreURL != "https://core.internal:8443" {
		t.Errorf("CoreURL = %q, want https by default with TLS settings", cfg.CoreURL)
	}
	if cfg.RPCTLSCert != "/etc/postmill/edge.pem" || cfg.RPCTLSKey != "/etc/postmill/edge-key.pem" || cfg.RPCTLSCA != "/etc/postmill/ca.pem" {
		t.Errorf("TLS files %q %q %q", cfg.RPCTLSCert, cfg.RPCTLSKey, cfg.RPCTLSCA)
	}
	if len(cfg.RPCCredentials) != 1 || cfg.RPCCredentials[0] != cred {
		t.Errorf("RPCCredentials = %d entries", len(cfg.RPCCredentials))
	}
	if len(cfg.SecretKeys) != 0 {
		t.Error("a process given its credential has a secret key")
	}
	if _, err := os.Stat(filepath.Join(dir, "secret.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a process given its credential created a secret: %v", err)
	}

	// Without the credential the generated secret is still the default, and the URL plain http.
	delete(env, "POSTMILL_RPC_CREDENTIAL")
	for _, k := range []string{"POSTMILL_RPC_TLS_CERT", "POSTMILL_RPC_TLS_KEY", "POSTMILL_RPC_TLS_CA"} {
		delete(env, k)
	}
	cfg, err = LoadEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.SecretKeys) != 1 || cfg.CoreURL != "http://core.internal:8443" {
		t.Errorf("without credential or TLS: %d keys, CoreURL %q", len(cfg.SecretKeys), cfg.CoreURL)
	}
}

// TestValidateRPC: what each kind of process needs for the hop, refused at start with an error that
// never repeats a credential.
func TestValidateRPC(t *testing.T) {
	t.Parallel()
	master := [][]byte{[]byte("validate rpc test master")}
	edgeCred, _ := TierCredential(master, "edge")
	mtaCred, _ := TierCredential(master, "mta")
	base := func() Config {
		return Config{
			DatabaseURL: "postgres://db/postmill", HTTPAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:0",
			SMTPAddr: "127.0.0.1:0", SubmissionAddr: "127.0.0.1:0", CoreURL: "http://core:8081",
			TrackingScheme: "https", Queue: "postgres", Analytics: "postgres", Blob: "fs", Scanner: "builtin",
			MTAConcurrency: 1,
		}
	}
	for _, c := range []struct {
		name    string
		targets string
		edit    func(*Config)
		want    string // "" = valid
	}{
		{"core with its secret", "core", func(c *Config) { c.SecretKeys = master }, ""},
		{"core without a secret", "core", func(c *Config) { c.RPCCredentials = []string{edgeCred} }, "the core needs POSTMILL_SECRET_KEY"},
		{"edge with its credential only", "edge", func(c *Config) { c.RPCCredentials = []string{edgeCred} }, ""},
		{"edge with the secret only", "edge", func(c *Config) { c.SecretKeys = master }, ""},
		{"edge and mta with both credentials", "edge,mta", func(c *Config) { c.RPCCredentials = []string{edgeCred, mtaCred} }, ""},
		{"mta with the edge's credential", "mta", func(c *Config) { c.RPCCredentials = []string{edgeCred} }, "needs a mta credential"},
		{"edge with neither", "edge", func(c *Config) {}, "needs a edge credential"},
		{"malformed credential", "edge", func(c *Config) { c.RPCCredentials = []string{edgeCred[:20] + "zz" + edgeCred[22:]} }, "entry 1 is not a tier credential"},
		{"TLS settings with an http core URL", "edge", func(c *Config) {
			c.RPCCredentials = []string{edgeCred}
			c.RPCTLSCA = "/ca.pem"
		}, "must be https://"},
		{"TLS settings with an https core URL", "edge", func(c *Config) {
			c.RPCCredentials = []string{edgeCred}
			c.RPCTLSCA, c.CoreURL = "/ca.pem", "https://core:8443"
		}, ""},
		{"core URL without a host", "inbound", func(c *Config) {
			c.SecretKeys, c.CoreURL = master, "core:8081"
		}, "POSTMILL_CORE_URL"},
		{"certificate without its key", "edge", func(c *Config) {
			c.SecretKeys, c.RPCTLSCert, c.CoreURL = master, "/edge.pem", "https://core:8443"
		}, "POSTMILL_RPC_TLS_CERT and POSTMILL_RPC_TLS_KEY go together"},
		{"client CA on a core without a certificate", "core", func(c *Config) {
			c.SecretKeys, c.RPCTLSCA = master, "/ca.pem"
		}, "requires client certificates over TLS"},
		{"mutual TLS on the core", "core", func(c *Config) {
			c.SecretKeys, c.RPCTLSCert, c.RPCTLSKey, c.RPCTLSCA = master, "/core.pem", "/core-key.pem", "/ca.pem"
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := base()
			c.edit(&cfg)
			targets, err := ParseTargets(c.targets)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate(targets)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("err = %v, want one saying %q", err, c.want)
			}
			if err != nil && (strings.Contains(err.Error(), edgeCred[12:]) || strings.Contains(err.Error(), mtaCred[12:])) {
				t.Errorf("the error repeats a credential: %v", err)
			}
		})
	}
}

// TestProcessWithoutCoreBuildsNoKeyring: a process running tiers without the core never builds the
// keyring, keeps no master secret, and presents its tier's credential, the given one or, in a deployment
// sharing the secret, the one derived from it (which the core admits).
func TestProcessWithoutCoreBuildsNoKeyring(t *testing.T) {
	t.Parallel()
	master := [][]byte{[]byte("no keyring test master")}
	given, _ := TierCredential([][]byte{[]byte("another deployment's master")}, "edge")
	for _, c := range []struct {
		name        string
		keys        [][]byte
		credentials []string
		want        map[rpc.Tier]string
	}{
		{"credential only", nil, []string{given}, map[rpc.Tier]string{rpc.TierEdge: given}},
		{"secret only", master, nil, map[rpc.Tier]string{rpc.TierEdge: mustCredential(t, master, "edge"), rpc.TierMTA: mustCredential(t, master, "mta")}},
		{"both: the credential wins", master, []string{given}, map[rpc.Tier]string{rpc.TierEdge: given, rpc.TierMTA: mustCredential(t, master, "mta")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{
				HTTPAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:0", SMTPAddr: "127.0.0.1:0", SubmissionAddr: "127.0.0.1:0",
				CoreURL: "http://127.0.0.1:1", TrackingScheme: "https", Queue: "kafka", KafkaBrokers: []string{"127.0.0.1:1"},
				Analytics: "postgres", Blob: "fs", Scanner: "builtin", MTAConcurrency: 1, DataDir: t.TempDir(),
				SecretKeys: c.keys, RPCCredentials: c.credentials,
			}
			targets := Targets{TargetEdge}
			if len(c.want) == 2 {
				targets = append(targets, TargetMTA)
			}
			a, err := New(cfg, targets, nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.keyring != nil || a.cfg.SecretKeys != nil {
				t.Error("a process without the core holds the keyring or the master secret")
			}
			if len(a.credentials) != len(c.want) {
				t.Errorf("%d credentials, want %d", len(a.credentials), len(c.want))
			}
			for tier, want := range c.want {
				if a.credentials[tier] != want {
					t.Errorf("the %s tier presents the wrong credential", tier)
				}
			}
		})
	}
	// The core derives and admits exactly the credentials a tier derives from the same secret.
	core, err := New(Config{
		DatabaseURL: "postgres://db/postmill", HTTPAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:0", SMTPAddr: "127.0.0.1:0",
		SubmissionAddr: "127.0.0.1:0", TrackingScheme: "https", Queue: "postgres", Analytics: "postgres", Blob: "fs",
		Scanner: "builtin", MTAConcurrency: 1, SecretKeys: master,
	}, Targets{TargetCore}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if core.keyring == nil || len(core.credentials) != 0 {
		t.Fatal("the core has no keyring, or credentials of a caller")
	}
	admitted := core.serverCredentials()
	for _, tier := range []string{"edge", "mta", "inbound"} {
		if !strings.Contains(strings.Join(admitted, ","), mustCredential(t, master, tier)) {
			t.Errorf("the core does not admit the %s credential derived from its secret", tier)
		}
	}
}

func mustCredential(tb testing.TB, keys [][]byte, tier string) string {
	tb.Helper()
	c, err := TierCredential(keys, tier)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
