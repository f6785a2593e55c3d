package app

import (
	"strings"
	"testing"
)

func TestLoadMTATLSEnv(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) Getenv { return func(k string) string { return m[k] } }
	c, err := loadMTATLSEnv(env(nil))
	if err != nil || !c.STS || !c.DANE || c.STSPort != 443 || c.RootsFile != "" {
		t.Fatalf("defaults %+v, %v", c, err)
	}
	c, err = loadMTATLSEnv(env(map[string]string{"POSTMILL_MTA_TLS_POLICIES": "MTA-STS", "POSTMILL_MTA_STS_PORT": "8443",
		"POSTMILL_MTA_TLS_ROOTS": "/etc/roots.pem"}))
	if err != nil || !c.STS || c.DANE || c.STSPort != 8443 || c.RootsFile != "/etc/roots.pem" {
		t.Fatalf("mta-sts only %+v, %v", c, err)
	}
	if c, err = loadMTATLSEnv(env(map[string]string{"POSTMILL_MTA_TLS_POLICIES": "none"})); err != nil || c.STS || c.DANE {
		t.Fatalf("none %+v, %v", c, err)
	}
	_, err = loadMTATLSEnv(env(map[string]string{"POSTMILL_MTA_TLS_POLICIES": "dane,tofu", "POSTMILL_MTA_STS_PORT": "0"}))
	if err == nil || !strings.Contains(err.Error(), "tofu") || !strings.Contains(err.Error(), "POSTMILL_MTA_STS_PORT") {
		t.Fatalf("invalid values: %v", err)
	}
}
