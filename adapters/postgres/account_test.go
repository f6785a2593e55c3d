package postgres_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestCreateSignup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)

	u, org, m := signupInput(t)
	u.IsAdmin = true
	plus1 := time.FixedZone("plus1", 3600)
	u.CreatedAt = baseTime.In(plus1)
	if err := s.CreateSignup(ctx, u, org, m); err != nil {
		t.Fatalf("CreateSignup: %v", err)
	}

	got, err := s.UserByEmail(ctx, u.Email)
	if err != nil {
		t.Fatalf("UserByEmail: %v", err)
	}
	if got.ID != u.ID || got.Email != u.Email || got.PasswordHash != u.PasswordHash || !got.IsAdmin ||
		got.TOTPEnabled || got.TOTPSecret != nil {
		t.Fatalf("UserByEmail = %+v, want %+v", got, u)
	}
	requireTime(t, "user CreatedAt", &got.CreatedAt, baseTime)

	byID, err := s.UserByID(ctx, u.ID)
	if err != nil || byID.Email != u.Email {
		t.Fatalf("UserByID = %+v, %v", byID, err)
	}

	gotOrg, err := s.Organization(ctx, org.ID)
	if err != nil {
		t.Fatalf("Organization: %v", err)
	}
	if gotOrg.Name != org.Name || gotOrg.Slug != org.Slug || gotOrg.Paused || gotOrg.Plan != org.Plan {
		t.Fatalf("Organization = %+v, want %+v", gotOrg, org)
	}

	ms, err := s.Memberships(ctx, u.ID)
	if err != nil {
		t.Fatalf("Memberships: %v", err)
	}
	if len(ms) != 1 || ms[0].OrganizationID != org.ID || ms[0].Role != "owner" || ms[0].UserID != u.ID {
		t.Fatalf("Memberships = %+v", ms)
	}
}

func TestCreateSignup_DuplicateEmailLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	first := mustSignup(t, s)

	u, org, m := signupInput(t)
	u.Email = first.user.Email
	err := s.CreateSignup(ctx, u, org, m)
	requireConflict(t, err, "users_email_key", first.user.Email)

	// The organization was inserted after the user failed: nothing of the attempt may remain.
	_, err = s.Organization(ctx, org.ID)
	requireCode(t, err, ports.CodeNotFound)
}

func TestCreateSignup_DuplicateSlugRollsBackUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	first := mustSignup(t, s)

	u, org, m := signupInput(t)
	org.Slug = first.org.Slug
	err := s.CreateSignup(ctx, u, org, m)
	requireConflict(t, err, "organizations_slug_key", first.org.Slug)

	// The user row was written before the slug conflict; the transaction must have undone it.
	_, err = s.UserByEmail(ctx, u.Email)
	requireCode(t, err, ports.CodeNotFound)
}

func TestCreateSignup_MembershipReferenceRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)

	u, org, m := signupInput(t)
	m.OrganizationID = newID() // not the organization being created
	err := s.CreateSignup(ctx, u, org, m)
	e := requireCode(t, err, ports.CodeInvalidArgument)
	if e.Constraint != "memberships_organization_id_fkey" || e.Message != ports.MessageMissingReference {
		t.Fatalf("error = %+v, want missing reference memberships_organization_id_fkey", e)
	}
	if _, err := s.UserByID(ctx, u.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("user after failed signup: err = %v, want not_found", err)
	}
	if _, err := s.Organization(ctx, org.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("organization after failed signup: err = %v, want not_found", err)
	}
}

func TestUserLookups_NotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	mustSignup(t, s)

	_, err := s.UserByEmail(ctx, "nobody@example.test")
	e := requireCode(t, err, ports.CodeNotFound)
	if e.Message != "user not found" {
		t.Fatalf("message = %q", e.Message)
	}
	_, err = s.UserByID(ctx, newID())
	requireCode(t, err, ports.CodeNotFound)
	_, err = s.UserByID(ctx, "not-a-uuid")
	e = requireCode(t, err, ports.CodeNotFound)
	if e.Message != "user not found" {
		t.Fatalf("malformed id message = %q, must not echo the value", e.Message)
	}
}

