package domain

import (
	"testing"
	"time"
)

func validConfig() Config {
	return Config{
		SPFInclude:     "spf.postmill.test",
		ReturnPathHost: "bounces.postmill.test",
		TrackingHost:   "track.postmill.test",
		DMARCRua:       "dmarc@reports.postmill.test",
		KeyBits:        1024,
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"valid", func(*Config) {}, true},
		{"hosts normalised", func(c *Config) { c.SPFInclude = " SPF.Postmill.Test. " }, true},
		{"missing SPF include", func(c *Config) { c.SPFInclude = "" }, false},
		{"missing return path", func(c *Config) { c.ReturnPathHost = "" }, false},
		{"tracking host without dot", func(c *Config) { c.TrackingHost = "localhost" }, false},
		{"rua without @", func(c *Config) { c.DMARCRua = "reports.postmill.test" }, false},
		{"rua with semicolon", func(c *Config) { c.DMARCRua = "a;b@reports.postmill.test" }, false},
		{"rua bad domain", func(c *Config) { c.DMARCRua = "dmarc@bad_domain.test" }, false},
		{"key too small", func(c *Config) { c.KeyBits = 512 }, false},
		{"key too large", func(c *Config) { c.KeyBits = 8192 }, false},
		{"negative limit", func(c *Config) { c.VerifyLimit = -1 }, false},
		{"negative window", func(c *Config) { c.VerifyWindow = -time.Second }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig()
			tt.mutate(&c)
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v; want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{SPFInclude: " SPF.Postmill.Test. "}.withDefaults()
	if c.Region != "us-east-1" || c.KeyBits != 2048 || c.VerifyLimit != 10 || c.VerifyWindow != time.Hour {
		t.Fatalf("defaults: %+v", c)
	}
	if c.SPFInclude != "spf.postmill.test" {
		t.Fatalf("SPF include not normalised: %q", c.SPFInclude)
	}
}
