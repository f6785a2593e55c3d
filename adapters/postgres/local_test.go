package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestLocalDNS_PublishedDomains reads the records of domains by name across organizations: a name two
// organizations hold comes back twice with each one's own DKIM record, names not asked about stay out,
// and a domain created after a first read is found by the next one.
func TestLocalDNS_PublishedDomains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	local := s.LocalDNS()
	a := mustSignup(t, s)
	b := mustSignup(t, s)

	shared1 := newDomain(t, a.org.ID, "shared.example.test", baseTime)
	shared2 := newDomain(t, b.org.ID, "shared.example.test", baseTime.Add(time.Second))
	other := newDomain(t, b.org.ID, "other.example.test", baseTime)
	for _, d := range []ports.Domain{shared1, shared2, other} {
		if err := s.InsertDomain(ctx, d, domainCreated(d)); err != nil {
			t.Fatalf("InsertDomain(%s): %v", d.Name, err)
		}
	}

	got, err := local.PublishedDomains(ctx, []string{"shared.example.test", "nothing.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d domains, want the two organizations' shared.example.test: %+v", len(got), got)
	}
	for i, want := range []ports.Domain{shared1, shared2} {
		g := got[i]
		if g.Name != "shared.example.test" || len(g.Records) != 5 {
			t.Fatalf("domain %d = %+v", i, g)
		}
		for j, r := range g.Records {
			w := want.Records[j]
			if r.Type != w.Type || r.Host != w.Host || r.Value != w.Value || r.TTL != w.TTL || r.DomainID != want.ID {
				t.Errorf("domain %d record %d = %+v, want %+v", i, j, r, w)
			}
		}
	}
	if got[0].Records[1].Host == got[1].Records[1].Host {
		t.Error("the two domains share a DKIM host: their records were merged or mixed up")
	}

	if got, err := local.PublishedDomains(ctx, []string{"later.example.test"}); err != nil || len(got) != 0 {
		t.Fatalf("before creation: %+v, %v", got, err)
	}
	later := newDomain(t, a.org.ID, "later.example.test", baseTime)
	if err := s.InsertDomain(ctx, later, domainCreated(later)); err != nil {
		t.Fatal(err)
	}
	if got, err := local.PublishedDomains(ctx, []string{"later.example.test"}); err != nil || len(got) != 1 || len(got[0].Records) != 5 {
		t.Fatalf("after creation: %+v, %v", got, err)
	}

	if got, err := local.PublishedDomains(ctx, nil); err != nil || got != nil {
		t.Fatalf("no names: %+v, %v", got, err)
	}
	if _, err := local.PublishedDomains(ctx, make([]string, 129)); err == nil {
		t.Fatal("129 names at once were accepted")
	}
}
