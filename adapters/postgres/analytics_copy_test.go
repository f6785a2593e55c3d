package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestAnalyticsCopyOutbox: CopyOutbox counts each outbox event once into the rollups of its own
// organization (everything, its message's sending domain, each of its tags), removes the ids it took,
// including those of events the analytics does not count, skips ids another transaction holds, keeps no
// event rows, and never lends one organization's message dimensions to another's event.
func TestAnalyticsCopyOutbox(t *testing.T) {
	ctx := context.Background()
	s := pgtest.Store(t)
	a := s.Analytics()
	orgA, orgB := mustSignup(t, s), mustSignup(t, s)
	domA, domB := mustDomain(t, s, orgA.org.ID), mustDomain(t, s, orgB.org.ID)
	tagged := mustDimensionsMessage(t, s, orgA.org.ID, domA.ID, `{"tier": "gold", "campaign": "launch"}`)
	plain := mustDimensionsMessage(t, s, orgA.org.ID, domA.ID, `{}`)
	ofB := mustDimensionsMessage(t, s, orgB.org.ID, domB.ID, `{"campaign": "b"}`)
	hour := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	var ids []string
	event := func(org, typ string, msg any) string {
		id := newV7()
		mustExec(t, s, `INSERT INTO events (id, organization_id, type, message_id, occurred_at) VALUES ($1, $2, $3, $4, $5)`,
			id, org, typ, msg, hour.Add(time.Duration(len(ids)+1)*time.Minute))
		ids = append(ids, id)
		return id
	}
	event(orgA.org.ID, ports.EventEmailQueued, tagged) // never enters the outbox
	event(orgA.org.ID, ports.EventEmailSent, tagged)
	event(orgA.org.ID, ports.EventEmailSent, plain)
	event(orgA.org.ID, ports.EventEmailDelivered, tagged)
	event(orgA.org.ID, ports.EventEmailOpened, tagged)
	event(orgA.org.ID, ports.EventEmailSent, ofB) // names B's message: counted for A, without B's domain or tags
	event(orgB.org.ID, ports.EventEmailSent, ofB)
	// A domain event whose id is in the outbox (as every event was before migration 00038): removed uncounted.
	domainEvent := event(orgA.org.ID, ports.EventDomainVerified, nil)
	mustExec(t, s, `INSERT INTO analytics_outbox (id) VALUES ($1)`, domainEvent)

	// Another transaction holds the oldest outbox id: CopyOutbox takes the others.
	held, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	if _, err := held.Exec(ctx, `SELECT id FROM analytics_outbox WHERE id = $1 FOR UPDATE`, ids[1]); err != nil {
		t.Fatal(err)
	}
	took := 0
	for {
		n, err := a.CopyOutbox(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if n > 2 {
			t.Fatalf("CopyOutbox(2) took %d", n)
		}
		took += n
	}
	if took != 6 {
		t.Fatalf("took %d outbox ids beside the held one, want 6", took)
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := a.CopyOutbox(ctx, 10); err != nil || n != 1 {
		t.Fatalf("after the holder ended: took %d, %v; want the held id", n, err)
	}
	var left, stored int
	if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM analytics_outbox), (SELECT count(*) FROM analytics_events)`).Scan(&left, &stored); err != nil {
		t.Fatal(err)
	}
	if left != 0 || stored != 0 {
		t.Errorf("outbox ids left %d, event rows stored %d; want 0 and 0", left, stored)
	}

	type key struct{ org, domain, tag string }
	type counts struct{ sent, delivered, opened int64 }
	rows, err := s.Pool().Query(ctx, `SELECT organization_id::text, domain, tag, bucket, sent, delivered, opened,
    bounced + complained + clicked + failed + delayed FROM analytics_rollups`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[key]counts{}
	for rows.Next() {
		var k key
		var c counts
		var bucket time.Time
		var others int64
		if err := rows.Scan(&k.org, &k.domain, &k.tag, &bucket, &c.sent, &c.delivered, &c.opened, &others); err != nil {
			t.Fatal(err)
		}
		if !bucket.Equal(hour) || others != 0 {
			t.Errorf("%+v: bucket %v (want %v), other counts %d", k, bucket, hour, others)
		}
		got[k] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	a1, b1 := orgA.org.ID, orgB.org.ID
	want := map[key]counts{
		{a1, "", ""}:                {sent: 3, delivered: 1, opened: 1},
		{a1, domA.Name, ""}:         {sent: 2, delivered: 1, opened: 1},
		{a1, "", "campaign:launch"}: {sent: 1, delivered: 1, opened: 1},
		{a1, "", "tier:gold"}:       {sent: 1, delivered: 1, opened: 1},
		{b1, "", ""}:                {sent: 1},
		{b1, domB.Name, ""}:         {sent: 1},
		{b1, "", "campaign:b"}:      {sent: 1},
	}
	if len(got) != len(want) {
		t.Errorf("%d rollup rows, want %d: %+v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("rollup %+v = %+v, want %+v", k, got[k], w)
		}
	}

	sum, err := a.Summarize(ctx, a1, ports.AnalyticsQuery{From: hour, To: hour.Add(time.Hour), Bucket: time.Hour})
	if err != nil || sum.Totals.Sent != 3 || sum.Totals.Delivered != 1 || sum.Totals.Opened != 1 {
		t.Errorf("summary of A: %+v, %v", sum.Totals, err)
	}
}

// CopyOutbox's statement is planned on each call. Its connection never keeps a generic plan made while
// events and messages were empty (a new installation), which walked an index of events for every outbox id
// or read each message through messages_organization_id_created_at_idx; on the tables as they are, it
// finds each event and message by its primary key. The store has one connection, so every call runs on the
// connection whose prepared statements are then read.
func TestAnalyticsCopyOutbox_PlannedFromTheTablesAsTheyAre(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := singleConnectionStore(t)
	f := newSendFixture(t, s)
	for _, table := range []string{"messages", "events", "analytics_outbox"} {
		mustExec(t, s, "ALTER TABLE "+table+" SET (autovacuum_enabled = false)")
		mustExec(t, s, "VACUUM ANALYZE "+table)
	}
	for range 8 { // past the five custom plans after which PostgreSQL may settle on a generic one
		if n, err := s.Analytics().CopyOutbox(ctx, 1000); err != nil || n != 0 {
			t.Fatalf("on an empty outbox: %d, %v", n, err)
		}
	}
	mustExec(t, s, `
WITH m AS (
    INSERT INTO messages (id, organization_id, domain_id, status, from_address, subject, html_body, text_body,
        headers, tags, sandbox, created_at)
    SELECT gen_random_uuid(), $1, $2, 'delivered', 'a@b.example', 's', '', 'x', '{}', '{"plan": "pro"}', false, now()
    FROM generate_series(1, 3000)
    RETURNING id
)
INSERT INTO events (id, organization_id, type, message_id, occurred_at)
SELECT gen_random_uuid(), $1, t, m.id, now() FROM m, unnest(ARRAY['email.sent', 'email.delivered']) AS t`, f.org.ID, f.dom.ID)
	took := 0
	for {
		n, err := s.Analytics().CopyOutbox(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		took += n
	}
	if took != 6000 {
		t.Fatalf("copied %d events, want 6000", took)
	}
	var sent, delivered int64
	if err := s.Pool().QueryRow(ctx, `SELECT sum(sent), sum(delivered) FROM analytics_rollups
WHERE organization_id = $1 AND domain = $2 AND tag = ''`, f.org.ID, f.dom.Name).Scan(&sent, &delivered); err != nil || sent != 3000 || delivered != 3000 {
		t.Fatalf("rollups of the domain: %d sent, %d delivered, %v; want 3000 each", sent, delivered, err)
	}
	var generic, custom int64
	if err := s.Pool().QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE '%DELETE FROM analytics_outbox%' AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&generic, &custom); err != nil {
		t.Fatalf("the copy's prepared statement: %v", err)
	}
	if generic != 0 || custom < 14 {
		t.Fatalf("the copy ran %d times with a generic plan and %d with one of its own, want every call planned", generic, custom)
	}
	plan, err := s.CopyOutboxPlan(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Index Scan using events_pkey on events", "Index Scan using messages_pkey on messages"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the copy's plan lacks %q:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "Seq Scan on events") || strings.Contains(plan, "Seq Scan on messages") {
		t.Errorf("the copy's plan reads a whole table:\n%s", plan)
	}
}
