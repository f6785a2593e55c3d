package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func cond(kind, column, key, cmp string, set func(*ports.PlanNode)) ports.PlanNode {
	n := ports.PlanNode{Op: ports.PlanCond, Kind: kind, Column: column, Key: key, Cmp: cmp}
	if set != nil {
		set(&n)
	}
	return n
}

func TestSegments_PlansMatchAndStayInTheirOrganization(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	a, b := mustSignup(t, st), mustSignup(t, st)
	mk := func(orgID, email string, props map[string]any) string {
		c := newContact(orgID, email)
		c.Properties = props
		out, err := st.CreateContact(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return out.ID
	}
	ann := mk(a.org.ID, "ann@example.test", map[string]any{"seats": 12.0, "plan": "pro"})
	bob := mk(a.org.ID, "bob_x@example.test", map[string]any{"seats": "9", "plan": "free"})
	mk(a.org.ID, "cat@example.test", map[string]any{"seats": "many"})
	mk(b.org.ID, "ann@example.test", map[string]any{"seats": 50.0, "plan": "pro"})
	news := ports.Topic{ID: newID(), OrganizationID: a.org.ID, Key: "news", Name: "News", CreatedAt: baseTime, UpdatedAt: baseTime}
	if _, err := st.CreateTopic(ctx, news); err != nil {
		t.Fatal(err)
	}
	other := ports.Topic{ID: newID(), OrganizationID: b.org.ID, Key: "weekly", Name: "Weekly", CreatedAt: baseTime, UpdatedAt: baseTime}
	if _, err := st.CreateTopic(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetSubscription(ctx, a.org.ID, news.ID, ports.SubscriptionRequest{ContactID: ann}, ports.Contact{}, "subscribed", baseTime); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetSubscription(ctx, a.org.ID, news.ID, ports.SubscriptionRequest{ContactID: bob}, ports.Contact{}, "pending", baseTime); err != nil {
		t.Fatal(err)
	}
	// A contact of organization a cannot be subscribed to organization b's topic.
	if _, err := st.SetSubscription(ctx, b.org.ID, other.ID, ports.SubscriptionRequest{ContactID: ann}, ports.Contact{}, "subscribed", baseTime); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("cross-organization subscription: %v", err)
	}
	cases := []struct {
		name string
		plan ports.PlanNode
		want int
	}{
		{"seats > 10 numerically; a non-numeric value never matches", cond(ports.FieldProperty, "", "seats", "gt", func(n *ports.PlanNode) { n.ValKind, n.Number = "number", 10 }), 1},
		{"seats >= 9 counts the numeric string", cond(ports.FieldProperty, "", "seats", "gte", func(n *ports.PlanNode) { n.ValKind, n.Number = "number", 9 }), 2},
		{"contains escapes _", cond(ports.FieldText, "email", "", "contains", func(n *ports.PlanNode) { n.ValKind, n.Text = "string", "b_x" }), 1},
		{"contains _ is not a wildcard", cond(ports.FieldText, "email", "", "contains", func(n *ports.PlanNode) { n.ValKind, n.Text = "string", "n_" }), 0},
		{"topic subscribed excludes pending", cond(ports.FieldTopic, "", "news", "eq", func(n *ports.PlanNode) { n.ValKind, n.Text = "string", "subscribed" }), 1},
		{"topic pending", cond(ports.FieldTopic, "", "news", "in", func(n *ports.PlanNode) { n.Texts = []string{"pending"} }), 1},
		{"another organization's topic key matches nothing", cond(ports.FieldTopic, "", "weekly", "exists", nil), 0},
		{"property eq", cond(ports.FieldProperty, "", "plan", "eq", func(n *ports.PlanNode) { n.ValKind, n.Text = "string", "pro" }), 1},
		{"property null", cond(ports.FieldProperty, "", "plan", "eq", func(n *ports.PlanNode) { n.IsNull = true }), 1},
		{"in empty matches nothing", cond(ports.FieldText, "email", "", "in", nil), 0},
		{"or of and", ports.PlanNode{Op: ports.PlanOr, Children: []ports.PlanNode{
			cond(ports.FieldBool, "bounced", "", "eq", func(n *ports.PlanNode) { n.ValKind, n.Bool = "bool", true }),
			{Op: ports.PlanAnd, Children: []ports.PlanNode{
				cond(ports.FieldTimestamp, "created_at", "", "lt", func(n *ports.PlanNode) { n.ValKind, n.DaysAgo = "days", 0 }),
				cond(ports.FieldTimestamp, "last_sent_at", "", "exists", func(n *ports.PlanNode) { n.Negate = true }),
			}},
		}}, 3},
	}
	for _, c := range cases {
		p, err := st.PreviewPlan(ctx, a.org.ID, c.plan, 25)
		if err != nil || p.Count != c.want || len(p.Sample) != c.want {
			t.Errorf("%s: count %d sample %d err %v, want %d", c.name, p.Count, len(p.Sample), err, c.want)
		}
		for _, s := range p.Sample {
			if s.OrganizationID != a.org.ID {
				t.Errorf("%s: sample from another organization", c.name)
			}
		}
	}
	// A plan naming a column outside the table is refused before any SQL runs.
	if _, err := st.PreviewPlan(ctx, a.org.ID, cond(ports.FieldText, "organization_id", "", "exists", nil), 25); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("unknown column: %v", err)
	}
	// A saved segment's plan drives its audience.
	plan := cond(ports.FieldProperty, "", "plan", "eq", func(n *ports.PlanNode) { n.ValKind, n.Text = "string", "pro" })
	seg, err := st.CreateSegment(ctx, ports.Segment{ID: newID(), OrganizationID: a.org.ID, Name: "Pro",
		Rule: json.RawMessage(`{"field":"properties.plan","cmp":"eq","value":"pro"}`), Plan: &plan, CreatedAt: baseTime, UpdatedAt: baseTime})
	if err != nil {
		t.Fatal(err)
	}
	aud, err := st.PageAudience(ctx, a.org.ID, ports.Audience{SegmentID: seg.ID}, "", 10)
	if err != nil || len(aud) != 1 || aud[0].ID != ann {
		t.Fatalf("segment audience = %+v, %v", aud, err)
	}
	if _, err := st.PageAudience(ctx, b.org.ID, ports.Audience{SegmentID: seg.ID}, "", 10); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign segment: %v", err)
	}
	if _, err := st.GetSegment(ctx, b.org.ID, seg.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign segment get: %v", err)
	}
}