func TestMemberships_OldestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s) // owner membership at baseTime

	// Memberships of other organizations, joined later and out of order. The ports have no method that
	// adds a membership to an existing user, so the rows are written directly.
	var later []string
	for _, offset := range []time.Duration{2 * time.Hour, time.Hour, 3 * time.Hour} {
		id := newID()
		mustExec(t, s, `INSERT INTO organizations (id, name, slug, created_at) VALUES ($1, $2, $3, $4)`,
			id, "extra", "extra-"+randomHex(t, 4), baseTime)
		mustExec(t, s, `INSERT INTO memberships (organization_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)`,
			id, a.user.ID, "member", baseTime.Add(offset))
		later = append(later, id)
	}
	other := mustSignup(t, s) // someone else's membership must not appear

	ms, err := s.Memberships(ctx, a.user.ID)
	if err != nil {
		t.Fatalf("Memberships: %v", err)
	}
	want := []string{a.org.ID, later[1], later[0], later[2]}
	if len(ms) != len(want) {
		t.Fatalf("Memberships = %+v, want %d", ms, len(want))
	}
	for i, m := range ms {
		if m.OrganizationID != want[i] {
			t.Fatalf("membership %d = %s, want %s (oldest first)", i, m.OrganizationID, want[i])
		}
		if m.OrganizationID == other.org.ID {
			t.Fatal("another user's membership leaked")
		}
	}

	for _, id := range []string{newID(), "not-a-uuid"} {
		ms, err := s.Memberships(ctx, id)
		if err != nil || len(ms) != 0 {
			t.Fatalf("Memberships(%q) = %+v, %v; want empty", id, ms, err)
		}
	}
}

func TestSetUserTOTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)

	seed := []byte{0x01, 0x00, 0xff, 0x7f}
	if err := s.SetUserTOTP(ctx, a.user.ID, seed, false); err != nil {
		t.Fatalf("SetUserTOTP: %v", err)
	}
	got, err := s.UserByID(ctx, a.user.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.TOTPSecret, seed) || got.TOTPEnabled {
		t.Fatalf("after enrol: secret %x enabled %v", got.TOTPSecret, got.TOTPEnabled)
	}

	if err := s.SetUserTOTP(ctx, a.user.ID, seed, true); err != nil {
		t.Fatalf("SetUserTOTP enable: %v", err)
	}
	got, _ = s.UserByID(ctx, a.user.ID)
	if !got.TOTPEnabled {
		t.Fatal("TOTP not enabled")
	}
	untouched, _ := s.UserByID(ctx, b.user.ID)
	if untouched.TOTPEnabled || untouched.TOTPSecret != nil {
		t.Fatalf("another user changed: %+v", untouched)
	}

	if err := s.SetUserTOTP(ctx, a.user.ID, nil, false); err != nil {
		t.Fatalf("SetUserTOTP clear: %v", err)
	}
	got, _ = s.UserByID(ctx, a.user.ID)
	if got.TOTPSecret != nil || got.TOTPEnabled {
		t.Fatalf("after clear: %+v", got)
	}

	requireCode(t, s.SetUserTOTP(ctx, newID(), seed, true), ports.CodeNotFound)
	requireCode(t, s.SetUserTOTP(ctx, "not-a-uuid", seed, true), ports.CodeNotFound)
}

func newRefreshToken(tb testing.TB, a account, familyID string) (ports.RefreshToken, string) {
	tb.Helper()
	plain := randomHex(tb, 32)
	return ports.RefreshToken{
		ID:             newID(),
		UserID:         a.user.ID,
		OrganizationID: a.org.ID,
		FamilyID:       familyID,
		TokenHash:      hashOf(plain),
		ExpiresAt:      baseTime.Add(30 * 24 * time.Hour),
		CreatedAt:      baseTime,
	}, plain
}

