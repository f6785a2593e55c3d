package postgres_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestAPIKeys_ListNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)

	k1 := mustInsertAPIKey(t, s, a.org.ID, baseTime.Add(time.Second))
	k3 := mustInsertAPIKey(t, s, a.org.ID, baseTime.Add(3*time.Second))
	k2 := mustInsertAPIKey(t, s, a.org.ID, baseTime.Add(2*time.Second).In(time.FixedZone("minus7", -7*3600)))

	got, err := s.ListAPIKeys(ctx, a.org.ID)
	if err != nil {
		t.Fatalf("ListAPIKeys: %v", err)
	}
	want := []ports.APIKey{k3, k2, k1}
	if len(got) != len(want) {
		t.Fatalf("ListAPIKeys returned %d keys, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID {
			t.Fatalf("key %d = %s, want %s (newest first)", i, g.ID, w.ID)
		}
		if g.OrganizationID != a.org.ID || g.Name != w.Name || g.Prefix != w.Prefix ||
			!bytes.Equal(g.TokenHash, w.TokenHash) || !slices.Equal(g.Scopes, w.Scopes) ||
			!g.ScopesEnforced || g.LastUsedAt != nil || g.RevokedAt != nil {
			t.Fatalf("key %d = %+v, want %+v", i, g, w)
		}
		requireTime(t, "CreatedAt", &g.CreatedAt, w.CreatedAt)
	}
}

func TestAPIKeys_ScopesRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)

	none := newAPIKey(t, a.org.ID, baseTime)
	none.Scopes = nil
	none.ScopesEnforced = false
	if err := s.InsertAPIKey(ctx, none); err != nil {
		t.Fatalf("InsertAPIKey with nil scopes: %v", err)
	}
	all := newAPIKey(t, a.org.ID, baseTime)
	all.Scopes = []string{ports.ScopeAll}
	if err := s.InsertAPIKey(ctx, all); err != nil {
		t.Fatal(err)
	}

	got, err := s.APIKeyByPrefix(ctx, none.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Scopes) != 0 || got.ScopesEnforced {
		t.Fatalf("nil scopes came back as %q enforced=%v", got.Scopes, got.ScopesEnforced)
	}
	got, _ = s.APIKeyByPrefix(ctx, all.Prefix)
	if !slices.Equal(got.Scopes, []string{"*"}) || !got.ScopesEnforced {
		t.Fatalf("scopes = %q enforced=%v", got.Scopes, got.ScopesEnforced)
	}
}

func TestAPIKeys_Revoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	k := mustInsertAPIKey(t, s, a.org.ID, baseTime)
	kept := mustInsertAPIKey(t, s, a.org.ID, baseTime)

	first := baseTime.Add(time.Hour)
	if err := s.RevokeAPIKey(ctx, a.org.ID, k.ID, first); err != nil {
		t.Fatalf("RevokeAPIKey: %v", err)
	}
	if err := s.RevokeAPIKey(ctx, a.org.ID, k.ID, first.Add(time.Hour)); err != nil {
		t.Fatalf("RevokeAPIKey again: %v", err)
	}
	got, err := s.APIKeyByPrefix(ctx, k.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	requireTime(t, "RevokedAt", got.RevokedAt, first) // the earlier revocation is kept

	other, _ := s.APIKeyByPrefix(ctx, kept.Prefix)
	if other.RevokedAt != nil {
		t.Fatal("revoking one key revoked another")
	}

	for _, id := range []string{newID(), "not-a-uuid"} {
		err := s.RevokeAPIKey(ctx, a.org.ID, id, first)
		if e := requireCode(t, err, ports.CodeNotFound); e.Message != "API key not found" {
			t.Fatalf("message = %q", e.Message)
		}
	}
}

func TestAPIKeys_ByPrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	ka := mustInsertAPIKey(t, s, a.org.ID, baseTime)
	kb := mustInsertAPIKey(t, s, b.org.ID, baseTime)

	for _, want := range []ports.APIKey{ka, kb} {
		got, err := s.APIKeyByPrefix(ctx, want.Prefix)
		if err != nil {
			t.Fatalf("APIKeyByPrefix: %v", err)
		}
		if got.ID != want.ID || got.OrganizationID != want.OrganizationID || !bytes.Equal(got.TokenHash, want.TokenHash) {
			t.Fatalf("APIKeyByPrefix = %+v, want %+v", got, want)
		}
	}

	// A revoked key is still found: the caller must see revokedAt to reject it.
	if err := s.RevokeAPIKey(ctx, a.org.ID, ka.ID, baseTime); err != nil {
		t.Fatal(err)
	}
	got, err := s.APIKeyByPrefix(ctx, ka.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	requireTime(t, "RevokedAt", got.RevokedAt, baseTime)

	_, err = s.APIKeyByPrefix(ctx, "0000000000000000")
	requireCode(t, err, ports.CodeNotFound)
}

func TestAPIKeys_Constraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	k := mustInsertAPIKey(t, s, a.org.ID, baseTime)

	// Prefixes are unique across organizations: authentication finds the key by prefix alone.
	dup := newAPIKey(t, b.org.ID, baseTime)
	dup.Prefix = k.Prefix
	requireConflict(t, s.InsertAPIKey(ctx, dup), "api_keys_prefix_key", k.Prefix)

	orphan := newAPIKey(t, newID(), baseTime)
	e := requireCode(t, s.InsertAPIKey(ctx, orphan), ports.CodeInvalidArgument)
	if e.Constraint != "api_keys_organization_id_fkey" {
		t.Fatalf("constraint = %q", e.Constraint)
	}
}

func TestAPIKeys_TouchBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	k1 := mustInsertAPIKey(t, s, a.org.ID, baseTime)
	k2 := mustInsertAPIKey(t, s, b.org.ID, baseTime)
	k3 := mustInsertAPIKey(t, s, a.org.ID, baseTime)

	t1, t2 := baseTime.Add(time.Minute), baseTime.Add(2*time.Minute).In(time.FixedZone("plus2", 7200))
	err := s.TouchAPIKeys(ctx, map[string]time.Time{k1.ID: t1, k2.ID: t2, newID(): t1})
	if err != nil {
		t.Fatalf("TouchAPIKeys: %v", err)
	}
	lastUsed := func(k ports.APIKey) *time.Time {
		t.Helper()
		got, err := s.APIKeyByPrefix(ctx, k.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		return got.LastUsedAt
	}
	requireTime(t, "k1 LastUsedAt", lastUsed(k1), t1)
	requireTime(t, "k2 LastUsedAt", lastUsed(k2), t2)
	if lastUsed(k3) != nil {
		t.Fatal("an untouched key got a lastUsedAt")
	}

	// An older batch flushed late never moves lastUsedAt backwards; a newer one moves it forward.
	if err := s.TouchAPIKeys(ctx, map[string]time.Time{k1.ID: baseTime, k2.ID: t2.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	requireTime(t, "k1 LastUsedAt after older batch", lastUsed(k1), t1)
	requireTime(t, "k2 LastUsedAt after newer batch", lastUsed(k2), t2.Add(time.Hour))

	if err := s.TouchAPIKeys(ctx, nil); err != nil {
		t.Fatalf("TouchAPIKeys(nil): %v", err)
	}
}
