package app

import (
	"strings"
	"testing"

	"github.com/postmill/postmill/mta"
)

// TestMTASigningNiceSetting: POSTMILL_MTA_SIGNING_NICE defaults to mta.DefaultSigningNice, 0 is allowed
// (signing at the process's priority), and a value outside 0-19 stops the start naming the variable.
func TestMTASigningNiceSetting(t *testing.T) {
	t.Parallel()
	load := func(v string) (Config, error) {
		vars := map[string]string{"POSTMILL_SECRET_KEY": "0123456789abcdef0123", "POSTMILL_DATA_DIR": t.TempDir(),
			"POSTMILL_DATABASE_URL": "postgres://postmill@127.0.0.1:5432/postmill"}
		if v != "" {
			vars["POSTMILL_MTA_SIGNING_NICE"] = v
		}
		c, err := LoadEnv(func(k string) string { return vars[k] })
		if err != nil {
			return c, err
		}
		targets, err := ParseTargets("all")
		if err != nil {
			t.Fatal(err)
		}
		return c, c.Validate(targets)
	}
	if c, err := load(""); err != nil || c.MTASigningNice != mta.DefaultSigningNice {
		t.Fatalf("default: %d, %v", c.MTASigningNice, err)
	}
	if c, err := load("0"); err != nil || c.MTASigningNice != 0 {
		t.Fatalf("0: %d, %v", c.MTASigningNice, err)
	}
	for _, v := range []string{"20", "-1"} {
		if _, err := load(v); err == nil || !strings.Contains(err.Error(), "POSTMILL_MTA_SIGNING_NICE") {
			t.Errorf("%s: %v, want an error naming the variable", v, err)
		}
	}
}
