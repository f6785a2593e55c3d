package submission

import (
	"strings"
	"sync"
	"time"
)

// Defaults of LockoutConfig.
const (
	// DefaultMaxAuthFailuresPerIP failed AUTH attempts from one client address (an IPv6 /64) lock that
	// address out: a mail client with a wrong password retries a few times, a password guesser many.
	DefaultMaxAuthFailuresPerIP = 5
	// DefaultMaxAuthFailuresPerUser failed attempts for one username, from any addresses, lock that username
	// out, so guessing from many addresses is bounded too. It is higher than the per-address bound because
	// a lockout of a username also keeps its rightful owner out until it ends.
	DefaultMaxAuthFailuresPerUser = 10
	// DefaultAuthLockout is the first lockout; each further lockout of the same address or username
	// doubles it (backoff), up to DefaultMaxAuthLockout.
	DefaultAuthLockout    = time.Minute
	DefaultMaxAuthLockout = time.Hour
	// DefaultAuthFailureMemory is how long failures and past lockouts are remembered: a key with no
	// failure for this long starts again from zero.
	DefaultAuthFailureMemory = 24 * time.Hour
	// maxLockoutEntries bounds the memory each of the two tables (addresses, usernames) may use when
	// failures come from very many addresses or name very many usernames.
	maxLockoutEntries = 100_000
	// maxTrackedUsername is the longest username counted per username: longer ones cannot be an SMTP
	// credential's, and the per-address bound still counts their failures.
	maxTrackedUsername = 128
)

// LockoutConfig says when failed AUTH attempts lock a client address or a username out. While locked out,
// AUTH answers 454 4.7.0 (RFC 4954 §6, temporary) without asking the core, whatever the password.
type LockoutConfig struct {
	// MaxFailuresPerIP and MaxFailuresPerUser are the failed attempts that start a lockout of a client
	// address or a username; zero means the defaults, negative disables that lockout.
	MaxFailuresPerIP   int
	MaxFailuresPerUser int
	// Lockout is the first lockout's length, doubled by each further one up to MaxLockout; zero means
	// the defaults.
	Lockout    time.Duration
	MaxLockout time.Duration
	// Memory is how long a key without failures is remembered; zero means DefaultAuthFailureMemory.
	Memory time.Duration
}

func (c LockoutConfig) withDefaults() LockoutConfig {
	if c.MaxFailuresPerIP == 0 {
		c.MaxFailuresPerIP = DefaultMaxAuthFailuresPerIP
	}
	if c.MaxFailuresPerUser == 0 {
		c.MaxFailuresPerUser = DefaultMaxAuthFailuresPerUser
	}
	if c.Lockout == 0 {
		c.Lockout = DefaultAuthLockout
	}
	if c.MaxLockout == 0 {
		c.MaxLockout = max(DefaultMaxAuthLockout, c.Lockout)
	}
	if c.Memory == 0 {
		c.Memory = DefaultAuthFailureMemory
	}
	return c
}

// lockout counts failed AUTH attempts per client address and per username and says who is locked out.
// It lives in one process: several submission processes each count their own.
type lockout struct {
	cfg   LockoutConfig
	now   func() time.Time
	mu    sync.Mutex
	addrs map[string]*failures
	users map[string]*failures
}

// failures is one key's record.
type failures struct {
	count       int       // failed attempts since the last lockout began
	lockouts    int       // lockouts so far: the next one lasts Lockout << lockouts
	lockedUntil time.Time // zero when not locked out
	last        time.Time // the last failure
}

func newLockout(cfg LockoutConfig, now func() time.Time) *lockout {
	return &lockout{cfg: cfg.withDefaults(), now: now, addrs: map[string]*failures{}, users: map[string]*failures{}}
}

// lockedFor reports how long the address or the username is still locked out (0: not locked out).
func (l *lockout) lockedFor(addr, user string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	wait := l.remaining(l.addrs, addr, now)
	if userKey, ok := trackedUser(user); ok {
		wait = max(wait, l.remaining(l.users, userKey, now))
	}
	return wait
}

func (l *lockout) remaining(table map[string]*failures, key string, now time.Time) time.Duration {
	f := table[key]
	if f == nil || !now.Before(f.lockedUntil) {
		return 0
	}
	return f.lockedUntil.Sub(now)
}

// failed records a failed attempt and reports whether it started a lockout.
func (l *lockout) failed(addr, user string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	locked := l.count(l.addrs, addr, l.cfg.MaxFailuresPerIP, now)
	if userKey, ok := trackedUser(user); ok {
		locked = l.count(l.users, userKey, l.cfg.MaxFailuresPerUser, now) || locked
	}
	return locked
}

func (l *lockout) count(table map[string]*failures, key string, limit int, now time.Time) bool {
	if limit < 0 {
		return false
	}
	f := table[key]
	if f != nil && now.Sub(f.last) > l.cfg.Memory {
		f = nil
	}
	if f == nil {
		l.makeRoom(table, now)
		f = &failures{}
		table[key] = f
	}
	f.last = now
	f.count++
	if f.count < limit {
		return false
	}
	wait := l.cfg.MaxLockout
	if f.lockouts < 32 {
		wait = min(l.cfg.Lockout<<f.lockouts, l.cfg.MaxLockout)
	}
	f.lockedUntil = now.Add(wait)
	f.lockouts++
	f.count = 0
	return true
}

// succeeded forgets the username's failures: whoever knows the password is its owner. The address keeps
// its count, so an attacker holding one credential of its own cannot use it to reset the count of the
// address it guesses other credentials from.
func (l *lockout) succeeded(user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if userKey, ok := trackedUser(user); ok {
		delete(l.users, userKey)
	}
}

// makeRoom keeps a table below maxLockoutEntries. When it is full it frees a tenth of it at once, so the
// sweep runs once per many new keys rather than for each: forgotten keys go first, then keys that are not
// locked out, then any.
func (l *lockout) makeRoom(table map[string]*failures, now time.Time) {
	if len(table) < maxLockoutEntries {
		return
	}
	target := maxLockoutEntries * 9 / 10
	for k, f := range table {
		if now.Sub(f.last) > l.cfg.Memory {
			delete(table, k)
		}
	}
	for k, f := range table {
		if len(table) <= target {
			return
		}
		if !now.Before(f.lockedUntil) {
			delete(table, k)
		}
	}
	for k := range table {
		if len(table) <= target {
			return
		}
		delete(table, k)
	}
}

// trackedUser is the key a username is counted under, and whether it is counted at all. Case is folded so
// that spelling a username differently cannot escape its count.
func trackedUser(user string) (string, bool) {
	if user == "" || len(user) > maxTrackedUsername {
		return "", false
	}
	return strings.ToLower(user), true
}
