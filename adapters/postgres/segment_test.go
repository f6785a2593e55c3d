package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

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
