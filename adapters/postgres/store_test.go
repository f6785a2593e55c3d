package postgres_test

import (
	"context"
	"testing"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestStore_AreasShareOnePool: the area stores a Store hands out work on their own, as their ports, over
// the Store's one pool: what one area writes the others read.
func TestStore_AreasShareOnePool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t)

	var (
		accounts ports.AccountStore      = st.Accounts
		orgs     ports.OrganizationStore = st.Organizations
		domains  ports.DomainStore       = st.Domains
		messages ports.MessageStore      = st.Messages
		delivery ports.DeliveryStore     = st.Delivery
	)
	u, org, m := signupInput(t)
	if err := accounts.CreateSignup(ctx, u, org, m); err != nil {
		t.Fatal(err)
	}
	if got, err := orgs.Organization(ctx, org.ID); err != nil || got.Slug != org.Slug {
		t.Fatalf("Organization = %+v, %v", got, err)
	}
	dom := mustDomain(t, st, org.ID)
	if got, err := domains.GetDomain(ctx, org.ID, dom.ID); err != nil || got.Name != dom.Name {
		t.Fatalf("GetDomain = %+v, %v", got, err)
	}
	f := sendFixture{s: st, org: org, dom: dom}
	nm := f.newSend(t, "a@example.org")
	ins, err := messages.InsertMessage(ctx, nm)
	if err != nil {
		t.Fatal(err)
	}
	id := ins.ID
	got, gotDom, err := delivery.OutboundData(ctx, org.ID, id)
	if err != nil || got.ID != id || gotDom.ID != dom.ID || len(got.Recipients) != 1 {
		t.Fatalf("OutboundData = %+v, %+v, %v", got, gotDom, err)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
