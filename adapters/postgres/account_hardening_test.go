package postgres_test

import (
	"bytes"
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestCreateSignup_AdminBootstrapOnlyWhileNoAdmin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	mustSignup(t, s) // an ordinary user first

	// Concurrent sign-ups all asking for the bootstrap: exactly one becomes admin.
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		u, org, m := signupInput(t)
		u.IsAdmin = true
		ids[i] = u.ID
		wg.Go(func() {
			<-start
			if err := s.CreateSignup(ctx, u, org, m); err != nil {
				t.Errorf("CreateSignup: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	admins := 0
	for _, id := range ids {
		u, err := s.UserByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if u.IsAdmin {
			admins++
		}
	}
	if admins != 1 {
		t.Fatalf("%d bootstrap sign-ups became admin, want exactly 1", admins)
	}

	// Once every admin is withdrawn, the bootstrap applies again.
	mustExec(t, s, `UPDATE users SET is_admin = false`)
	u, org, m := signupInput(t)
	u.IsAdmin = true
	if err := s.CreateSignup(ctx, u, org, m); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.UserByID(ctx, u.ID); !got.IsAdmin {
		t.Fatal("bootstrap refused on a platform without admins")
	}
}

func TestSetUserAdmin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	if err := s.SetUserAdmin(ctx, a.user.Email, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.UserByID(ctx, a.user.ID); !got.IsAdmin {
		t.Fatal("grant did not stick")
	}
	if got, _ := s.UserByID(ctx, b.user.ID); got.IsAdmin {
		t.Fatal("grant reached another user")
	}
	if err := s.SetUserAdmin(ctx, a.user.Email, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.UserByID(ctx, a.user.ID); got.IsAdmin {
		t.Fatal("revoke did not stick")
	}
	requireCode(t, s.SetUserAdmin(ctx, "nobody@example.test", true), ports.CodeNotFound)
}

func TestClaimTOTPStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	const step = 59_000_000
	for _, c := range []struct {
		step int64
		want bool
	}{{step, true}, {step, false}, {step - 1, false}, {step + 1, true}} {
		got, err := s.ClaimTOTPStep(ctx, a.user.ID, c.step)
		if err != nil || got != c.want {
			t.Fatalf("ClaimTOTPStep(%d) = %v, %v; want %v", c.step, got, err, c.want)
		}
	}
	if u, _ := s.UserByID(ctx, a.user.ID); u.TOTPLastStep != step+1 {
		t.Fatalf("TOTPLastStep = %d", u.TOTPLastStep)
	}
	if u, _ := s.UserByID(ctx, b.user.ID); u.TOTPLastStep != 0 {
		t.Fatalf("another user's step moved: %d", u.TOTPLastStep)
	}
	_, err := s.ClaimTOTPStep(ctx, newID(), step)
	requireCode(t, err, ports.CodeNotFound)

	// Concurrent claims of one step: exactly one wins.
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won int
	)
	for range 16 {
		wg.Go(func() {
			ok, err := s.ClaimTOTPStep(ctx, b.user.ID, step)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d concurrent claims of one step succeeded, want 1", won)
	}
}

func TestRevokeRefreshTokenFamily(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	family := newID()
	first := mustInsertRefreshToken(t, s, a, family)
	_, _, second, err := rotate(t, s, first.TokenHash, baseTime.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	other := mustInsertRefreshToken(t, s, a, newID())

	// Logging out with the spent first token revokes the current one.
	now := baseTime.Add(time.Hour)
	if err := s.RevokeRefreshTokenFamily(ctx, first.TokenHash, now); err != nil {
		t.Fatal(err)
	}
	got, fresh, _, err := rotate(t, s, second.TokenHash, now)
	if err != nil || fresh {
		t.Fatalf("successor after logout: fresh=%v err=%v", fresh, err)
	}
	requireTime(t, "RevokedAt", got.RevokedAt, now)
	if _, fresh, _, err := rotate(t, s, other.TokenHash, now); err != nil || !fresh {
		t.Fatalf("another family: fresh=%v err=%v", fresh, err)
	}
	requireCode(t, s.RevokeRefreshTokenFamily(ctx, hashOf("unknown"), now), ports.CodeNotFound)
}

func TestRevokeRefreshTokenFamily_ConcurrentWithRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	// Logout and refresh race on the same token many times: whichever comes first, no token of the family
	// may be left unrevoked.
	for range 20 {
		family := newID()
		rt := mustInsertRefreshToken(t, s, a, family)
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			if _, _, _, err := rotate(t, s, rt.TokenHash, baseTime.Add(time.Minute)); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			<-start
			if err := s.RevokeRefreshTokenFamily(ctx, rt.TokenHash, baseTime.Add(time.Minute)); err != nil {
				t.Error(err)
			}
		})
		close(start)
		wg.Wait()
		if n := countRows(t, s, `SELECT count(*) FROM refresh_tokens WHERE family_id = $1 AND revoked_at IS NULL`, family); n != 0 {
			t.Fatalf("%d tokens of the family survived a logout", n)
		}
	}
}

func TestSecretsSealedValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b, c := mustSignup(t, s), mustSignup(t, s), mustSignup(t, s)
	for i, acc := range []account{a, b} {
		if err := s.SetUserTOTP(ctx, acc.user.ID, []byte{byte(i + 1), 0xaa}, true); err != nil {
			t.Fatal(err)
		}
	}
	_ = c // no seed: not listed
	d1, d2 := mustDomain(t, s, a.org.ID), mustDomain(t, s, b.org.ID)
	e1 := mustEndpoint(t, s, a.org.ID, baseTime)

	// Paging one row at a time lists every non-empty value in id order, across organizations.
	pageAll := func(column ports.SealedColumn) []ports.SealedValue {
		var all []ports.SealedValue
		after := ""
		for {
			page, err := s.SealedValues(ctx, column, after, 1)
			if err != nil {
				t.Fatalf("SealedValues(%s): %v", column, err)
			}
			all = append(all, page...)
			if len(page) < 1 {
				return all
			}
			after = page[len(page)-1].ID
		}
	}
	wantIDs := map[ports.SealedColumn][]string{
		ports.SealedTOTPSeeds:      {a.user.ID, b.user.ID},
		ports.SealedDKIMKeys:       {d1.ID, d2.ID},
		ports.SealedWebhookSecrets: {e1.ID},
	}
	for column, want := range wantIDs {
		sort.Strings(want)
		got := pageAll(column)
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", column, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i] || len(got[i].Sealed) == 0 {
				t.Errorf("%s[%d] = %+v, want id %s", column, i, got[i], want[i])
			}
		}
	}
	if got := pageAll(ports.SealedDKIMKeys); !bytes.Equal(got[0].Sealed, map[string][]byte{d1.ID: d1.DKIMPrivateKey, d2.ID: d2.DKIMPrivateKey}[got[0].ID]) {
		t.Errorf("DKIM value %x is not the stored one", got[0].Sealed)
	}

	// ReplaceSealed writes only over the value it read.
	ok, err := s.ReplaceSealed(ctx, ports.SealedDKIMKeys, d1.ID, d1.DKIMPrivateKey, []byte("resealed"))
	if err != nil || !ok {
		t.Fatalf("ReplaceSealed: %v, %v", ok, err)
	}
	ok, err = s.ReplaceSealed(ctx, ports.SealedDKIMKeys, d1.ID, d1.DKIMPrivateKey, []byte("again"))
	if err != nil || ok {
		t.Fatalf("ReplaceSealed over a changed value: %v, %v", ok, err)
	}
	got, err := s.GetDomain(ctx, a.org.ID, d1.ID)
	if err != nil || string(got.DKIMPrivateKey) != "resealed" {
		t.Fatalf("domain after replace: %q, %v", got.DKIMPrivateKey, err)
	}
	for _, column := range []ports.SealedColumn{ports.SealedTOTPSeeds, ports.SealedWebhookSecrets} {
		v := pageAll(column)[0]
		if ok, err := s.ReplaceSealed(ctx, column, v.ID, v.Sealed, []byte("new")); err != nil || !ok {
			t.Fatalf("ReplaceSealed(%s): %v, %v", column, ok, err)
		}
	}
	if ok, err := s.ReplaceSealed(ctx, ports.SealedTOTPSeeds, "not-a-uuid", nil, []byte("x")); err != nil || ok {
		t.Fatalf("ReplaceSealed of a malformed id: %v, %v", ok, err)
	}
	_, err = s.SealedValues(ctx, "users.password_hash", "", 10)
	requireCode(t, err, ports.CodeInvalidArgument)
}
