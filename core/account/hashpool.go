package account

import (
	"context"
	"runtime"

	"github.com/postmill/postmill/ports"
)

// DefaultPasswordQueuePerWorker is how many callers may wait per argon2id worker before more are turned away.
// At the default cost one hash takes a few tens of milliseconds, so a full queue drains in well under a
// second.
const DefaultPasswordQueuePerWorker = 8

// passwordBusyRetrySeconds is the retryAfterSeconds of a login turned away because the hash queue is full:
// the queue drains within a second, so one second is enough.
const passwordBusyRetrySeconds = 1

// hashPool bounds argon2id work: at most workers hashes run at once (each holds Memory KiB for its
// duration), and at most queue more callers wait for a turn. A caller beyond that is answered at once with
// the SPEC §7 rate-limit error rather than queued without bound, so a flood of logins costs bounded memory
// and CPU and the edge answers 429 instead of stalling every request.
type hashPool struct {
	admitted chan struct{} // running or waiting callers; capacity workers+queue
	running  chan struct{} // running hashes; capacity workers
}

func newHashPool(workers, queue int) *hashPool {
	return &hashPool{admitted: make(chan struct{}, workers+queue), running: make(chan struct{}, workers)}
}

// defaultPasswordWorkers is one argon2id hash per CPU the process may use: more would only share the same
// cores while holding more memory.
func defaultPasswordWorkers() int { return runtime.GOMAXPROCS(0) }

// do runs f when a worker is free. Errors: resource_exhausted (SPEC §7 429) when the queue is full, or the
// context's error when the caller gives up while waiting.
func (p *hashPool) do(ctx context.Context, f func()) error {
	select {
	case p.admitted <- struct{}{}:
	default:
		return ports.RateLimited(passwordBusyRetrySeconds)
	}
	defer func() { <-p.admitted }()
	select {
	case p.running <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.running }()
	f()
	return nil
}

// hash is hashPassword in the pool.
func (s *Service) hash(ctx context.Context, password string) (string, error) {
	var out string
	err := s.pool.do(ctx, func() { out = hashPassword(password, s.cfg.PasswordParams) })
	return out, err
}

// verify is verifyPassword in the pool. Its error is either the pool's or a malformed stored hash's.
func (s *Service) verify(ctx context.Context, password, encoded string) (bool, error) {
	var (
		match bool
		err   error
	)
	if perr := s.pool.do(ctx, func() { match, err = s.verifyFn(password, encoded) }); perr != nil {
		return false, perr
	}
	return match, err
}
