package postgres_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestAnalyticsOutbox checks the pipeline's source (event ids are UUIDv7, in time order, as the core makes
// them): every counted event the core writes is handed out, a batch whose handler fails is handed out again,
// an acknowledged one is not, events the analytics does not count (email.queued, domain events) never enter
// the outbox, and Lag is the age of the oldest waiting event.
func TestAnalyticsOutbox(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	a := st.Analytics()
	org := newID()
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
	for i, typ := range []string{ports.EventEmailSent, ports.EventEmailQueued, ports.EventEmailDelivered, ports.EventDomainVerified} {
		msg := any(newID())
		if typ == ports.EventDomainVerified {
			msg = nil
		}
		if _, err := st.Pool().Exec(ctx, `INSERT INTO events (id, organization_id, type, message_id, occurred_at)
VALUES ($1, $2, $3, $4, $5)`, uuid.Must(uuid.NewV7()).String(), org, typ, msg, at.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if lag, err := a.Lag(ctx, at.Add(time.Minute)); err != nil || lag != time.Minute {
		t.Errorf("Lag = %v, %v; want 1m", lag, err)
	}
	boom := errors.New("store down")
	if _, err := a.ReadEvents(ctx, 10, func(context.Context, []ports.AnalyticsEvent) error { return boom }); err == nil {
		t.Fatal("a failing handler's batch was acknowledged")
	}
	var got []ports.AnalyticsEvent
	n, err := a.ReadEvents(ctx, 10, func(_ context.Context, b []ports.AnalyticsEvent) error {
		got = append(got, b...)
		return a.InsertEvents(ctx, b)
	})
	if err != nil || n != 2 {
		t.Fatalf("ReadEvents took %d, %v; want 2 (the queued and domain events never enter the outbox)", n, err)
	}
	if len(got) != 2 || got[0].Type != ports.EventEmailSent || got[1].Type != ports.EventEmailDelivered || got[0].OrganizationID != org {
		t.Fatalf("handed %+v; want the sent and delivered events in order", got)
	}
	if n, err := a.ReadEvents(ctx, 10, func(context.Context, []ports.AnalyticsEvent) error {
		t.Error("an acknowledged event was handed out again")
		return nil
	}); err != nil || n != 0 {
		t.Errorf("the empty outbox: %d, %v", n, err)
	}
	if lag, err := a.Lag(ctx, time.Now()); err != nil || lag != 0 {
		t.Errorf("Lag of the empty outbox = %v, %v", lag, err)
	}
	sum, err := a.Summarize(ctx, org, ports.AnalyticsQuery{From: at.Add(-time.Hour), To: at.Add(time.Hour), Bucket: time.Hour})
	if err != nil || sum.Totals.Sent != 1 || sum.Totals.Delivered != 1 {
		t.Errorf("summary after the pipeline: %+v, %v", sum.Totals, err)
	}
}

// TestAnalyticsOutboxConcurrentReads: a second ReadEvents while the first still holds its batch (its
// handler has not returned) takes other events, never the held ones, so the pipeline may copy several
// batches at once; after both, every event was handed out exactly once.
func TestAnalyticsOutboxConcurrentReads(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	a := st.Analytics()
	org := newID()
	const events = 6
	for i := range events {
		if _, err := st.Pool().Exec(ctx, `INSERT INTO events (id, organization_id, type, message_id, occurred_at)
VALUES ($1, $2, $3, $4, now() - $5 * interval '1 second')`, uuid.Must(uuid.NewV7()).String(), org,
			ports.EventEmailSent, newID(), events-i); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	var mu sync.Mutex
	record := func(b []ports.AnalyticsEvent) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range b {
			seen[e.ID]++
		}
	}
	holding, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := a.ReadEvents(ctx, events/2, func(_ context.Context, b []ports.AnalyticsEvent) error {
			record(b)
			close(holding)
			<-release
			return nil
		})
		first <- err
	}()
	select {
	case <-holding:
	case err := <-first:
		t.Fatalf("the first read ended before its handler held the batch: %v", err)
	}
	n, err := a.ReadEvents(ctx, events, func(_ context.Context, b []ports.AnalyticsEvent) error {
		record(b)
		return nil
	})
	if err != nil || n != events/2 {
		t.Fatalf("the read beside a held batch took %d, %v; want the other %d events", n, err, events/2)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if len(seen) != events {
		t.Errorf("%d distinct events handed out, want %d", len(seen), events)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("event %s handed out %d times", id, c)
		}
	}
}

// TestAnalyticsOutboxCountedTypes: the events trigger queues exactly the types ports.AnalyticsEventTypes
// names, so the list in the migration and the one in Go cannot drift apart.
func TestAnalyticsOutboxCountedTypes(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	org := newID()
	all := []string{ports.EventEmailQueued, ports.EventEmailScheduled, ports.EventEmailSent, ports.EventEmailDelivered,
		ports.EventEmailDeliveryDelayed, ports.EventEmailBounced, ports.EventEmailComplained, ports.EventEmailOpened,
		ports.EventEmailClicked, ports.EventEmailFailed, ports.EventEmailCancelled, ports.EventEmailReceived,
		ports.EventDomainCreated, ports.EventDomainVerified, ports.EventDomainFailed}
	ids := make([]string, len(all))
	for i := range all {
		ids[i] = uuid.Must(uuid.NewV7()).String()
	}
	if _, err := st.Pool().Exec(ctx, `INSERT INTO events (id, organization_id, type, message_id, occurred_at)
SELECT id, $2, type, gen_random_uuid(), now() FROM unnest($1::uuid[], $3::text[]) AS e (id, type)`, ids, org, all); err != nil {
		t.Fatal(err)
	}
	rows, err := st.Pool().Query(ctx, `SELECT e.type FROM analytics_outbox o JOIN events e ON e.id = o.id
WHERE e.organization_id = $1 ORDER BY e.type`, org)
	if err != nil {
		t.Fatal(err)
	}
	queued, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(ports.AnalyticsEventTypes))
	if !slices.Equal(queued, want) {
		t.Fatalf("the outbox took %v; want %v", queued, want)
	}
}
