package postgres_test

import (
	"context"
	"database/sql"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// webhookOutboxVersion is the migration that moved the fan-out from marking events to the webhook outbox.
const webhookOutboxVersion = 33

// outboxIDs returns the ids in the webhook outbox, in order.
func outboxIDs(tb testing.TB, s *postgres.Store) []string {
	tb.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT id::text FROM webhook_outbox ORDER BY id`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return ids
}

// mustFannedOutEvents writes n events inserted already fanned out, as tools and benchmarks seed them.
func mustFannedOutEvents(tb testing.TB, s *postgres.Store, orgID string, n int) []string {
	tb.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = newV7()
	}
	mustExec(tb, s, `INSERT INTO events (id, organization_id, type, message_id, occurred_at, fanned_out_at)
		SELECT unnest($1::uuid[]), $2, $3, gen_random_uuid(), $4, $4`, ids, orgID, ports.EventEmailDelivered, baseTime)
	return ids
}

// migrateDownTo rolls the embedded migrations back to version, as a downgrade would.
func migrateDownTo(tb testing.TB, sqlDB *sql.DB, version int64) {
	tb.Helper()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, os.DirFS("migrations"), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := provider.DownTo(context.Background(), version); err != nil {
		tb.Fatalf("migrate down to %d: %v", version, err)
	}
}

// TestFanOut_OutboxSkipsEventsInsertedFannedOut: an event inserted with fanned_out_at set never enters
// the outbox, and an outbox id whose event is gone is consumed without being handed to payloads.
func TestFanOut_OutboxSkipsEventsInsertedFannedOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	e := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	before := outboxIDs(t, s) // signing up may write events of its own
	mustFannedOutEvents(t, s, a.org.ID, 2)
	pending := mustEvents(t, s, a.org.ID, ports.EventEmailDelivered, 2)
	if got := outboxIDs(t, s); !slices.Equal(got, append(before, pending...)) {
		t.Fatalf("outbox = %v, want %v (none of the events inserted fanned out)", got, append(before, pending...))
	}
	gone := newV7()
	mustExec(t, s, `INSERT INTO webhook_outbox (id) VALUES ($1)`, gone)

	var handed []string
	n, err := s.FanOut(ctx, baseTime, 100, func(ctx context.Context, events []ports.Event) (map[string][]byte, error) {
		for _, ev := range events {
			handed = append(handed, ev.ID)
		}
		return payloadsOf(ctx, events)
	})
	want := append(slices.Clone(before), pending...)
	if err != nil || n != len(want)+1 || !slices.Equal(handed, want) {
		t.Fatalf("FanOut = %d, %v, handed %v; want %d ids taken and %v handed", n, err, handed, len(want)+1, want)
	}
	if got := eventIDsOf(deliveriesByEndpoint(t, s, a.org.ID)[e.ID]); !slices.Equal(got, pending) {
		t.Fatalf("deliveries for events %v, want %v", got, pending)
	}
	if got := outboxIDs(t, s); len(got) != 0 {
		t.Fatalf("outbox after FanOut = %v, want empty", got)
	}
}

// TestFanOut_OutboxMigration: upgrading moves the events not fanned out yet into the outbox (and not those
// fanned out already), and downgrading marks the events fanned out since, so that the release before
// takes only what was still pending.
func TestFanOut_OutboxMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	sqlDB := stdlib.OpenDBFromPool(s.Pool())
	t.Cleanup(func() { sqlDB.Close() })
	migrateTo(t, sqlDB, webhookOutboxVersion-1)

	org := newV7()
	done := mustFannedOutEvents(t, s, org, 2)
	pending := mustEvents(t, s, org, ports.EventEmailDelivered, 3)
	if err := postgres.Migrate(ctx, s.Pool()); err != nil {
		t.Fatal(err)
	}
	if got := outboxIDs(t, s); !slices.Equal(got, pending) {
		t.Fatalf("outbox after upgrade = %v, want the pending events %v (not %v)", got, pending, done)
	}
	if n := countRows(t, s, `SELECT count(*) FROM pg_indexes WHERE indexname = 'events_fan_out_idx' AND schemaname = current_schema()`); n != 0 {
		t.Fatal("events_fan_out_idx survives the upgrade")
	}

	var handed []string
	n, err := s.FanOut(ctx, baseTime, 2, func(ctx context.Context, events []ports.Event) (map[string][]byte, error) {
		for _, ev := range events {
			handed = append(handed, ev.ID)
		}
		return payloadsOf(ctx, events)
	})
	if err != nil || n != 2 || !slices.Equal(handed, pending[:2]) {
		t.Fatalf("FanOut after upgrade = %d, %v, handed %v; want %v", n, err, handed, pending[:2])
	}

	migrateDownTo(t, sqlDB, webhookOutboxVersion-1)
	if n := countRows(t, s, `SELECT count(*) FROM pg_tables WHERE tablename = 'webhook_outbox' AND schemaname = current_schema()`); n != 0 {
		t.Fatal("webhook_outbox survives the downgrade")
	}
	if n := countRows(t, s, `SELECT count(*) FROM pg_indexes WHERE indexname = 'events_fan_out_idx' AND schemaname = current_schema()`); n != 1 {
		t.Fatal("events_fan_out_idx not restored by the downgrade")
	}
	var still []string
	rows, err := s.Pool().Query(ctx, `SELECT id::text FROM events WHERE fanned_out_at IS NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		still = append(still, id)
	}
	if rows.Close(); rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if !slices.Equal(still, pending[2:]) {
		t.Fatalf("events pending after the downgrade = %v, want only %v", still, pending[2:])
	}
}

// TestFanOutPlan: after ProbePlans the take walks the outbox in id order and finds each event by a probe
// of events_pkey, and the delete probes the outbox's key, even when the statistics describe both tables
// as nearly empty while they hold thousands of rows.
func TestFanOutPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	org := newV7()
	mustEvents(t, s, org, ports.EventEmailDelivered, 2)
	mustExec(t, s, "ANALYZE events")
	mustExec(t, s, "ANALYZE webhook_outbox")
	mustExec(t, s, `INSERT INTO events (id, organization_id, type, message_id, occurred_at)
		SELECT gen_random_uuid(), $1, 'email.delivered', gen_random_uuid(), now() FROM generate_series(1, 4000)`, org)

	take, remove, err := s.FanOutPlans(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	scans := regexp.MustCompile(`Seq Scan on (events|webhook_outbox|webhook_endpoints)\b|Hash Join|Merge Join|Hash Right Join|Hash Left Join`)
	for name, plan := range map[string]string{"take": take, "delete": remove} {
		if m := scans.FindString(plan); m != "" {
			t.Errorf("the %s is planned with %q after ProbePlans:\n%s", name, m, plan)
		}
	}
	if !regexp.MustCompile(`Index Scan using events_pkey on events`).MatchString(take) {
		t.Errorf("the take does not find events through their primary key:\n%s", take)
	}
	if !regexp.MustCompile(`Index Scan using webhook_outbox_pkey on webhook_outbox`).MatchString(take) {
		t.Errorf("the take does not walk the outbox in key order:\n%s", take)
	}
	if !regexp.MustCompile(`webhook_outbox_pkey`).MatchString(remove) {
		t.Errorf("the delete does not probe the outbox's key:\n%s", remove)
	}
	if take, _, err := s.FanOutPlans(ctx, false); err == nil {
		t.Logf("the take without ProbePlans:\n%s", take)
	}
}
