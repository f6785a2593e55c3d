package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// newEndpoint builds an enabled endpoint subscribed to types, with a sealed secret unique to it.
func newEndpoint(tb testing.TB, orgID string, createdAt time.Time, types ...string) ports.WebhookEndpoint {
	tb.Helper()
	return ports.WebhookEndpoint{
		ID:             newV7(),
		OrganizationID: orgID,
		URL:            "https://hooks.example.test/" + randomHex(tb, 4),
		Enabled:        true,
		EventTypes:     types,
		Secret:         []byte("sealed-whsec_" + randomHex(tb, 32)),
		CreatedAt:      createdAt,
	}
}

func mustEndpoint(tb testing.TB, s *postgres.Store, orgID string, createdAt time.Time, types ...string) ports.WebhookEndpoint {
	tb.Helper()
	e := newEndpoint(tb, orgID, createdAt, types...)
	if err := s.InsertEndpoint(context.Background(), e); err != nil {
		tb.Fatalf("InsertEndpoint: %v", err)
	}
	return e
}

// mustEvents writes n events of one type to the outbox, the way the send path does (in id order), and
// returns their ids oldest first.
func mustEvents(tb testing.TB, s *postgres.Store, orgID, typ string, n int) []string {
	tb.Helper()
	ids := make([]string, n)
	messages := make([]string, n)
	for i := range ids {
		ids[i] = newV7()
		messages[i] = newV7()
	}
	mustExec(tb, s, `INSERT INTO events (id, organization_id, type, message_id, occurred_at)
		SELECT unnest($1::uuid[]), $2, $3, unnest($4::uuid[]), $5`, ids, orgID, typ, messages, baseTime)
	return ids
}

// payloadOf is a body as the core would build it, with spacing jsonb would not keep, so that a store that
// does not keep the exact bytes fails.
func payloadOf(e ports.Event) []byte {
	return fmt.Appendf(nil, `{"id": "%s",  "type":"%s", "data":{"message_id":"%s"}}`, e.ID, e.Type, e.MessageID)
}

func payloadsOf(_ context.Context, events []ports.Event) (map[string][]byte, error) {
	out := make(map[string][]byte, len(events))
	for _, e := range events {
		out[e.ID] = payloadOf(e)
	}
	return out, nil
}

func noPayloads(tb testing.TB) func(context.Context, []ports.Event) (map[string][]byte, error) {
	return func(_ context.Context, events []ports.Event) (map[string][]byte, error) {
		tb.Errorf("payloads called with %d events, want none taken", len(events))
		return nil, nil
	}
}

// deliveriesByEndpoint lists an organization's deliveries keyed by endpoint, each set as "event id/type".
func deliveriesByEndpoint(tb testing.TB, s *postgres.Store, orgID string) map[string][]ports.WebhookDelivery {
	tb.Helper()
	list, err := s.ListRecentDeliveries(context.Background(), orgID, 1000)
	if err != nil {
		tb.Fatalf("ListRecentDeliveries: %v", err)
	}
	out := map[string][]ports.WebhookDelivery{}
	for _, d := range list {
		out[d.EndpointID] = append(out[d.EndpointID], d)
	}
	return out
}

func eventIDsOf(ds []ports.WebhookDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.EventID
	}
	slices.Sort(out)
	return out
}

// mustDelivery inserts a delivery of endpoint e in the given state.
func mustDelivery(tb testing.TB, s *postgres.Store, e ports.WebhookEndpoint, status string, next *time.Time, createdAt time.Time) ports.WebhookDelivery {
	tb.Helper()
	d := ports.WebhookDelivery{
		ID:             newV7(),
		OrganizationID: e.OrganizationID,
		EndpointID:     e.ID,
		EventID:        newV7(),
		EventType:      ports.EventEmailDelivered,
		Status:         status,
		NextRetryAt:    next,
		CreatedAt:      createdAt,
	}
	d.Payload = fmt.Appendf(nil, `{"id":"%s"}`, d.EventID)
	if err := s.InsertDelivery(context.Background(), d); err != nil {
		tb.Fatalf("InsertDelivery: %v", err)
	}
	return d
}

