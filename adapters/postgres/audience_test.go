package postgres_test

import (
	"context"
	"testing"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestAudience_TopicPagesSubscribedOnlyAndUnsubscribes(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	a, b := mustSignup(t, st), mustSignup(t, st)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := st.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	topic, otherTopic := newID(), newID()
	exec(`INSERT INTO topics (id, organization_id, key, name, created_at, updated_at) VALUES ($1, $2, 'news', 'News', now(), now())`, topic, a.org.ID)
	exec(`INSERT INTO topics (id, organization_id, key, name, created_at, updated_at) VALUES ($1, $2, 'news', 'News', now(), now())`, otherTopic, b.org.ID)
	// ids in ascending order: c1 < c2 < ... so paging order is known.
	ids := []string{
		"00000000-0000-7000-8000-000000000001", "00000000-0000-7000-8000-000000000002",
		"00000000-0000-7000-8000-000000000003", "00000000-0000-7000-8000-000000000004",
		"00000000-0000-7000-8000-000000000005",
	}
	type row struct {
		consent, sub string
		bounced      bool
	}
	rows := []row{{"subscribed", "subscribed", false}, {"subscribed", "pending", false}, {"unsubscribed", "subscribed", false},
		{"subscribed", "subscribed", true}, {"subscribed", "subscribed", false}}
	for i, r := range rows {
		exec(`INSERT INTO contacts (id, organization_id, email, consent_status, bounced, properties, created_at, updated_at)
		      VALUES ($1, $2, $3, $4, $5, '{"plan":"pro"}', now(), now())`, ids[i], a.org.ID, "c"+string(rune('1'+i))+"@example.test", r.consent, r.bounced)
		exec(`INSERT INTO topic_subscriptions (organization_id, topic_id, contact_id, status, created_at, updated_at)
		      VALUES ($1, $2, $3, $4, now(), now())`, a.org.ID, topic, ids[i], r.sub)
	}
	page, err := st.PageAudience(ctx, a.org.ID, ports.Audience{TopicID: topic}, "", 1)
	if err != nil || len(page) != 1 || page[0].ID != ids[0] || page[0].Properties["plan"] != "pro" {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	page, err = st.PageAudience(ctx, a.org.ID, ports.Audience{TopicID: topic}, page[0].ID, 10)
	if err != nil || len(page) != 1 || page[0].ID != ids[4] {
		t.Fatalf("second page = %+v, %v (pending, unsubscribed and bounced contacts must be left out)", page, err)
	}
	// Another organization's topic is not found, and its audience does not leak.
	if _, err := st.PageAudience(ctx, b.org.ID, ports.Audience{TopicID: topic}, "", 10); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign topic: %v", err)
	}
	if page, err := st.PageAudience(ctx, b.org.ID, ports.Audience{TopicID: otherTopic}, "", 10); err != nil || len(page) != 0 {
		t.Fatalf("other org's own topic = %+v, %v", page, err)
	}
	// Unsubscribing from the topic, then from everything; unknown ids and another org change nothing.
	if err := st.UnsubscribeContact(ctx, b.org.ID, ids[0], "", "one-click"); err != nil {
		t.Fatal(err)
	}
	if err := st.UnsubscribeContact(ctx, a.org.ID, ids[0], topic, "one-click"); err != nil {
		t.Fatal(err)
	}
	if err := st.UnsubscribeContact(ctx, a.org.ID, newID(), "", "one-click"); err != nil {
		t.Fatal(err)
	}
	page, _ = st.PageAudience(ctx, a.org.ID, ports.Audience{TopicID: topic}, "", 10)
	if len(page) != 1 || page[0].ID != ids[4] {
		t.Fatalf("after topic unsubscribe = %+v", page)
	}
	if err := st.UnsubscribeContact(ctx, a.org.ID, ids[4], "", "one-click"); err != nil {
		t.Fatal(err)
	}
	var status, source string
	if err := st.Pool().QueryRow(ctx, `SELECT consent_status, consent_source FROM contacts WHERE id = $1`, ids[4]).Scan(&status, &source); err != nil || status != "unsubscribed" || source != "one-click" {
		t.Fatalf("contact consent = %q %q %v", status, source, err)
	}
	if err := st.Pool().QueryRow(ctx, `SELECT consent_status FROM contacts WHERE id = $1`, ids[0]).Scan(&status); err != nil || status != "subscribed" {
		t.Fatalf("another org unsubscribed the contact: %q %v", status, err)
	}
	page, _ = st.PageAudience(ctx, a.org.ID, ports.Audience{TopicID: topic}, "", 10)
	if len(page) != 0 {
		t.Fatalf("after unsubscribing everything = %+v", page)
	}
	if _, err := st.PageAudience(ctx, a.org.ID, ports.Audience{SegmentID: newID()}, "", 10); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("unknown segment: %v", err)
	}
}
