package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestCrossOrganization checks every organization-scoped method from the other tenant's side: B sees
// none of A's rows and cannot change them, and the answers are the same as for ids that do not exist.
func TestCrossOrganization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	keyA := mustInsertAPIKey(t, s, a.org.ID, baseTime)
	credA := mustInsertSMTPCredential(t, s, a.org.ID, baseTime)
	period := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	mustExec(t, s, `INSERT INTO usage_meters (organization_id, metric, period_start, value) VALUES ($1, 'emails_sent', $2, 7)`, a.org.ID, period)

	t.Run("api keys", func(t *testing.T) {
		keys, err := s.ListAPIKeys(ctx, b.org.ID)
		if err != nil || len(keys) != 0 {
			t.Fatalf("B lists %d keys (%v), want none", len(keys), err)
		}
		requireCode(t, s.RevokeAPIKey(ctx, b.org.ID, keyA.ID, baseTime), ports.CodeNotFound)
		got, err := s.APIKeyByPrefix(ctx, keyA.Prefix)
		if err != nil || got.RevokedAt != nil {
			t.Fatalf("A's key after B's revoke attempt: revokedAt=%v err=%v", got.RevokedAt, err)
		}
		keys, err = s.ListAPIKeys(ctx, a.org.ID)
		if err != nil || len(keys) != 1 || keys[0].ID != keyA.ID {
			t.Fatalf("A lists %+v (%v), want its key", keys, err)
		}
	})

	t.Run("smtp credentials", func(t *testing.T) {
		creds, err := s.ListSMTPCredentials(ctx, b.org.ID)
		if err != nil || len(creds) != 0 {
			t.Fatalf("B lists %d credentials (%v), want none", len(creds), err)
		}
		requireCode(t, s.DeleteSMTPCredential(ctx, b.org.ID, credA.ID), ports.CodeNotFound)
		creds, err = s.ListSMTPCredentials(ctx, a.org.ID)
		if err != nil || len(creds) != 1 || creds[0].ID != credA.ID {
			t.Fatalf("A's credentials after B's delete attempt: %+v (%v)", creds, err)
		}
	})

	t.Run("organization data", func(t *testing.T) {
		orgB, err := s.Organization(ctx, b.org.ID)
		if err != nil || orgB.ID != b.org.ID || orgB.Slug != b.org.Slug {
			t.Fatalf("Organization(B) = %+v (%v)", orgB, err)
		}
		if v, err := s.Usage(ctx, b.org.ID, "emails_sent", period); err != nil || v != 0 {
			t.Fatalf("B's usage = %d (%v), want 0 (A's meter must not count)", v, err)
		}
		if v, err := s.Usage(ctx, a.org.ID, "emails_sent", period); err != nil || v != 7 {
			t.Fatalf("A's usage = %d (%v), want 7", v, err)
		}
		if _, err := s.SetOrganizationPaused(ctx, b.org.ID, true); err != nil {
			t.Fatal(err)
		}
		if orgA, _ := s.Organization(ctx, a.org.ID); orgA.Paused {
			t.Fatal("pausing B paused A")
		}
		ms, err := s.Memberships(ctx, b.user.ID)
		if err != nil || len(ms) != 1 || ms[0].OrganizationID != b.org.ID {
			t.Fatalf("B's user memberships = %+v (%v), want only B", ms, err)
		}
	})
}