// A rule matching more contacts than the preview reads ids for is counted in full, and its sample is still
// ordered by id, bounded and of the organization; a rule matching up to that many gives the first matches by id.
func TestSegments_PreviewCountsBeyondTheIDCap(t *testing.T) {
	defer postgres.SetPreviewIDCap(3)()
	ctx := context.Background()
	st := pgtest.Store(t)
	a, b := mustSignup(t, st), mustSignup(t, st)
	var ids []string
	for i := range 7 {
		c := newContact(a.org.ID, fmt.Sprintf("r%d@example.test", i))
		c.Properties = map[string]any{"plan": []string{"pro", "free"}[i%2]}
		out, err := st.CreateContact(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.ID)
	}
	for i := range 5 {
		if _, err := st.CreateContact(ctx, newContact(b.org.ID, fmt.Sprintf("r%d@example.test", i))); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(ids)
	all := ports.PlanNode{Op: ports.PlanAnd}
	pro := cond(ports.FieldProperty, "", "plan", "eq", func(n *ports.PlanNode) { n.ValKind, n.Text = "string", "pro" })
	for _, c := range []struct {
		name         string
		plan         ports.PlanNode
		limit, count int
	}{
		{"over the cap", all, 2, 7},
		{"over the cap, sample larger than the cap", all, 25, 7},
		{"one over the cap", ports.PlanNode{Op: ports.PlanAnd, Children: []ports.PlanNode{pro,
			cond(ports.FieldText, "email", "", "contains", func(n *ports.PlanNode) { n.ValKind, n.Text = "string", "r" })}}, 25, 4},
		{"at the cap", ports.PlanNode{Op: ports.PlanAnd, Children: []ports.PlanNode{pro,
			cond(ports.FieldText, "email", "", "in", func(n *ports.PlanNode) { n.Texts = []string{"r0@example.test", "r2@example.test", "r4@example.test"} })}}, 25, 3},
		{"under the cap", ports.PlanNode{Op: ports.PlanAnd, Children: []ports.PlanNode{pro,
			cond(ports.FieldText, "email", "", "in", func(n *ports.PlanNode) { n.Texts = []string{"r0@example.test", "r2@example.test"} })}}, 1, 2},
	} {
		p, err := st.PreviewPlan(ctx, a.org.ID, c.plan, c.limit)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := min(c.limit, c.count, 4) // the sample comes from at most cap+1 = 4 ids
		if p.Count != c.count || len(p.Sample) != want {
			t.Errorf("%s: count %d sample %d, want %d and %d", c.name, p.Count, len(p.Sample), c.count, want)
		}
		for i, s := range p.Sample {
			if s.OrganizationID != a.org.ID || !slices.Contains(ids, s.ID) {
				t.Errorf("%s: sample %s is not one of the organization's contacts", c.name, s.ID)
			}
			if i > 0 && p.Sample[i-1].ID >= s.ID {
				t.Errorf("%s: sample not ordered by id", c.name)
			}
		}
	}
	// Under the cap the sample is the first matches by id.
	p, err := st.PreviewPlan(ctx, a.org.ID, pro, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Count != 4 || len(p.Sample) != 2 {
		t.Fatalf("pro: count %d sample %d", p.Count, len(p.Sample))
	}
	var proIDs []string
	for _, id := range ids {
		c, err := st.GetContact(ctx, a.org.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Properties["plan"] == "pro" {
			proIDs = append(proIDs, id)
		}
	}
	if p.Sample[0].ID != proIDs[0] || p.Sample[1].ID != proIDs[1] {
		t.Fatalf("pro sample %s, %s; want the first by id %v", p.Sample[0].ID, p.Sample[1].ID, proIDs[:2])
	}
}