func ptr[T any](v T) *T { return &v }

func mustGetDelivery(tb testing.TB, s *postgres.Store, orgID, id string) ports.WebhookDelivery {
	tb.Helper()
	d, err := s.GetDelivery(context.Background(), orgID, id)
	if err != nil {
		tb.Fatalf("GetDelivery: %v", err)
	}
	return d
}

func claimedIDs(ds []ports.DueDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Delivery.ID
	}
	return out
}

func TestWebhookEndpoints_CRUD(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)

	if list, err := dataOf(s.ListEndpoints(ctx, a.org.ID, ports.Unpaged())); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("ListEndpoints of a new organization = %#v (%v), want an empty list", list, err)
	}
	older := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	newer := newEndpoint(t, a.org.ID, baseTime.Add(time.Minute), ports.EventEmailBounced, ports.EventDomainVerified)
	newer.Enabled = false
	if err := s.InsertEndpoint(ctx, newer); err != nil {
		t.Fatal(err)
	}
	list, err := dataOf(s.ListEndpoints(ctx, a.org.ID, ports.Unpaged()))
	if err != nil || len(list) != 2 || list[0].ID != newer.ID || list[1].ID != older.ID {
		t.Fatalf("ListEndpoints = %+v (%v), want newest first", list, err)
	}
	got, err := s.GetEndpoint(ctx, a.org.ID, newer.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != newer.URL || got.Enabled || !slices.Equal(got.EventTypes, newer.EventTypes) ||
		string(got.Secret) != string(newer.Secret) || got.OrganizationID != a.org.ID {
		t.Fatalf("GetEndpoint = %+v, want %+v", got, newer)
	}
	requireTime(t, "createdAt", &got.CreatedAt, newer.CreatedAt)

	rotated := []byte("sealed-whsec_" + randomHex(t, 32))
	after, err := s.SetEndpointSecret(ctx, a.org.ID, older.ID, rotated)
	if err != nil || string(after.Secret) != string(rotated) || after.URL != older.URL || !after.Enabled {
		t.Fatalf("SetEndpointSecret = %+v (%v)", after, err)
	}
	if got, _ := s.GetEndpoint(ctx, a.org.ID, older.ID); string(got.Secret) != string(rotated) {
		t.Fatalf("secret after rotation = %q, want the new one", got.Secret)
	}
	if got, _ := s.GetEndpoint(ctx, a.org.ID, newer.ID); string(got.Secret) != string(newer.Secret) {
		t.Fatal("rotating one endpoint's secret changed another's")
	}

	requireConflict(t, s.InsertEndpoint(ctx, older), "webhook_endpoints_pkey")
	orphan := newEndpoint(t, newID(), baseTime, ports.EventEmailSent)
	if e := requireCode(t, s.InsertEndpoint(ctx, orphan), ports.CodeInvalidArgument); e.Constraint != "webhook_endpoints_organization_id_fkey" {
		t.Fatalf("unknown organization: constraint %q", e.Constraint)
	}

	if err := s.DeleteEndpoint(ctx, a.org.ID, older.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetEndpoint(ctx, a.org.ID, older.ID)
	requireCode(t, err, ports.CodeNotFound)
	requireCode(t, s.DeleteEndpoint(ctx, a.org.ID, older.ID), ports.CodeNotFound)
	_, err = s.SetEndpointSecret(ctx, a.org.ID, older.ID, rotated)
	requireCode(t, err, ports.CodeNotFound)
	for _, bad := range []string{"not-a-uuid", ""} {
		_, err = s.GetEndpoint(ctx, a.org.ID, bad)
		requireCode(t, err, ports.CodeNotFound)
		requireCode(t, s.DeleteEndpoint(ctx, a.org.ID, bad), ports.CodeNotFound)
	}
	if list, _ := dataOf(s.ListEndpoints(ctx, a.org.ID, ports.Unpaged())); len(list) != 1 || list[0].ID != newer.ID {
		t.Fatalf("ListEndpoints after delete = %+v", list)
	}
}

// TestFanOut_Matching: an event reaches exactly the enabled endpoints of its own organization that
// subscribe to its type; email.cancelled reaches none; an event no endpoint subscribes to (email.queued
// here) is never queued for the fan-out; every taken event is handed to payloads and leaves the outbox.
func TestFanOut_Matching(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)

	both := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered, ports.EventEmailBounced)
	bounces := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailBounced)
	// Subscribed to email.cancelled by a row the API would refuse: fan-out still gives it none.
	cancelled := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailCancelled, ports.EventDomainCreated)
	disabled := newEndpoint(t, a.org.ID, baseTime, ports.EventEmailDelivered, ports.EventEmailBounced)
	disabled.Enabled = false
	if err := s.InsertEndpoint(ctx, disabled); err != nil {
		t.Fatal(err)
	}
	everythingB := mustEndpoint(t, s, b.org.ID, baseTime, ports.WebhookEventTypes...)

	delivered := mustEvents(t, s, a.org.ID, ports.EventEmailDelivered, 2)
	bounced := mustEvents(t, s, a.org.ID, ports.EventEmailBounced, 1)
	queued := mustEvents(t, s, a.org.ID, ports.EventEmailQueued, 1)
	cancel := mustEvents(t, s, a.org.ID, ports.EventEmailCancelled, 1)
	deliveredB := mustEvents(t, s, b.org.ID, ports.EventEmailDelivered, 1)
	resp := "250 2.0.0 OK queued as 7A1"
	mustExec(t, s, `UPDATE events SET provider_response = $1, recipient_id = $2 WHERE id = $3`, resp, newV7(), bounced[0])

	now := baseTime.Add(time.Hour)
	var handed []ports.Event
	n, err := s.FanOut(ctx, now, 100, func(ctx context.Context, events []ports.Event) (map[string][]byte, error) {
		handed = events
		return payloadsOf(ctx, events)
	})
	if err != nil || n != 5 || len(handed) != 5 {
		t.Fatalf("FanOut = %d, %v (payloads got %d events), want 5 (all but email.queued)", n, err, len(handed))
	}
	for _, e := range handed {
		if e.ID == queued[0] {
			t.Fatalf("the email.queued event no endpoint subscribes to was handed to payloads")
		}
	}
	for i := 1; i < len(handed); i++ {
		if handed[i-1].ID >= handed[i].ID {
			t.Fatalf("events not handed oldest first: %s before %s", handed[i-1].ID, handed[i].ID)
		}
	}
	for _, e := range handed {
		if e.ID != bounced[0] {
			continue
		}
		if e.OrganizationID != a.org.ID || e.Type != ports.EventEmailBounced || e.MessageID == "" || e.RecipientID == "" ||
			e.DomainID != "" || e.ProviderResponse == nil || *e.ProviderResponse != resp || !e.OccurredAt.Equal(baseTime) ||
			e.OccurredAt.Location() != time.UTC {
			t.Fatalf("bounced event handed to payloads = %+v", e)
		}
	}

	got := deliveriesByEndpoint(t, s, a.org.ID)
	want := map[string][]string{
		both.ID:    slices.Sorted(slices.Values(append(slices.Clone(delivered), bounced...))),
		bounces.ID: bounced,
	}
	if len(got) != len(want) {
		t.Fatalf("A's deliveries went to %d endpoints, want %d (cancelled: %d, disabled: %d)",
			len(got), len(want), len(got[cancelled.ID]), len(got[disabled.ID]))
	}
	for endpoint, events := range want {
		if ids := eventIDsOf(got[endpoint]); !slices.Equal(ids, events) {
			t.Fatalf("endpoint %s got events %v, want %v", endpoint, ids, events)
		}
	}
	for _, d := range got[both.ID] {
		if d.Status != ports.WebhookPending || d.Attempts != 0 || d.ResponseCode != 0 || d.DeliveredAt != nil ||
			d.OrganizationID != a.org.ID || d.OriginalEventID != "" {
			t.Fatalf("fanned-out delivery = %+v", d)
		}
		requireTime(t, "nextRetryAt", d.NextRetryAt, now)
		requireTime(t, "createdAt", &d.CreatedAt, now)
		wantType := ports.EventEmailDelivered
		if d.EventID == bounced[0] {
			wantType = ports.EventEmailBounced
		}
		if d.EventType != wantType {
			t.Fatalf("delivery of %s has type %s, want %s", d.EventID, d.EventType, wantType)
		}
		body := payloadOf(ports.Event{ID: d.EventID, Type: d.EventType, MessageID: eventMessage(t, s, d.EventID)})
		if string(d.Payload) != string(body) {
			t.Fatalf("payload = %s, want the exact bytes %s", d.Payload, body)
		}
	}
	gotB := deliveriesByEndpoint(t, s, b.org.ID)
	if len(gotB) != 1 || !slices.Equal(eventIDsOf(gotB[everythingB.ID]), deliveredB) {
		t.Fatalf("B's deliveries = %+v, want only its own event at its own endpoint", gotB)
	}
	if n := countRows(t, s, `SELECT count(*) FROM webhook_deliveries WHERE event_id = ANY ($1)`, append(queued, cancel...)); n != 0 {
		t.Fatalf("queued/cancelled events made %d deliveries, want none", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM webhook_outbox`); n != 0 {
		t.Fatalf("%d events left in the outbox", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE fanned_out_at IS NOT NULL`); n != 0 {
		t.Fatalf("%d events updated by the fan-out, want none", n)
	}

	if n, err := s.FanOut(ctx, now, 100, noPayloads(t)); n != 0 || err != nil {
		t.Fatalf("second FanOut = %d, %v; want nothing left", n, err)
	}
	if n, err := s.FanOut(ctx, now, 0, noPayloads(t)); n != 0 || err != nil {
		t.Fatalf("FanOut with limit 0 = %d, %v", n, err)
	}
}

