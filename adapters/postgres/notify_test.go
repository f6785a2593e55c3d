package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// runFeed runs a change feed over pool until the test ends and returns the changes it hears, after
// waiting for the ChangeAll that says it listens.
func runFeed(tb testing.TB, pool *pgxpool.Pool) (*postgres.ChangeFeed, <-chan ports.Change) {
	tb.Helper()
	feed := postgres.NewChangeFeed(pool, nil)
	ch := make(chan ports.Change, 100)
	cancelSub := feed.Subscribe(func(c ports.Change) { ch <- c })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- feed.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
		cancelSub()
	})
	waitChange(tb, ch, ports.Change{Kind: ports.ChangeAll})
	return feed, ch
}

// waitChange waits for want among the changes heard, skipping others (the channel is database-wide, so
// tests in other schemas announce changes too).
func waitChange(tb testing.TB, ch <-chan ports.Change, want ports.Change) {
	tb.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case c := <-ch:
			if c == want {
				return
			}
		case <-timeout:
			tb.Fatalf("change %+v never heard", want)
		}
	}
}

// TestChangeFeed: every process's feed hears a committed pause, a new plan and a domain's new status,
// whoever made them (the store's methods or plain SQL); Publish reaches this process's subscribers before
// it returns, and a cancelled subscription hears nothing more.
func TestChangeFeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	_, one := runFeed(t, s.Pool())
	_, two := runFeed(t, s.Pool()) // a second process on the same database
	acc := mustSignup(t, s)
	org := ports.Change{Kind: ports.ChangeOrganization, OrganizationID: acc.org.ID}

	if _, err := s.SetOrganizationPaused(ctx, acc.org.ID, true); err != nil {
		t.Fatal(err)
	}
	waitChange(t, one, org)
	waitChange(t, two, org)
	if _, err := s.SetOrganizationPlan(ctx, acc.org.ID, ports.Plan{MonthlyLimit: 10}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, two, org)

	domainID := newV7()
	mustExec(t, s, `INSERT INTO domains (id, organization_id, name, status, dkim_selector, dkim_private_key, dkim_public_key, created_at)
		VALUES ($1, $2, 'feed.example', 'verified', 's1', '\x00', 'p', now())`, domainID, acc.org.ID)
	mustExec(t, s, `UPDATE domains SET status = 'suspended' WHERE id = $1`, domainID)
	waitChange(t, one, ports.Change{Kind: ports.ChangeDomain, OrganizationID: acc.org.ID, DomainID: domainID})

	local := postgres.NewChangeFeed(s.Pool(), nil) // not listening: Publish alone must reach subscribers
	var heard []ports.Change
	cancel := local.Subscribe(func(c ports.Change) { heard = append(heard, c) })
	local.Publish(org)
	if len(heard) != 1 || heard[0] != org {
		t.Fatalf("Publish delivered %+v", heard)
	}
	cancel()
	local.Publish(org)
	if len(heard) != 1 {
		t.Fatalf("a cancelled subscription heard %+v", heard)
	}
}

// TestChangeFeed_LostConnection: when the listening connection is cut, the feed listens again and tells
// its subscribers ChangeAll, because changes committed meanwhile were not heard; later changes arrive.
func TestChangeFeed_LostConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	app := "feed-" + randomHex(t, 6)
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app // names this test's listener among all others
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	s := postgres.New(pool)
	_, ch := runFeed(t, pool)

	var killed int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listeners (%v), want 1", killed, err)
	}
	waitChange(t, ch, ports.Change{Kind: ports.ChangeAll})
	acc := mustSignup(t, s)
	if _, err := s.SetOrganizationPaused(ctx, acc.org.ID, true); err != nil {
		t.Fatal(err)
	}
	waitChange(t, ch, ports.Change{Kind: ports.ChangeOrganization, OrganizationID: acc.org.ID})
}
