package postgres_test

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// mustDimensionsMessage stores a message of org on domainID with tags and returns its id.
func mustDimensionsMessage(tb testing.TB, s *postgres.Store, org, domainID string, tags string) string {
	tb.Helper()
	id := newV7()
	mustExec(tb, s, `INSERT INTO messages (id, organization_id, domain_id, status, from_address, tags, created_at)
VALUES ($1, $2, $3, 'delivered', 'ada@example.test', $4::jsonb, now())`, id, org, domainID, tags)
	return id
}

// TestMessageDimensions: each message's sending domain and tags ("name:value", ordered by name), only for
// the organization that owns the message; unknown ids and ids that are not UUIDs are absent, not errors.
func TestMessageDimensions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	domA, domB := mustDomain(t, s, a.org.ID), mustDomain(t, s, b.org.ID)
	tagged := mustDimensionsMessage(t, s, a.org.ID, domA.ID, `{"tier": "gold", "campaign": "launch"}`)
	plain := mustDimensionsMessage(t, s, a.org.ID, domA.ID, `{}`)
	ofB := mustDimensionsMessage(t, s, b.org.ID, domB.ID, `{"campaign": "b"}`)

	ref := func(org, msg string) ports.MessageRef { return ports.MessageRef{OrganizationID: org, MessageID: msg} }
	got, err := s.Analytics().MessageDimensions(ctx, []ports.MessageRef{
		ref(a.org.ID, tagged), ref(a.org.ID, plain), ref(b.org.ID, ofB),
		ref(b.org.ID, tagged), ref(a.org.ID, ofB), // another organization's messages
		ref(a.org.ID, newV7()), ref(newID(), tagged), ref("not-a-uuid", tagged), ref(a.org.ID, "42"),
		ref(a.org.ID, tagged), // asked twice
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[ports.MessageRef]ports.MessageDimensions{
		ref(a.org.ID, tagged): {Domain: domA.Name, Tags: []string{"campaign:launch", "tier:gold"}},
		ref(a.org.ID, plain):  {Domain: domA.Name},
		ref(b.org.ID, ofB):    {Domain: domB.Name, Tags: []string{"campaign:b"}},
	}
	if len(got) != len(want) {
		t.Errorf("got %d messages, want %d: %+v", len(got), len(want), got)
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || g.Domain != w.Domain || !slices.Equal(g.Tags, w.Tags) {
			t.Errorf("%+v: got %+v (found %v), want %+v", k, g, ok, w)
		}
	}
	if _, ok := got[ref(b.org.ID, tagged)]; ok {
		t.Error("a message of organization A was found with organization B's id")
	}

	if got, err := s.Analytics().MessageDimensions(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("no refs: %v, %v", got, err)
	}

	// A batch as large as the pipeline's, in one call.
	var refs []ports.MessageRef
	rows, err := s.Pool().Query(ctx, `
INSERT INTO messages (id, organization_id, domain_id, status, from_address, tags, created_at)
SELECT gen_random_uuid(), $1, $2, 'delivered', 'ada@example.test', jsonb_build_object('n', i::text), now()
FROM generate_series(1, 1000) AS i RETURNING id::text`, a.org.ID, domA.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref(a.org.ID, id))
	}
	if rows.Close(); rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	got, err = s.Analytics().MessageDimensions(ctx, refs)
	if err != nil || len(got) != 1000 {
		t.Fatalf("a batch of 1,000: %d found, %v", len(got), err)
	}
	for _, r := range refs {
		if d := got[r]; d.Domain != domA.Name || len(d.Tags) != 1 || d.Tags[0][:2] != "n:" {
			t.Fatalf("%+v: %+v", r, d)
		}
	}
}

// TestMessageDimensionsPlan: after ProbePlans each pair is a probe of messages' primary key and one of
// domains by (organization_id, id) even when the statistics describe messages as nearly empty while it holds thousands of rows.
func TestMessageDimensionsPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	dom := mustDomain(t, s, a.org.ID)
	mustDimensionsMessage(t, s, a.org.ID, dom.ID, `{}`)
	mustExec(t, s, "ANALYZE messages")
	mustExec(t, s, `INSERT INTO messages (id, organization_id, domain_id, status, from_address, tags, created_at)
SELECT gen_random_uuid(), $1, $2, 'delivered', 'ada@example.test', '{}', now() FROM generate_series(1, 4000)`,
		a.org.ID, dom.ID)
	plan, err := s.MessageDimensionsPlan(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`Seq Scan on (messages|domains)\b|Hash Join|Merge Join`).FindString(plan); m != "" {
		t.Errorf("planned with %q after ProbePlans:\n%s", m, plan)
	}
	if !regexp.MustCompile(`Index Scan using messages_pkey on messages`).MatchString(plan) {
		t.Errorf("messages are not found through their primary key:\n%s", plan)
	}
	if !regexp.MustCompile(`Index Cond: \(\(organization_id = m\.organization_id\) AND \(id = m\.domain_id\)\)`).MatchString(plan) {
		t.Errorf("domains are not found by (organization_id, id):\n%s", plan)
	}
	if plan, err := s.MessageDimensionsPlan(ctx, false); err == nil {
		t.Logf("without ProbePlans:\n%s", plan)
	}
}