func eventMessage(tb testing.TB, s *postgres.Store, eventID string) string {
	tb.Helper()
	var id string
	if err := s.Pool().QueryRow(context.Background(), `SELECT message_id::text FROM events WHERE id = $1`, eventID).Scan(&id); err != nil {
		tb.Fatal(err)
	}
	return id
}

// TestFanOut_LimitAndMissingBody: limit bounds the events taken (oldest first), and an event payloads gives
// no body is consumed without a delivery.
func TestFanOut_LimitAndMissingBody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	e := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailSent)
	ids := mustEvents(t, s, a.org.ID, ports.EventEmailSent, 5)

	var handed []string
	n, err := s.FanOut(ctx, baseTime, 3, func(ctx context.Context, events []ports.Event) (map[string][]byte, error) {
		for _, ev := range events {
			handed = append(handed, ev.ID)
		}
		bodies, _ := payloadsOf(ctx, events)
		delete(bodies, ids[1])
		return bodies, nil
	})
	if err != nil || n != 3 || !slices.Equal(handed, ids[:3]) {
		t.Fatalf("FanOut(limit 3) = %d, %v, handed %v; want the 3 oldest %v", n, err, handed, ids[:3])
	}
	if got := eventIDsOf(deliveriesByEndpoint(t, s, a.org.ID)[e.ID]); !slices.Equal(got, []string{ids[0], ids[2]}) {
		t.Fatalf("deliveries for events %v, want %v (none for the event without a body)", got, []string{ids[0], ids[2]})
	}
	if n, err := s.FanOut(ctx, baseTime, 10, payloadsOf); n != 2 || err != nil {
		t.Fatalf("FanOut of the rest = %d, %v; want 2", n, err)
	}
}

