package e2e

import (
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

// TestRevokedKeySeenByAnotherProcess: two processes serve the API over one database, each keeping the
// API keys it read for an hour. A key revoked through one is refused by that process's very next request
// and by the other's within moments, because the database announces the revocation; the organization's
// other keys keep working in both.
func TestRevokedKeySeenByAnotherProcess(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, pgtest.URL(t))
	cfg.LookupCacheTTL = time.Hour // only the announcement can make the other process forget
	e1 := MustStart(t, cfg, "all")
	other := cfg
	other.DataDir = t.TempDir() // each MTA keeps its own journal
	e2 := MustStart(t, other, "all")

	a := e1.MustSignup("keys@revoke.example", "")
	revokedID, revoked := e1.MustKey(a, []string{"billing:read"})
	_, kept := e1.MustKey(a, []string{"billing:read"})
	const path = "/v1/billing/subscription"
	// A feed that starts listening tells its process to forget everything and keep nothing read in the
	// following moments (at most two seconds, core/account's apiKeyGuardFor): wait for that to pass so
	// that the keys below are really cached.
	time.Sleep(2500 * time.Millisecond)
	for _, e := range []*env{e1, e2} {
		expect(t, e.get(path, revoked), 200) // now cached in both processes
		expect(t, e.get(path, kept), 200)
	}

	expect(t, e1.del("/v1/api-keys/"+revokedID, a.access), 200)
	errorBody(t, e1.get(path, revoked), 401, "Unauthorized", "") // the very next request

	deadline := time.Now().Add(15 * time.Second)
	for {
		r := e2.get(path, revoked)
		if r.status == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other process still answers %d to the revoked key: %s", r.status, r.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	expect(t, e1.get(path, kept), 200)
	expect(t, e2.get(path, kept), 200)
}
