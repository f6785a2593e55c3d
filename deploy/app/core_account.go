package app

import (
	"github.com/postmill/postmill/core/account"
	"github.com/postmill/postmill/ports"
)

// coreAccount builds sign-up, sessions, API keys, SMTP credentials and organizations (one service behind five
// ports), and runs its loop that records API keys' last use. Its per-account login throttle counts in the
// rate limiter (built before).
func (a *App) coreAccount(env *coreEnv) error {
	host, port := a.cfg.submission()
	acc, err := account.New(account.Config{
		AdminEmails:    a.cfg.AdminEmails,
		DefaultPlan:    ports.Plan{MonthlyLimit: a.cfg.DefaultMonthly, WarmupCap: a.cfg.DefaultWarmupCap},
		SubmissionHost: host,
		SubmissionPort: port,
		MaxAPIKeys:     a.cfg.MaxAPIKeysPerOrg,
		// A key is cached no longer than the organization it acts for; revocations arrive on env.changes.
		APIKeyCacheTTL: a.cfg.LookupCacheTTL,
	}, account.Deps{
		Accounts: env.store, Organizations: env.store, APIKeys: env.store, SMTPCredentials: env.store,
		RateLimiter: env.core.RateLimiter, Changes: env.changes, Clock: env.clock, Keyring: env.keyring, Logger: env.logger,
	})
	if err != nil {
		return err
	}
	env.core.Accounts, env.core.Auth, env.core.APIKeys = acc, acc, acc
	env.core.SMTPCredentials, env.core.Organizations = acc, acc
	env.loops = append(env.loops, acc.Run)
	return nil
}
