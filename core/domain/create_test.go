package domain

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// boundStore is a ports.DomainStore fake for CreateDomain and the lists: it records what it was asked and
// answers InsertDomainWithin as an organization holding `held` domains would.
type boundStore struct {
	ports.DomainStore
	held     int
	names    map[string]bool
	inserts  int
	gotMax   int
	gotQuery ports.PageQuery
}

func (s *boundStore) InsertDomainWithin(_ context.Context, d ports.Domain, _ ports.Event, max int) (bool, error) {
	s.inserts++
	s.gotMax = max
	if max > 0 && s.held >= max {
		return false, nil
	}
	s.held++
	if s.names == nil {
		s.names = map[string]bool{}
	}
	s.names[d.Name] = true
	return true, nil
}

func (s *boundStore) DomainsHeld(_ context.Context, _, name string) (int, bool, error) {
	return s.held, s.names[name], nil
}

func (s *boundStore) ListDomains(_ context.Context, _ string, q ports.PageQuery) (ports.Page[ports.Domain], error) {
	s.gotQuery = q
	return ports.Page[ports.Domain]{Data: []ports.Domain{{ID: "d1", DKIMPrivateKey: []byte("sealed")}}, NextCursor: "next"}, nil
}

// countingLimiter allows `allow` calls per key and records the keys it was asked about.
type countingLimiter struct {
	allow int
	calls map[string]int
}

func (l *countingLimiter) Allow(_ context.Context, key string, limit int, window time.Duration) (ports.RateDecision, error) {
	l.calls[key]++
	if l.calls[key] > l.allow {
		return ports.RateDecision{Allowed: false, Count: l.calls[key], Limit: limit, RetryAfter: 90 * time.Second}, nil
	}
	return ports.RateDecision{Allowed: true, Count: l.calls[key], Limit: limit}, nil
}

type noResolver struct{ ports.Resolver }

func newBoundService(tb testing.TB, cfg Config, store *boundStore, limiter *countingLimiter) *Service {
	tb.Helper()
	kr, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := New(cfg, Deps{Domains: store, Resolver: noResolver{}, RateLimiter: limiter, Keyring: kr})
	if err != nil {
		tb.Fatal(err)
	}
	return svc
}

// TestCreateDomainIsNotRateLimited: SPEC §8 limits three routes only, so any number of creations and
// refused names in a row are answered on their merits; a name the organization holds, or a creation past
// its bound, is refused before a key is generated (no insert is tried), which is what bounds the key
// generations a loop of calls can cause.
func TestCreateDomainIsNotRateLimited(t *testing.T) {
	t.Parallel()
	store := &boundStore{}
	limiter := &countingLimiter{allow: 0, calls: map[string]int{}} // refuses whatever it is asked
	svc := newBoundService(t, validConfig(), store, limiter)
	ctx := context.Background()

	for i := range 20 {
		if _, err := svc.CreateDomain(ctx, "org1", "nodot"); ports.ErrorCode(err) != ports.CodeInvalidArgument {
			t.Fatalf("bad name %d: %v", i, err)
		}
	}
	for i := range 20 {
		if _, err := svc.CreateDomain(ctx, "org1", fmt.Sprintf("d%d.example.test", i)); err != nil {
			t.Fatalf("creation %d: %v", i, err)
		}
	}
	for range 3 {
		_, err := svc.CreateDomain(ctx, "org1", "D3.Example.Test")
		if e, ok := ports.AsError(err); !ok || e.Code != ports.CodeAlreadyExists || e.Constraint != "domains_org_name_key" {
			t.Fatalf("a name held already: %v", err)
		}
	}
	if store.inserts != 20 || len(limiter.calls) != 0 {
		t.Fatalf("inserts %d (want 20: none for a held name), limiter asked %v", store.inserts, limiter.calls)
	}
}

// TestCreateDomainPastTheBound: the store is asked with the configured bound (default 100), and an
// organization at it gets the 403 that says the limit and how to raise it.
func TestCreateDomainPastTheBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &boundStore{held: 99}
	svc := newBoundService(t, validConfig(), store, &countingLimiter{allow: 100, calls: map[string]int{}})
	if _, err := svc.CreateDomain(ctx, "org1", "a.example.test"); err != nil || store.gotMax != DefaultMaxDomains {
		t.Fatalf("100th domain: %v (max %d)", err, store.gotMax)
	}
	_, err := svc.CreateDomain(ctx, "org1", "b.example.test")
	if store.inserts != 1 {
		t.Errorf("the 101st domain reached the store (%d inserts): its key was generated", store.inserts)
	}
	e, ok := ports.AsError(err)
	if !ok || e.Code != ports.CodePermissionDenied || e.Reason != ports.ReasonResourceLimit ||
		e.Fields["limit"] != DefaultMaxDomains || e.Fields["resource"] != ports.ResourceDomains {
		t.Fatalf("101st domain: %#v", err)
	}
	for _, want := range []string{"100 domains", MaxDomainsSetting} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q does not say %q", e.Message, want)
		}
	}

	cfg := validConfig()
	cfg.MaxDomains = 2
	small := &boundStore{held: 2}
	svc = newBoundService(t, cfg, small, &countingLimiter{allow: 100, calls: map[string]int{}})
	if _, err := svc.CreateDomain(ctx, "org1", "a.example.test"); ports.ErrorCode(err) != ports.CodePermissionDenied || small.inserts != 0 {
		t.Fatalf("configured bound 2: %v (%d inserts)", err, small.inserts)
	}
	small.held = 1
	if _, err := svc.CreateDomain(ctx, "org1", "a.example.test"); err != nil || small.gotMax != 2 {
		t.Fatalf("configured bound 2, one held: %v (max %d)", err, small.gotMax)
	}
}

func TestListDomainsPaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &boundStore{}
	svc := newBoundService(t, validConfig(), store, &countingLimiter{calls: map[string]int{}})

	list, err := svc.ListDomains(ctx, "org1")
	if err != nil || len(list) != 1 || list[0].DKIMPrivateKey != nil || store.gotQuery != ports.Unpaged() {
		t.Fatalf("ListDomains = %+v (%v), store asked %+v", list, err, store.gotQuery)
	}
	page, err := svc.ListDomainsPage(ctx, "org1", ports.PageQuery{Cursor: "c"})
	if err != nil || page.NextCursor != "next" || page.Data[0].DKIMPrivateKey != nil || store.gotQuery != (ports.PageQuery{Limit: 25, Cursor: "c"}) {
		t.Fatalf("ListDomainsPage = %+v (%v), store asked %+v", page, err, store.gotQuery)
	}
	for _, limit := range []int{-1, 101, ports.MaxUnpagedListRows} {
		_, err := svc.ListDomainsPage(ctx, "org1", ports.PageQuery{Limit: limit})
		if e, ok := ports.AsError(err); !ok || e.Code != ports.CodeInvalidArgument || e.Details[0].Path != "limit" {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
}

func TestConfigCreateDefaults(t *testing.T) {
	t.Parallel()
	c := validConfig().withDefaults()
	if c.MaxDomains != 100 {
		t.Fatalf("defaults: %+v", c)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.MaxDomains = -1 },
	} {
		c := validConfig()
		bad(&c)
		if c.Validate() == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}
