package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// sendingBroadcasts inserts n sending broadcasts of org with a topic audience and returns their ids.
func sendingBroadcasts(t *testing.T, st *postgres.Store, orgID string, n int) []string {
	t.Helper()
	topic := newID()
	mustExec(t, st, `INSERT INTO topics (id, organization_id, key, name, created_at, updated_at) VALUES ($1, $2, $3, 'News', now(), now())`,
		topic, orgID, "news-"+topic[:8])
	ids := make([]string, n)
	for i := range ids {
		b := newBroadcastRow(orgID, topic)
		b.Status = ports.BroadcastSending
		if err := st.InsertBroadcast(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		ids[i] = b.ID
	}
	return ids
}

func claimedBroadcasts(list []ports.Broadcast) map[string]string {
	out := map[string]string{}
	for _, b := range list {
		out[b.ID] = b.ExpanderToken
	}
	return out
}

// Claims made at the same moment get disjoint broadcasts, each with a token of its own; a claim in
// progress (its rows locked, not yet committed) is skipped rather than waited for, and once committed its
// lease keeps the broadcast from every other claim.
func TestBroadcasts_ConcurrentClaimsAreDisjoint(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	f := newSendFixture(t, st)
	const rounds, claimers, perClaim = 8, 4, 2
	for round := range rounds {
		ids := sendingBroadcasts(t, st, f.org.ID, claimers*perClaim)
		start := make(chan struct{})
		results := make([][]ports.Broadcast, claimers)
		errs := make([]error, claimers)
		var wg sync.WaitGroup
		for i := range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = st.ClaimBroadcasts(ctx, time.Now(), perClaim, time.Minute)
			}()
		}
		close(start)
		wg.Wait()
		owner := map[string]int{}
		tokens := map[string]bool{}
		for i, list := range results {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			for _, b := range list {
				if prev, dup := owner[b.ID]; dup {
					t.Fatalf("round %d: broadcast %s claimed by claims %d and %d at once", round, b.ID, prev, i)
				}
				owner[b.ID] = i
				if b.ExpanderToken == "" || tokens[b.ExpanderToken] {
					t.Fatalf("round %d: token %q empty or reused", round, b.ExpanderToken)
				}
				tokens[b.ExpanderToken] = true
			}
		}
		if len(owner) != len(ids) {
			t.Fatalf("round %d: %d of %d broadcasts claimed", round, len(owner), len(ids))
		}
	}

	// A claim in progress: its rows are locked by a transaction that has not committed.
	ids := sendingBroadcasts(t, st, f.org.ID, 2)
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `UPDATE broadcasts SET expander_token = gen_random_uuid(), expander_lease_until = now() + interval '1 minute'
		WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	list, err := st.ClaimBroadcasts(short, time.Now(), 10, time.Minute)
	if err != nil {
		t.Fatalf("a claim waited for the one in progress: %v", err)
	}
	if got := claimedBroadcasts(list); len(got) != 1 || got[ids[1]] == "" {
		t.Fatalf("beside a claim in progress: claimed %v, want only %s", got, ids[1])
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if list, err := st.ClaimBroadcasts(ctx, time.Now(), 10, time.Minute); err != nil || len(list) != 0 {
		t.Fatalf("after the other claim committed: %v, %v", claimedBroadcasts(list), err)
	}
}

// A claimed broadcast is not handed out again while its lease lasts, and is once it has run out, under a
// new token. A batch recorded under the stale token changes nothing: no cursor, no recipients, no lease.
// The holder's batch extends the lease; releasing and finishing end it. Every statement but the claim is
// scoped by organization.
func TestBroadcasts_ExpansionLease(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	f := newSendFixture(t, st)
	other := mustSignup(t, st)
	id := sendingBroadcasts(t, st, f.org.ID, 1)[0]
	leaseUntil := func() (token string, until time.Time, cursor string, recipients int) {
		t.Helper()
		if err := st.Pool().QueryRow(ctx, `SELECT coalesce(expander_token::text, ''), coalesce(expander_lease_until, 'epoch'), cursor,
			(SELECT count(*) FROM broadcast_recipients WHERE broadcast_id = b.id) FROM broadcasts b WHERE id = $1`, id).
			Scan(&token, &until, &cursor, &recipients); err != nil {
			t.Fatal(err)
		}
		return
	}

	const lease = 1500 * time.Millisecond
	first, err := st.ClaimBroadcasts(ctx, time.Now(), 10, lease)
	if err != nil || len(first) != 1 || first[0].ID != id || first[0].ExpanderToken == "" {
		t.Fatalf("claim = %+v, %v", first, err)
	}
	claimedAt := time.Now()
	// The API's reads never carry a token.
	if got, _ := st.GetBroadcast(ctx, f.org.ID, id); got.ExpanderToken != "" {
		t.Fatalf("GetBroadcast carries the token %q", got.ExpanderToken)
	}
	if again, err := st.ClaimBroadcasts(ctx, time.Now(), 10, lease); err != nil || len(again) != 0 {
		t.Fatalf("claimed again during the lease: %v, %v", claimedBroadcasts(again), err)
	}
	if time.Since(claimedAt) >= lease {
		t.Fatal("the second claim came after the lease ended; the test proves nothing")
	}
	time.Sleep(time.Until(claimedAt.Add(lease + 300*time.Millisecond)))
	second, err := st.ClaimBroadcasts(ctx, time.Now(), 10, time.Minute)
	if err != nil || len(second) != 1 || second[0].ID != id || second[0].ExpanderToken == first[0].ExpanderToken {
		t.Fatalf("claim after the lease ended = %+v, %v", second, err)
	}
	stale, holder := first[0], second[0]
	_, heldUntil, _, _ := leaseUntil()

	// The stale holder's batch, from the cursor it read (still the stored one), records nothing.
	c1 := "00000000-0000-7000-8000-0000000000b1"
	mustExec(t, st, `INSERT INTO contacts (id, organization_id, email, created_at, updated_at) VALUES ($1, $2, 'b1@example.test', now(), now())`, c1, f.org.ID)
	batch := []ports.BroadcastRecipient{{ContactID: c1, Email: "b1@example.test", Status: ports.BroadcastRecipientSuppressed, CreatedAt: baseTime}}
	if moved, err := st.RecordBatch(ctx, stale, c1, batch, time.Hour); err != nil || moved {
		t.Fatalf("stale record = %v, %v", moved, err)
	}
	if token, until, cursor, n := leaseUntil(); token != holder.ExpanderToken || !until.Equal(heldUntil) || cursor != "" || n != 0 {
		t.Fatalf("after the stale record: token %s until %s cursor %q recipients %d", token, until, cursor, n)
	}
	// Nor does a batch without a token, or under another organization.
	noToken := holder
	noToken.ExpanderToken = ""
	foreign := holder
	foreign.OrganizationID = other.org.ID
	for _, b := range []ports.Broadcast{noToken, foreign} {
		if moved, err := st.RecordBatch(ctx, b, c1, batch, time.Hour); err != nil || moved {
			t.Fatalf("record without the lease = %v, %v", moved, err)
		}
	}
	// The holder's batch moves the cursor and extends the lease from now.
	before := time.Now()
	if moved, err := st.RecordBatch(ctx, holder, c1, batch, time.Hour); err != nil || !moved {
		t.Fatalf("holder record = %v, %v", moved, err)
	}
	if token, until, cursor, n := leaseUntil(); token != holder.ExpanderToken || until.Before(before.Add(59*time.Minute)) || cursor != c1 || n != 1 {
		t.Fatalf("after the holder's record: token %s until %s cursor %q recipients %d", token, until, cursor, n)
	}

	// Release: the stale token and another organization change nothing; the holder's ends the lease and
	// the broadcast is claimable at once.
	for _, b := range []ports.Broadcast{stale, foreign} {
		if err := st.ReleaseBroadcast(ctx, b); err != nil {
			t.Fatal(err)
		}
		if token, _, _, _ := leaseUntil(); token != holder.ExpanderToken {
			t.Fatalf("a release without the lease ended it (token %q)", token)
		}
	}
	if err := st.ReleaseBroadcast(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if token, until, _, _ := leaseUntil(); token != "" || until.After(time.Now()) {
		t.Fatalf("after the release: token %q until %s", token, until)
	}
	third, err := st.ClaimBroadcasts(ctx, time.Now(), 10, time.Minute)
	if err != nil || len(third) != 1 || third[0].Cursor != c1 {
		t.Fatalf("claim after the release = %+v, %v", third, err)
	}
	// Pausing (or finishing) ends the lease too.
	until := time.Now().Add(time.Hour)
	if err := st.FinishBroadcast(ctx, f.org.ID, id, ports.BroadcastSending, "warm-up", &until, time.Now()); err != nil {
		t.Fatal(err)
	}
	if token, _, _, _ := leaseUntil(); token != "" {
		t.Fatalf("paused with a lease: token %q", token)
	}
	if moved, err := st.RecordBatch(ctx, third[0], c1, nil, time.Minute); err != nil || moved {
		t.Fatalf("record after the pause = %v, %v", moved, err)
	}
}
