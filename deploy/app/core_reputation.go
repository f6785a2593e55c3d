package app

import (
	"strings"

	"github.com/postmill/postmill/core/dmarc"
	"github.com/postmill/postmill/core/reputation"
)

// coreReputation builds GET /v1/reputation and runs the loop of automatic protection and adaptive warm-up.
// Its settings are Config.Reputation (core_reputation_config.go, docs/reputation.md).
func (a *App) coreReputation(env *coreEnv) error {
	svc, err := reputation.New(a.cfg.Reputation.serviceConfig(), reputation.Deps{Store: env.store, Clock: env.clock, Logger: env.logger})
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

// dmarcRUA is the DMARC aggregate report mailbox the MX listener accepts: POSTMILL_DMARC_RUA, the
// address the domains' recommended DMARC record names; empty accepts none.
func (a *App) dmarcRUA() string {
	return strings.ToLower(strings.TrimSpace(a.cfg.DMARCRua))
}
