package app

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/postmill/postmill/core/dmarc"
	"github.com/postmill/postmill/core/reputation"
)

// coreReputation builds GET /v1/reputation and runs the loop of automatic protection and adaptive warm-up.
// Its settings come from the environment (docs/reputation.md):
//
//	POSTMILL_PROTECTION_COMPLAINT_RATE  complaint rate that pauses broadcasts (default 0.003; negative: off)
//	POSTMILL_PROTECTION_BOUNCE_RATE     hard-bounce rate that pauses broadcasts (default 0.05; negative: off)
//	POSTMILL_PROTECTION_MIN_VOLUME      emails sent in the window below which nothing is judged (default 100)
//	POSTMILL_PROTECTION_WINDOW          the window protection looks at (default 24h)
//	POSTMILL_PROTECTION_INTERVAL        how often it checks (default 5m)
//	POSTMILL_WARMUP_FACTOR              a healthy day's warm-up cap multiplier (default 1.5; 1: off)
//	POSTMILL_WARMUP_CEILING             the cap at which warm-up ends and the cap is lifted (default 100000)
func (a *App) coreReputation(env *coreEnv) error {
	cfg := reputation.Config{Thresholds: reputation.DefaultThresholds}
	var err error
	num := func(name string, into *float64) {
		if v := os.Getenv(name); v != "" && err == nil {
			if *into, err = strconv.ParseFloat(v, 64); err != nil {
				err = fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	dur := func(name string, into *time.Duration) {
		if v := os.Getenv(name); v != "" && err == nil {
			if *into, err = time.ParseDuration(v); err != nil {
				err = fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	integer := func(name string, into *int64) {
		if v := os.Getenv(name); v != "" && err == nil {
			if *into, err = strconv.ParseInt(v, 10, 64); err != nil {
				err = fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	num("POSTMILL_PROTECTION_COMPLAINT_RATE", &cfg.ProtectComplaintRate)
	num("POSTMILL_PROTECTION_BOUNCE_RATE", &cfg.ProtectBounceRate)
	integer("POSTMILL_PROTECTION_MIN_VOLUME", &cfg.Thresholds.MinVolume)
	dur("POSTMILL_PROTECTION_WINDOW", &cfg.ProtectWindow)
	dur("POSTMILL_PROTECTION_INTERVAL", &cfg.Interval)
	num("POSTMILL_WARMUP_FACTOR", &cfg.WarmupFactor)
	integer("POSTMILL_WARMUP_CEILING", &cfg.WarmupCeiling)
	if err != nil {
		return err
	}
	svc, err := reputation.New(cfg, reputation.Deps{Store: env.store, Clock: env.clock, Logger: env.logger})
	if err != nil {
		return err
	}
	env.core.Reputation = svc
	env.loops = append(env.loops, svc.Run)
	return nil
}

// coreDMARC builds the DMARC aggregate report area: the inbound tier hands it the mail sent to
// POSTMILL_DMARC_RUA, GET /v1/reputation/dmarc reads the summary.
func (a *App) coreDMARC(env *coreEnv) error {
	svc, err := dmarc.New(dmarc.Deps{Store: env.store, Clock: env.clock, Logger: env.logger})
	if err != nil {
		return err
	}
	env.core.DMARC = svc
	return nil
}

// dmarcRUA is the DMARC aggregate report mailbox the MX listener accepts (POSTMILL_DMARC_RUA); empty
// accepts none.
func dmarcRUA() string {
	return strings.ToLower(strings.TrimSpace(os.Getenv("POSTMILL_DMARC_RUA")))
}