func TestFanOut_PayloadsFailureMarksNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	e := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	ids := mustEvents(t, s, a.org.ID, ports.EventEmailDelivered, 3)

	streamDown := errors.New("event stream unavailable")
	n, err := s.FanOut(ctx, baseTime, 10, func(context.Context, []ports.Event) (map[string][]byte, error) {
		return nil, streamDown
	})
	if !errors.Is(err, streamDown) || n != 0 {
		t.Fatalf("FanOut with failing payloads = %d, %v; want 0 and the callback's error", n, err)
	}
	if n := countRows(t, s, `SELECT count(*) FROM webhook_deliveries`); n != 0 {
		t.Fatalf("%d deliveries written by a failed fan-out", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM webhook_outbox WHERE id = ANY ($1)`, ids); n != len(ids) {
		t.Fatalf("%d of %d events left in the outbox by a failed fan-out", n, len(ids))
	}
	if n, err := s.FanOut(ctx, baseTime, 10, payloadsOf); n != 3 || err != nil {
		t.Fatalf("FanOut after recovery = %d, %v; want 3", n, err)
	}
	if got := eventIDsOf(deliveriesByEndpoint(t, s, a.org.ID)[e.ID]); !slices.Equal(got, ids) {
		t.Fatalf("deliveries after recovery for %v, want %v", got, ids)
	}
}

// TestFanOut_Concurrent: four fan-outs in parallel hand every event to payloads once and write one
// delivery per event and endpoint.
func TestFanOut_Concurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	e1 := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	e2 := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	ids := mustEvents(t, s, a.org.ID, ports.EventEmailDelivered, 300)

	var mu sync.Mutex
	seen := map[string]int{}
	payloads := func(ctx context.Context, events []ports.Event) (map[string][]byte, error) {
		mu.Lock()
		for _, e := range events {
			seen[e.ID]++
		}
		mu.Unlock()
		return payloadsOf(ctx, events)
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				n, err := s.FanOut(ctx, baseTime, 7, payloads)
				if err != nil {
					t.Errorf("FanOut: %v", err)
					return
				}
				if n == 0 {
					return
				}
				if total.Add(int64(n)) > int64(len(ids)) {
					t.Errorf("more events fanned out than written")
					return
				}
			}
		})
	}
	wg.Wait()
	if total.Load() != int64(len(ids)) || len(seen) != len(ids) {
		t.Fatalf("fanned out %d events, payloads saw %d distinct; want %d", total.Load(), len(seen), len(ids))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s handed to payloads %d times", id, n)
		}
	}
	if n := countRows(t, s, `SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries
		GROUP BY endpoint_id, event_id HAVING count(*) > 1) AS twice`); n != 0 {
		t.Fatalf("%d events fanned out twice to one endpoint", n)
	}
	for _, e := range []ports.WebhookEndpoint{e1, e2} {
		if n := countRows(t, s, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, e.ID); n != len(ids) {
			t.Fatalf("endpoint has %d deliveries, want %d", n, len(ids))
		}
	}
}

// TestFanOut_EventsBeforeMigrationCountAsFannedOut: upgrading a database that already holds events does
// not post its history to endpoints.
func TestFanOut_EventsBeforeMigrationCountAsFannedOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	sqlDB := stdlib.OpenDBFromPool(s.Pool())
	t.Cleanup(func() { sqlDB.Close() })
	migrateTo(t, sqlDB, 6)

	a := mustSignup(t, s)
	old := mustEvents(t, s, a.org.ID, ports.EventEmailDelivered, 3)
	if err := postgres.Migrate(ctx, s.Pool()); err != nil {
		t.Fatal(err)
	}
	mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	fresh := mustEvents(t, s, a.org.ID, ports.EventEmailDelivered, 1)

	var handed []string
	n, err := s.FanOut(ctx, baseTime, 10, func(ctx context.Context, events []ports.Event) (map[string][]byte, error) {
		for _, e := range events {
			handed = append(handed, e.ID)
		}
		return payloadsOf(ctx, events)
	})
	if err != nil || n != 1 || !slices.Equal(handed, fresh) {
		t.Fatalf("FanOut after upgrade = %d, %v, handed %v; want only the new event %v (not %v)", n, err, handed, fresh, old)
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE id = ANY ($1) AND fanned_out_at IS NOT NULL`, old); n != len(old) {
		t.Fatalf("%d of %d pre-upgrade events count as fanned out", n, len(old))
	}
}

// migrateTo applies the embedded migrations up to version alone, as an older release would have.
func migrateTo(tb testing.TB, sqlDB *sql.DB, version int64) {
	tb.Helper()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, os.DirFS("migrations"), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := provider.UpTo(context.Background(), version); err != nil {
		tb.Fatalf("migrate to %d: %v", version, err)
	}
}
