package account

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// memoryAccounts is an in-memory ports.AccountStore that keeps the port's promises (the admin bootstrap, the
// conditional TOTP claim, refresh rotation) under one mutex, so the core's order of checks can be tested
// without PostgreSQL. The PostgreSQL tests prove the same promises hold under real concurrency.
type memoryAccounts struct {
	mu          sync.Mutex
	users       map[string]ports.User // by id
	memberships []ports.Membership
	orgs        map[string]ports.Organization
	refresh     []ports.RefreshToken
}

func newMemoryAccounts() *memoryAccounts {
	return &memoryAccounts{users: map[string]ports.User{}, orgs: map[string]ports.Organization{}}
}

func (m *memoryAccounts) CreateSignup(_ context.Context, u ports.User, org ports.Organization, mem ports.Membership) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, existing := range m.users {
		if existing.Email == u.Email {
			return ports.AlreadyExists("users_email_key")
		}
		if existing.IsAdmin {
			u.IsAdmin = false
		}
	}
	m.users[u.ID] = u
	m.orgs[org.ID] = org
	m.memberships = append(m.memberships, mem)
	return nil
}

func (m *memoryAccounts) SetUserAdmin(_ context.Context, email string, admin bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, u := range m.users {
		if u.Email == email {
			u.IsAdmin = admin
			m.users[id] = u
			return nil
		}
	}
	return ports.NotFound("user not found")
}

func (m *memoryAccounts) UserByEmail(_ context.Context, email string) (ports.User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range m.users {
		if u.Email == email {
			return u, nil
		}
	}
	return ports.User{}, ports.NotFound("user not found")
}

func (m *memoryAccounts) UserByID(_ context.Context, id string) (ports.User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.users[id]
	if !ok {
		return ports.User{}, ports.NotFound("user not found")
	}
	return u, nil
}

func (m *memoryAccounts) Memberships(_ context.Context, userID string) ([]ports.Membership, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ports.Membership
	for _, mem := range m.memberships {
		if mem.UserID == userID {
			out = append(out, mem)
		}
	}
	return out, nil
}

func (m *memoryAccounts) SetUserTOTP(_ context.Context, userID string, sealed []byte, enabled bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.users[userID]
	if !ok {
		return ports.NotFound("user not found")
	}
	u.TOTPSecret, u.TOTPEnabled = bytes.Clone(sealed), enabled
	m.users[userID] = u
	return nil
}

func (m *memoryAccounts) ClaimTOTPStep(_ context.Context, userID string, step int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.users[userID]
	if !ok {
		return false, ports.NotFound("user not found")
	}
	if u.TOTPLastStep >= step {
		return false, nil
	}
	u.TOTPLastStep = step
	m.users[userID] = u
	return true, nil
}

func (m *memoryAccounts) InsertRefreshToken(_ context.Context, t ports.RefreshToken) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refresh = append(m.refresh, t)
	return nil
}

func (m *memoryAccounts) RotateRefreshToken(_ context.Context, hash []byte, now time.Time, next ports.RefreshToken) (ports.RefreshToken, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, t := range m.refresh {
		if !bytes.Equal(t.TokenHash, hash) {
			continue
		}
		if t.UsedAt != nil || t.RevokedAt != nil || !now.Before(t.ExpiresAt) {
			return t, false, nil
		}
		used := now
		m.refresh[i].UsedAt = &used
		next.UserID, next.OrganizationID, next.FamilyID = t.UserID, t.OrganizationID, t.FamilyID
		m.refresh = append(m.refresh, next)
		return m.refresh[i], true, nil
	}
	return ports.RefreshToken{}, false, ports.NotFound("refresh token not found")
}

func (m *memoryAccounts) RevokeRefreshFamily(_ context.Context, familyID string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.revokeLocked(familyID, now)
	return nil
}

func (m *memoryAccounts) revokeLocked(familyID string, now time.Time) {
	for i, t := range m.refresh {
		if t.FamilyID == familyID && t.RevokedAt == nil {
			at := now
			m.refresh[i].RevokedAt = &at
		}
	}
}

func (m *memoryAccounts) RevokeRefreshTokenFamily(_ context.Context, hash []byte, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.refresh {
		if bytes.Equal(t.TokenHash, hash) {
			m.revokeLocked(t.FamilyID, now)
			return nil
		}
	}
	return ports.NotFound("refresh token not found")
}

// unusedStores stands in for the organization, API key and SMTP credential stores, which these tests do
// not reach.
type unusedStores struct {
	ports.OrganizationStore
	ports.APIKeyStore
	ports.SMTPCredentialStore
}

// countingLimiter is a ports.RateLimiter with one fixed window per key that never ends.
type countingLimiter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (l *countingLimiter) Allow(_ context.Context, key string, limit int, window time.Duration) (ports.RateDecision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	l.counts[key]++
	d := ports.RateDecision{Count: l.counts[key], Limit: limit, Allowed: l.counts[key] <= limit}
	if !d.Allowed {
		d.RetryAfter = window
	}
	return d, nil
}

func (l *countingLimiter) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[key]
}

// testClock is a settable ports.Clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// bundle is one Service over in-memory ports.
type bundle struct {
	svc     *Service
	store   *memoryAccounts
	limiter *countingLimiter
	clock   *testClock
}

const testMasterOld, testMasterNew = "account test master secret, old one", "account test master secret, new one"

func mustKeyring(tb testing.TB, masters ...string) *secret.Keyring {
	tb.Helper()
	bs := make([][]byte, len(masters))
	for i, m := range masters {
		bs[i] = []byte(m)
	}
	k, err := secret.NewKeyring(bs...)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// MustBundle builds a Service with cheap password parameters over fresh in-memory stores; change adjusts
// the config first.
func MustBundle(tb testing.TB, change func(*Config)) *bundle {
	tb.Helper()
	b := &bundle{store: newMemoryAccounts(), limiter: &countingLimiter{}, clock: &testClock{now: testNow}}
	b.svc = b.mustService(tb, change, mustKeyring(tb, testMasterOld))
	return b
}

// mustService builds another Service over the bundle's stores, limiter and clock.
func (b *bundle) mustService(tb testing.TB, change func(*Config), keyring *secret.Keyring) *Service {
	tb.Helper()
	cfg := Config{PasswordParams: testPasswordParams, AdminEmails: []string{"root@admin.example"}}
	if change != nil {
		change(&cfg)
	}
	unused := unusedStores{}
	svc, err := New(cfg, Deps{
		Accounts: b.store, Organizations: unused, APIKeys: unused, SMTPCredentials: unused,
		RateLimiter: b.limiter, Clock: b.clock, Keyring: keyring,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return svc
}

// MustSignup signs up email with a fixed password.
func (b *bundle) MustSignup(tb testing.TB, email string) ports.SignupResult {
	tb.Helper()
	res, err := b.svc.Signup(context.Background(), ports.SignupInput{Email: email, Password: testPassword})
	if err != nil {
		tb.Fatalf("Signup(%s): %v", email, err)
	}
	return res
}

const testPassword = "correct horse battery"

func wantCode(tb testing.TB, err error, code ports.Code) {
	tb.Helper()
	if ports.ErrorCode(err) != code {
		tb.Fatalf("error %v (code %s), want code %s", err, ports.ErrorCode(err), code)
	}
}
