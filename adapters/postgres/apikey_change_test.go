package postgres_test

import (
	"context"
	"testing"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestAPIKeys_RevocationAnnounced: every process's feed hears a key's revocation and its deletion, whoever
// made them (the store's method or plain SQL), as a change of the key's organization, so processes that
// cache keys forget them.
func TestAPIKeys_RevocationAnnounced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	_, one := runFeed(t, s.Pool())
	_, two := runFeed(t, s.Pool()) // a second process on the same database
	a := mustSignup(t, s)
	org := ports.Change{Kind: ports.ChangeOrganization, OrganizationID: a.org.ID}

	k := mustInsertAPIKey(t, s, a.org.ID, baseTime)
	if err := s.RevokeAPIKey(ctx, a.org.ID, k.ID, baseTime); err != nil {
		t.Fatal(err)
	}
	waitChange(t, one, org)
	waitChange(t, two, org)

	gone := mustInsertAPIKey(t, s, a.org.ID, baseTime)
	mustExec(t, s, `DELETE FROM api_keys WHERE id = $1`, gone.ID)
	waitChange(t, two, org)
}
