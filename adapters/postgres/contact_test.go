package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func str(s string) *string { return &s }

func newContact(orgID, email string) ports.Contact {
	return ports.Contact{ID: newID(), OrganizationID: orgID, Email: email, ConsentStatus: ports.ConsentSubscribed,
		Properties: map[string]any{"plan": "pro", "seats": 12.0}, CreatedAt: baseTime, UpdatedAt: baseTime}
}

func TestContacts_CRUDAndTenancy(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	a, b := mustSignup(t, st), mustSignup(t, st)
	c, err := st.CreateContact(ctx, newContact(a.org.ID, "ann@example.test"))
	if err != nil || c.Properties["seats"] != 12.0 {
		t.Fatalf("create = %+v, %v", c, err)
	}
	if _, err := st.CreateContact(ctx, newContact(a.org.ID, "ann@example.test")); ports.ErrorCode(err) != ports.CodeAlreadyExists {
		t.Fatalf("duplicate: %v", err)
	} else if e, _ := ports.AsError(err); e.Constraint != "contacts_organization_id_email_key" {
		t.Fatalf("constraint %q", e.Constraint)
	}
	// The same address in another organization is another contact.
	if _, err := st.CreateContact(ctx, newContact(b.org.ID, "ann@example.test")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetContact(ctx, b.org.ID, c.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign get: %v", err)
	}
	if _, err := st.UpdateContact(ctx, b.org.ID, c.ID, ports.ContactInput{FirstName: str("x")}, baseTime); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign update: %v", err)
	}
	if err := st.DeleteContact(ctx, b.org.ID, c.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign delete: %v", err)
	}
	later := baseTime.Add(time.Hour)
	u, err := st.UpdateContact(ctx, a.org.ID, c.ID, ports.ContactInput{FirstName: str("Ann"), ConsentStatus: str("unsubscribed")}, later)
	if err != nil || u.FirstName != "Ann" || u.ConsentStatus != "unsubscribed" || !u.ConsentAt.Equal(later) || u.Properties["plan"] != "pro" {
		t.Fatalf("update = %+v, %v", u, err)
	}
	list, err := st.ListContacts(ctx, a.org.ID, ports.ContactQuery{Limit: 10, Search: "ANN"})
	if err != nil || list.Total != 1 || len(list.Data) != 1 {
		t.Fatalf("search = %+v, %v", list, err)
	}
	list, err = st.ListContacts(ctx, a.org.ID, ports.ContactQuery{Limit: 10, Search: "%"})
	if err != nil || list.Total != 0 {
		t.Fatalf("a LIKE metacharacter matched: %+v, %v", list, err)
	}
	list, _ = st.ListContacts(ctx, a.org.ID, ports.ContactQuery{Limit: 10, ConsentStatus: "subscribed"})
	if list.Total != 0 {
		t.Fatalf("consent filter: %+v", list)
	}
	if err := st.DeleteContact(ctx, a.org.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := st.ListContacts(ctx, b.org.ID, ports.ContactQuery{Limit: 10}); list.Total != 1 {
		t.Fatalf("other org's contact went too: %+v", list)
	}
}

func TestContacts_ImportUpsertsInOneStatement(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	a, b := mustSignup(t, st), mustSignup(t, st)
	if _, err := st.CreateContact(ctx, ports.Contact{ID: newID(), OrganizationID: a.org.ID, Email: "old@example.test",
		FirstName: "Old", ConsentStatus: "unsubscribed", Properties: map[string]any{"keep": true}, CreatedAt: baseTime, UpdatedAt: baseTime}); err != nil {
		t.Fatal(err)
	}
	rows := []ports.ContactInput{
		{Email: "old@example.test", LastName: str("Timer"), Properties: map[string]any{"tier": "gold"}},
		{Email: "new@example.test", Source: str("import")},
	}
	created, updated, skipped, err := st.ImportContacts(ctx, a.org.ID, rows, true, baseTime)
	if err != nil || created != 1 || updated != 1 || skipped != 0 {
		t.Fatalf("import = %d %d %d %v", created, updated, skipped, err)
	}
	old, _ := st.GetContactByEmail(ctx, a.org.ID, "old@example.test")
	if old.FirstName != "Old" || old.LastName != "Timer" || old.ConsentStatus != "unsubscribed" ||
		old.Properties["keep"] != true || old.Properties["tier"] != "gold" {
		t.Fatalf("upserted contact = %+v (an absent field or consent must keep its value)", old)
	}
	created, updated, skipped, err = st.ImportContacts(ctx, a.org.ID, rows, false, baseTime)
	if err != nil || created != 0 || updated != 0 || skipped != 2 {
		t.Fatalf("import without upsert = %d %d %d %v", created, updated, skipped, err)
	}
	if list, _ := st.ListContacts(ctx, b.org.ID, ports.ContactQuery{Limit: 10}); list.Total != 0 {
		t.Fatalf("import wrote into another organization: %+v", list)
	}
}

func TestContacts_EventsKeepContactsCurrent(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	f := newSendFixture(t, st)
	a := account{org: f.org}
	c, err := st.CreateContact(ctx, newContact(a.org.ID, "eve@example.test"))
	if err != nil {
		t.Fatal(err)
	}
	msg := f.mustInsert(t, f.newSend(t, "Eve@Example.test"))
	var rcpt string
	if err := st.Pool().QueryRow(ctx, `SELECT id FROM recipients WHERE message_id = $1`, msg).Scan(&rcpt); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := st.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	sent, opened := baseTime.Add(time.Minute), baseTime.Add(time.Hour)
	exec(`INSERT INTO events (id, organization_id, type, message_id, recipient_id, occurred_at) VALUES
	      ($1, $2, 'email.sent', $3, $4, $5), ($6, $2, 'email.opened', $3, $4, $7)`,
		newID(), a.org.ID, msg, rcpt, sent, newID(), opened)
	got, _ := st.GetContact(ctx, a.org.ID, c.ID)
	if got.LastSentAt == nil || !got.LastSentAt.Equal(sent) || got.LastActiveAt == nil || !got.LastActiveAt.Equal(opened) || got.Bounced {
		t.Fatalf("after sent and opened = %+v", got)
	}
	exec(`INSERT INTO events (id, organization_id, type, message_id, recipient_id, occurred_at) VALUES
	      ($1, $2, 'email.bounced', $3, $4, $5)`, newID(), a.org.ID, msg, rcpt, opened)
	exec(`INSERT INTO events (id, organization_id, type, message_id, recipient_id, occurred_at) VALUES
	      ($1, $2, 'email.complained', $3, $4, $5)`, newID(), a.org.ID, msg, rcpt, opened)
	got, _ = st.GetContact(ctx, a.org.ID, c.ID)
	if !got.Bounced || got.ConsentStatus != "unsubscribed" || got.ConsentSource != "complaint" || !got.LastSentAt.Equal(sent) {
		t.Fatalf("after bounce and complaint = %+v", got)
	}
}

var _ = postgres.Marketing{}
