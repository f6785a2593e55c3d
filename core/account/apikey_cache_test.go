package account

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// memoryKeys is an in-memory ports.APIKeyStore that counts lookups by prefix. block, when set, holds
// APIKeyByPrefix after it has read the key until the channel is closed.
type memoryKeys struct {
	ports.APIKeyStore
	mu      sync.Mutex
	keys    map[string]ports.APIKey // by prefix
	lookups int
	touched map[string]time.Time
	reading chan struct{} // told when a held lookup has read its key
	block   chan struct{}
}

func newMemoryKeys() *memoryKeys {
	return &memoryKeys{keys: map[string]ports.APIKey{}, touched: map[string]time.Time{}}
}

func (m *memoryKeys) InsertAPIKeyWithin(_ context.Context, k ports.APIKey, _ int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[k.Prefix] = k
	return true, nil
}

func (m *memoryKeys) RevokeAPIKey(_ context.Context, orgID, id string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p, k := range m.keys {
		if k.ID == id && k.OrganizationID == orgID {
			k.RevokedAt = &now
			m.keys[p] = k
			return nil
		}
	}
	return ports.NotFound("API key not found")
}

func (m *memoryKeys) APIKeyByPrefix(_ context.Context, prefix string) (ports.APIKey, error) {
	m.mu.Lock()
	m.lookups++
	k, ok := m.keys[prefix]
	block, reading := m.block, m.reading
	m.mu.Unlock()
	if block != nil {
		reading <- struct{}{}
		<-block
	}
	if !ok {
		return ports.APIKey{}, ports.NotFound("API key not found")
	}
	return k, nil
}

func (m *memoryKeys) TouchAPIKeys(_ context.Context, lastUsed map[string]time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, at := range lastUsed {
		m.touched[id] = at
	}
	return nil
}

func (m *memoryKeys) lookupCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lookups
}

// localFeed is a ports.ChangeFeed within one process.
type localFeed struct {
	mu   sync.Mutex
	subs []func(ports.Change)
}

func (f *localFeed) Publish(c ports.Change) {
	f.mu.Lock()
	subs := append([]func(ports.Change){}, f.subs...)
	f.mu.Unlock()
	for _, fn := range subs {
		fn(c)
	}
}

func (f *localFeed) Subscribe(fn func(ports.Change)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = append(f.subs, fn)
	return func() {}
}

// keyBundle is a Service over an API key store shared with whoever else the test builds on it.
type keyBundle struct {
	svc  *Service
	keys *memoryKeys
	feed *localFeed
}

func mustKeyBundle(tb testing.TB, keys *memoryKeys, ttl time.Duration) *keyBundle {
	tb.Helper()
	b := &keyBundle{keys: keys, feed: &localFeed{}}
	unused := unusedStores{}
	svc, err := New(Config{PasswordParams: testPasswordParams, APIKeyCacheTTL: ttl}, Deps{
		Accounts: newMemoryAccounts(), Organizations: unused, APIKeys: keys, SMTPCredentials: unused,
		RateLimiter: &countingLimiter{}, Changes: b.feed, Clock: &testClock{now: testNow},
		Keyring: mustKeyring(tb, testMasterOld),
	})
	if err != nil {
		tb.Fatal(err)
	}
	b.svc = svc
	return b
}

func (b *keyBundle) mustCreate(tb testing.TB, orgID string) ports.CreatedAPIKey {
	tb.Helper()
	k, err := b.svc.CreateAPIKey(context.Background(), orgID, "k", nil)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func (b *keyBundle) mustAuthenticate(tb testing.TB, token string) ports.Principal {
	tb.Helper()
	p, err := b.svc.AuthenticateAPIKey(context.Background(), token)
	if err != nil {
		tb.Fatalf("AuthenticateAPIKey: %v", err)
	}
	return p
}

// TestAPIKeyCache_ReusesTheRecordAndChecksTheSecret: a key read once is authenticated from memory after,
// and the cached record still admits only the token whose hash it holds; the use is recorded for Run.
func TestAPIKeyCache_ReusesTheRecordAndChecksTheSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := mustKeyBundle(t, newMemoryKeys(), time.Hour)
	k := b.mustCreate(t, "org1")

	for range 3 {
		if p := b.mustAuthenticate(t, k.Token); p.OrganizationID != "org1" || p.APIKeyID != k.ID {
			t.Fatalf("principal %+v", p)
		}
	}
	if n := b.keys.lookupCount(); n != 1 {
		t.Fatalf("%d lookups for three requests, want 1", n)
	}
	forged := k.Token[:len(k.Token)-4] + "AAAA"
	if strings.HasSuffix(k.Token, "AAAA") {
		forged = k.Token[:len(k.Token)-4] + "BBBB"
	}
	_, err := b.svc.AuthenticateAPIKey(ctx, forged)
	wantCode(t, err, ports.CodeUnauthenticated)
	if cached, _ := b.svc.keyCache.Get(k.APIKey.Prefix); len(cached.TokenHash) == 0 || strings.Contains(string(cached.TokenHash), k.Token) {
		t.Fatalf("the cache holds %+v, want the hash alone", cached)
	}
	if err := b.svc.flushUses(ctx); err != nil || b.keys.touched[k.ID].IsZero() {
		t.Fatalf("lastUsedAt not written from cached authentications: %v %v", err, b.keys.touched)
	}
}

