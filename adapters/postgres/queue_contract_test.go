package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
	"github.com/postmill/postmill/ports/porttest"
)

// queueContractConfig keeps the lease short, so that the suite's "a consumer went away" case — another
// consumer takes over once the lease expires — finishes in seconds.
var queueContractConfig = postgres.QueueConfig{Lease: 2 * time.Second, PollInterval: 50 * time.Millisecond}

// TestQueueContract runs the shared ports.Queue contract. Every New gets its own schema; each consumer the
// suite opens gets its own connection pool on that schema, as a separate MTA process would, and "going
// away" closes that pool without acking: its leases then run out.
func TestQueueContract(t *testing.T) {
	t.Parallel()
	porttest.ExerciseQueue(t, porttest.QueueHarness{
		New: func(t *testing.T) (ports.Queue, porttest.OpenConsumer) {
			dsn := pgtest.URL(t)
			publisher := openQueueStore(t, dsn, true)
			return postgres.NewQueue(publisher.Pool(), queueContractConfig), func(t *testing.T) (ports.Queue, func()) {
				s := openQueueStore(t, dsn, false)
				return postgres.NewQueue(s.Pool(), queueContractConfig), s.Close
			}
		},
		// PostgreSQL does not promise order per domain (OrderedPerDomain false): SKIP LOCKED hands rows to
		// whichever consumer asks.
		Redelivery: 10*queueContractConfig.Lease + 10*time.Second,
	})
}

// openQueueStore opens a Store (a pool of its own) on the schema of dsn, migrating it when asked, and
// closes it when tb ends.
func openQueueStore(tb testing.TB, dsn string, migrate bool) *postgres.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(s.Close)
	if migrate {
		if err := postgres.Migrate(ctx, s.Pool()); err != nil {
			tb.Fatalf("migrate: %v", err)
		}
	}
	return s
}
