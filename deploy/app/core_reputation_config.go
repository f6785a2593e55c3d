package app

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/postmill/postmill/core/reputation"
)

// ReputationConfig is automatic protection and adaptive warm-up (docs/reputation.md). A zero field keeps
// the default of core/reputation.
type ReputationConfig struct {
	ComplaintRate float64       // POSTMILL_PROTECTION_COMPLAINT_RATE: pauses broadcasts (default 0.003; negative: off)
	BounceRate    float64       // POSTMILL_PROTECTION_BOUNCE_RATE: hard-bounce rate that pauses them (default 0.05; negative: off)
	MinVolume     int64         // POSTMILL_PROTECTION_MIN_VOLUME: emails in the window below which nothing is judged (default 100)
	Window        time.Duration // POSTMILL_PROTECTION_WINDOW: what protection looks at (default 24h)
	Interval      time.Duration // POSTMILL_PROTECTION_INTERVAL: how often it checks (default 5m)
	WarmupFactor  float64       // POSTMILL_WARMUP_FACTOR: a healthy day's warm-up cap multiplier (default 1.5; 1: off)
	WarmupCeiling int64         // POSTMILL_WARMUP_CEILING: the cap at which warm-up ends (default 100000)
}

// loadReputationEnv reads the variables of ReputationConfig; a value that does not parse is an error.
func loadReputationEnv(getenv Getenv) (ReputationConfig, error) {
	var c ReputationConfig
	var errs []error
	num := func(name string, into *float64) {
		if v := getenv(name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a number", name, v))
			}
			*into = f
		}
	}
	integer := func(name string, into *int64) {
		if v := getenv(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a whole number of 0 or more", name, v))
			}
			*into = n
		}
	}
	dur := func(name string, into *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a duration such as 200ms, 5m or 24h", name, v))
			}
			*into = d
		}
	}
	num("POSTMILL_PROTECTION_COMPLAINT_RATE", &c.ComplaintRate)
	num("POSTMILL_PROTECTION_BOUNCE_RATE", &c.BounceRate)
	integer("POSTMILL_PROTECTION_MIN_VOLUME", &c.MinVolume)
	dur("POSTMILL_PROTECTION_WINDOW", &c.Window)
	dur("POSTMILL_PROTECTION_INTERVAL", &c.Interval)
	num("POSTMILL_WARMUP_FACTOR", &c.WarmupFactor)
	integer("POSTMILL_WARMUP_CEILING", &c.WarmupCeiling)
	return c, errors.Join(errs...)
}

// serviceConfig is the core's configuration: the default thresholds, with each set field over its default.
func (c ReputationConfig) serviceConfig() reputation.Config {
	cfg := reputation.Config{Thresholds: reputation.DefaultThresholds}
	cfg.ProtectComplaintRate, cfg.ProtectBounceRate = c.ComplaintRate, c.BounceRate
	if c.MinVolume > 0 {
		cfg.Thresholds.MinVolume = c.MinVolume
	}
	cfg.ProtectWindow, cfg.Interval = c.Window, c.Interval
	cfg.WarmupFactor, cfg.WarmupCeiling = c.WarmupFactor, c.WarmupCeiling
	return cfg
}