// TestAPIKeyCache_RevokedOnTheNextRequest: revoking a key through this process refuses the very next
// request with it, however long the cache would keep it; the organization's other keys are read again.
func TestAPIKeyCache_RevokedOnTheNextRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := mustKeyBundle(t, newMemoryKeys(), time.Hour)
	k := b.mustCreate(t, "org1")
	b.mustAuthenticate(t, k.Token)

	if err := b.svc.RevokeAPIKey(ctx, "org1", k.ID); err != nil {
		t.Fatal(err)
	}
	_, err := b.svc.AuthenticateAPIKey(ctx, k.Token)
	wantCode(t, err, ports.CodeUnauthenticated)
}

// TestAPIKeyCache_RevokedByAnotherProcess: a process that cached a key forgets it when the change feed
// announces a change of its organization (the store announces revocations), or when news may have been
// lost (ChangeAll); a domain's change leaves keys alone.
func TestAPIKeyCache_RevokedByAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys := newMemoryKeys()
	one := mustKeyBundle(t, keys, time.Hour)
	two := mustKeyBundle(t, keys, time.Hour) // another process over the same store
	k := one.mustCreate(t, "org1")
	other := one.mustCreate(t, "org2")
	two.mustAuthenticate(t, k.Token)
	two.mustAuthenticate(t, other.Token)

	if err := one.svc.RevokeAPIKey(ctx, "org1", k.ID); err != nil {
		t.Fatal(err)
	}
	two.mustAuthenticate(t, k.Token) // not announced yet: the cache answers, within its bound
	two.feed.Publish(ports.Change{Kind: ports.ChangeDomain, OrganizationID: "org1", DomainID: "d1"})
	two.mustAuthenticate(t, k.Token)
	two.feed.Publish(ports.Change{Kind: ports.ChangeOrganization, OrganizationID: "org1"})
	_, err := two.svc.AuthenticateAPIKey(ctx, k.Token)
	wantCode(t, err, ports.CodeUnauthenticated)
	if _, ok := two.svc.keyCache.Get(other.APIKey.Prefix); !ok {
		t.Fatal("another organization's key was forgotten")
	}

	if err := one.svc.RevokeAPIKey(ctx, "org2", other.ID); err != nil {
		t.Fatal(err)
	}
	two.feed.Publish(ports.Change{Kind: ports.ChangeAll})
	_, err = two.svc.AuthenticateAPIKey(ctx, other.Token)
	wantCode(t, err, ports.CodeUnauthenticated)
}

// TestAPIKeyCache_ExpiresWithoutNews: with no announcement, a revocation is seen once the entry is older
// than the TTL.
func TestAPIKeyCache_ExpiresWithoutNews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys := newMemoryKeys()
	one := mustKeyBundle(t, keys, time.Hour)
	two := mustKeyBundle(t, keys, 50*time.Millisecond)
	k := one.mustCreate(t, "org1")
	two.mustAuthenticate(t, k.Token)
	if err := one.svc.RevokeAPIKey(ctx, "org1", k.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	_, err := two.svc.AuthenticateAPIKey(ctx, k.Token)
	wantCode(t, err, ports.CodeUnauthenticated)
}

// TestAPIKeyCache_ReadBeforeTheRevocationIsNotKept: a lookup that read the key before it was revoked, and
// finishes after, answers with what it read but does not put the old record back in the cache.
func TestAPIKeyCache_ReadBeforeTheRevocationIsNotKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys := newMemoryKeys()
	b := mustKeyBundle(t, keys, time.Hour)
	k := b.mustCreate(t, "org1")

	keys.mu.Lock()
	keys.block, keys.reading = make(chan struct{}), make(chan struct{})
	keys.mu.Unlock()
	done := make(chan error, 1)
	go func() { _, err := b.svc.AuthenticateAPIKey(ctx, k.Token); done <- err }()
	<-keys.reading // the lookup has read the key unrevoked
	keys.mu.Lock()
	block := keys.block
	keys.block = nil
	keys.mu.Unlock()
	if err := b.svc.RevokeAPIKey(ctx, "org1", k.ID); err != nil {
		t.Fatal(err)
	}
	close(block)
	if err := <-done; err != nil {
		t.Fatalf("the lookup begun before the revocation: %v", err)
	}
	_, err := b.svc.AuthenticateAPIKey(ctx, k.Token)
	wantCode(t, err, ports.CodeUnauthenticated)
}

// TestAPIKeyCache_UnknownPrefixesAreNotCached: a prefix with no key costs a lookup every time and takes no
// room, so guessing prefixes cannot fill the cache.
func TestAPIKeyCache_UnknownPrefixesAreNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := mustKeyBundle(t, newMemoryKeys(), time.Hour)
	for range 3 {
		token, _ := newAPIKeyToken()
		_, err := b.svc.AuthenticateAPIKey(ctx, token)
		wantCode(t, err, ports.CodeUnauthenticated)
	}
	if n := b.keys.lookupCount(); n != 3 {
		t.Fatalf("%d lookups for three unknown keys, want 3", n)
	}
	if n := b.svc.keyCache.Len(); n != 0 {
		t.Fatalf("%d entries after unknown keys only", n)
	}
}

// TestAPIKeyCache_Disabled: a negative TTL reads the store on every request.
func TestAPIKeyCache_Disabled(t *testing.T) {
	t.Parallel()
	b := mustKeyBundle(t, newMemoryKeys(), -1)
	k := b.mustCreate(t, "org1")
	b.mustAuthenticate(t, k.Token)
	b.mustAuthenticate(t, k.Token)
	if n := b.keys.lookupCount(); n != 2 {
		t.Fatalf("%d lookups, want 2", n)
	}
}
