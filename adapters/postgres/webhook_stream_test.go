package postgres_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestWebhookOutboxSubscribedOnly: the events trigger queues an event for the fan-out only when an
// endpoint of its organization subscribes to its type (enabled or not), in statements that mix
// organizations too, and every event once an events stream is registered.
func TestWebhookOutboxSubscribedOnly(t *testing.T) {
	ctx := context.Background()
	s := pgtest.Store(t)
	withEndpoints, other, none := mustSignup(t, s), mustSignup(t, s), mustSignup(t, s)
	for _, e := range []ports.WebhookEndpoint{
		{OrganizationID: withEndpoints.org.ID, Enabled: true, EventTypes: []string{ports.EventEmailDelivered}},
		{OrganizationID: withEndpoints.org.ID, Enabled: false, EventTypes: []string{ports.EventEmailBounced, ports.EventDomainVerified}},
		{OrganizationID: other.org.ID, Enabled: true, EventTypes: []string{ports.EventEmailSent}},
	} {
		e.ID, e.URL, e.Secret, e.CreatedAt = newID(), "https://hooks.example/in", []byte("sealed"), time.Now()
		if err := s.InsertEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	types := []string{ports.EventEmailQueued, ports.EventEmailSent, ports.EventEmailDelivered, ports.EventEmailBounced,
		ports.EventEmailCancelled, ports.EventDomainVerified}
	// insert writes every type for each of the three organizations in one statement and returns which of
	// them the outbox took, as "organization type" in a set.
	insert := func() map[string]bool {
		t.Helper()
		var ids, orgs, tys []string
		names := map[string]string{withEndpoints.org.ID: "with", other.org.ID: "other", none.org.ID: "none"}
		for _, org := range []string{withEndpoints.org.ID, other.org.ID, none.org.ID} {
			for _, ty := range types {
				ids, orgs, tys = append(ids, uuid.Must(uuid.NewV7()).String()), append(orgs, org), append(tys, ty)
			}
		}
		if _, err := s.Pool().Exec(ctx, `INSERT INTO events (id, organization_id, type, occurred_at)
SELECT id, org, type, now() FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS e (id, org, type)`, ids, orgs, tys); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Pool().Query(ctx, `SELECT e.organization_id::text || ' ' || e.type FROM webhook_outbox o
JOIN events e ON e.id = o.id WHERE o.id = ANY ($1::uuid[])`, ids)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, g := range got {
			org, ty, _ := strings.Cut(g, " ")
			out[names[org]+" "+ty] = true
		}
		return out
	}

	want := map[string]bool{
		"with " + ports.EventEmailDelivered: true, "with " + ports.EventEmailBounced: true,
		"with " + ports.EventDomainVerified: true, "other " + ports.EventEmailSent: true,
	}
	if got := insert(); !maps.Equal(got, want) {
		t.Fatalf("without a stream the outbox took %v; want the subscribed events only, %v", got, want)
	}

	if err := s.RegisterEventStream(ctx, "kafka"); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterEventStream(ctx, "kafka"); err != nil {
		t.Fatalf("registering again: %v", err)
	}
	got := insert()
	if len(got) != 3*len(types) {
		t.Fatalf("with a stream the outbox took %d events (%v); want all %d", len(got), got, 3*len(types))
	}
}
