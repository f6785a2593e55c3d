package app

import "github.com/postmill/postmill/core/domain"

// coreDomain builds the sending domains: DKIM keys, the records to publish and their verification, which
// the rate limiter (built before) throttles.
func (a *App) coreDomain(env *coreEnv) error {
	domains, err := domain.New(domain.Config{
		SPFInclude: a.cfg.SpfInclude, ReturnPathHost: a.cfg.ReturnPathHost,
		TrackingHost: a.cfg.TrackingHost, DMARCRua: a.cfg.DMARCRua, MaxDomains: a.cfg.MaxDomainsPerOrg,
	}, domain.Deps{Domains: env.store, Resolver: a.dnsResolver(), RateLimiter: env.core.RateLimiter, Keyring: env.keyring,
		Clock: env.clock, Logger: env.logger})
	if err != nil {
		return err
	}
	env.core.Domains = domains
	return nil
}