func mustInsertRefreshToken(tb testing.TB, s *postgres.Store, a account, familyID string) ports.RefreshToken {
	tb.Helper()
	rt, _ := newRefreshToken(tb, a, familyID)
	if err := s.InsertRefreshToken(context.Background(), rt); err != nil {
		tb.Fatalf("InsertRefreshToken: %v", err)
	}
	return rt
}

// rotate spends the token with hash at now for a fresh successor and returns the spent token, whether it
// was fresh, and the successor it asked for.
func rotate(tb testing.TB, s *postgres.Store, hash []byte, now time.Time) (ports.RefreshToken, bool, ports.RefreshToken, error) {
	tb.Helper()
	next := ports.RefreshToken{ID: newID(), TokenHash: hashOf(randomHex(tb, 32)), ExpiresAt: now.Add(24 * time.Hour), CreatedAt: now}
	got, fresh, err := s.RotateRefreshToken(context.Background(), hash, now, next)
	return got, fresh, next, err
}

func TestRotateRefreshToken(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	rt := mustInsertRefreshToken(t, s, a, newID())

	first := baseTime.Add(time.Minute)
	got, fresh, next, err := rotate(t, s, rt.TokenHash, first)
	if err != nil || !fresh {
		t.Fatalf("first rotation: fresh=%v err=%v, want fresh", fresh, err)
	}
	if got.ID != rt.ID || got.FamilyID != rt.FamilyID || got.UserID != a.user.ID || got.OrganizationID != a.org.ID {
		t.Fatalf("first rotation returned %+v", got)
	}
	requireTime(t, "UsedAt", got.UsedAt, first)
	requireTime(t, "ExpiresAt", &got.ExpiresAt, rt.ExpiresAt)
	if got.RevokedAt != nil {
		t.Fatalf("RevokedAt = %v", got.RevokedAt)
	}
	// The successor is stored in the same family, for the same user and organization.
	succ, fresh, _, err := rotate(t, s, next.TokenHash, first.Add(time.Second))
	if err != nil || !fresh || succ.ID != next.ID || succ.FamilyID != rt.FamilyID || succ.UserID != a.user.ID || succ.OrganizationID != a.org.ID {
		t.Fatalf("successor: %+v fresh=%v err=%v", succ, fresh, err)
	}
	requireTime(t, "successor ExpiresAt", &succ.ExpiresAt, next.ExpiresAt)

	got, fresh, reused, err := rotate(t, s, rt.TokenHash, first.Add(time.Minute))
	if err != nil || fresh {
		t.Fatalf("second rotation: fresh=%v err=%v, want not fresh", fresh, err)
	}
	if got.ID != rt.ID || got.FamilyID != rt.FamilyID {
		t.Fatalf("second rotation returned %+v, want the spent token (its family is revoked next)", got)
	}
	requireTime(t, "UsedAt after reuse", got.UsedAt, first) // the first use is kept
	if _, _, _, err := rotate(t, s, reused.TokenHash, first.Add(time.Minute)); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("a refused rotation stored its successor: %v", err)
	}

	_, _, _, err = rotate(t, s, hashOf("unknown"), first)
	requireCode(t, err, ports.CodeNotFound)
}

func TestRotateRefreshToken_RevokedOrExpiredIsNotFresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	family := newID()
	rt := mustInsertRefreshToken(t, s, a, family)

	if err := s.RevokeRefreshFamily(ctx, family, baseTime); err != nil {
		t.Fatal(err)
	}
	got, fresh, _, err := rotate(t, s, rt.TokenHash, baseTime.Add(time.Minute))
	if err != nil || fresh {
		t.Fatalf("rotate revoked: fresh=%v err=%v, want not fresh", fresh, err)
	}
	if got.UsedAt != nil {
		t.Fatalf("a revoked token was marked used: %v", *got.UsedAt)
	}
	requireTime(t, "RevokedAt", got.RevokedAt, baseTime)

	expiring := mustInsertRefreshToken(t, s, a, newID())
	got, fresh, _, err = rotate(t, s, expiring.TokenHash, expiring.ExpiresAt)
	if err != nil || fresh || got.UsedAt != nil || got.RevokedAt != nil {
		t.Fatalf("rotate at expiry: %+v fresh=%v err=%v, want not fresh, untouched", got, fresh, err)
	}
}

