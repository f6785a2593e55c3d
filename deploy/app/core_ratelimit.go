package app

import "github.com/postmill/postmill/core/ratelimit"

// coreRateLimit builds the request-rate limiter the edge and the account and domain areas consult, and runs
// its loop that deletes the counters of ended windows.
func (a *App) coreRateLimit(env *coreEnv) error {
	limiter := ratelimit.New(env.store, env.clock)
	env.core.RateLimiter = limiter
	env.loops = append(env.loops, limiter.Run)
	return nil
}