func TestRotateRefreshToken_ConcurrentExactlyOneFresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	family := newID()
	rt := mustInsertRefreshToken(t, s, a, family)

	// Every loser does what the core does on reuse: revoke the family. Whatever the interleaving, the
	// winner's successor must end up revoked with the rest.
	const n = 20
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		fresh  int
		failed []error
		start  = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			now := baseTime.Add(time.Duration(i) * time.Second)
			_, ok, _, err := rotate(t, s, rt.TokenHash, now)
			if err == nil && !ok {
				err = s.RevokeRefreshFamily(ctx, family, now)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
			}
			if ok {
				fresh++
			}
		})
	}
	close(start)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("concurrent rotation errors: %v", failed)
	}
	if fresh != 1 {
		t.Fatalf("fresh rotations = %d, want exactly 1", fresh)
	}
	var tokens, unrevoked int
	err := s.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE revoked_at IS NULL) FROM refresh_tokens WHERE family_id = $1`, family).Scan(&tokens, &unrevoked)
	if err != nil {
		t.Fatal(err)
	}
	if tokens != 2 || unrevoked != 0 {
		t.Fatalf("family has %d tokens, %d unrevoked; want the spent one and its successor, both revoked", tokens, unrevoked)
	}
}

func TestRevokeRefreshFamily(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	family, otherFamily := newID(), newID()

	early := mustInsertRefreshToken(t, s, a, family)
	earlyRevoked := baseTime.Add(-time.Hour)
	mustExec(t, s, `UPDATE refresh_tokens SET revoked_at = $1 WHERE id = $2`, earlyRevoked, early.ID)
	t1 := mustInsertRefreshToken(t, s, a, family)
	t2 := mustInsertRefreshToken(t, s, a, family)
	other := mustInsertRefreshToken(t, s, a, otherFamily)

	now := baseTime.Add(time.Hour)
	if err := s.RevokeRefreshFamily(ctx, family, now); err != nil {
		t.Fatalf("RevokeRefreshFamily: %v", err)
	}

	for _, rt := range []ports.RefreshToken{t1, t2} {
		got, fresh, _, err := rotate(t, s, rt.TokenHash, now)
		if err != nil || fresh {
			t.Fatalf("rotate after family revoke: fresh=%v err=%v", fresh, err)
		}
		requireTime(t, "RevokedAt", got.RevokedAt, now)
	}
	got, _, _, err := rotate(t, s, early.TokenHash, now)
	if err != nil {
		t.Fatal(err)
	}
	requireTime(t, "earlier RevokedAt", got.RevokedAt, earlyRevoked)

	if _, fresh, _, err := rotate(t, s, other.TokenHash, now); err != nil || !fresh {
		t.Fatalf("token of another family: fresh=%v err=%v, want fresh", fresh, err)
	}

	if err := s.RevokeRefreshFamily(ctx, newID(), now); err != nil {
		t.Fatalf("revoke unknown family: %v", err)
	}
	if err := s.RevokeRefreshFamily(ctx, "not-a-uuid", now); err != nil {
		t.Fatalf("revoke malformed family: %v", err)
	}
}

func TestInsertRefreshToken_Constraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	rt := mustInsertRefreshToken(t, s, a, newID())

	dup, _ := newRefreshToken(t, a, newID())
	dup.TokenHash = rt.TokenHash
	requireConflict(t, s.InsertRefreshToken(ctx, dup), "refresh_tokens_token_hash_key")

	orphan, _ := newRefreshToken(t, a, newID())
	orphan.UserID = newID()
	e := requireCode(t, s.InsertRefreshToken(ctx, orphan), ports.CodeInvalidArgument)
	if e.Constraint != "refresh_tokens_user_id_fkey" {
		t.Fatalf("constraint = %q", e.Constraint)
	}
}
