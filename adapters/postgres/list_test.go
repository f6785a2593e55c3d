package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// dataOf drops a page's cursor, for tests that read a whole list in one page.
func dataOf[T any](p ports.Page[T], err error) ([]T, error) { return p.Data, err }

// pagedList is one of the lists with a bare-array form, seen through its store method.
type pagedList struct {
	name string
	// add inserts a row of orgID ("" for a global suppression) created at at and returns its id.
	add  func(tb testing.TB, s *postgres.Store, orgID string, at time.Time) string
	list func(s *postgres.Store, orgID string, q ports.PageQuery) ([]string, string, error)
}

func ids[T any](p ports.Page[T], err error, id func(T) string) ([]string, string, error) {
	out := make([]string, 0, len(p.Data))
	for _, v := range p.Data {
		out = append(out, id(v))
	}
	return out, p.NextCursor, err
}

var pagedLists = []pagedList{
	{
		name: "domains",
		add: func(tb testing.TB, s *postgres.Store, orgID string, at time.Time) string {
			d := newDomain(tb, orgID, "d-"+randomHex(tb, 4)+".example.test", at)
			if err := s.InsertDomain(context.Background(), d, domainCreated(d)); err != nil {
				tb.Fatal(err)
			}
			return d.ID
		},
		list: func(s *postgres.Store, orgID string, q ports.PageQuery) ([]string, string, error) {
			p, err := s.ListDomains(context.Background(), orgID, q)
			return ids(p, err, func(d ports.Domain) string { return d.ID })
		},
	},
	{
		name: "templates",
		add: func(tb testing.TB, s *postgres.Store, orgID string, at time.Time) string {
			t := ports.Template{ID: newV7(), OrganizationID: orgID, Name: "t", CreatedAt: at}
			if err := s.InsertTemplate(context.Background(), t); err != nil {
				tb.Fatal(err)
			}
			return t.ID
		},
		list: func(s *postgres.Store, orgID string, q ports.PageQuery) ([]string, string, error) {
			p, err := s.ListTemplates(context.Background(), orgID, q)
			return ids(p, err, func(t ports.Template) string { return t.ID })
		},
	},
	{
		name: "suppressions",
		add: func(tb testing.TB, s *postgres.Store, orgID string, at time.Time) string {
			scope := ports.SuppressionScopeTenant
			if orgID == "" {
				scope = ports.SuppressionScopeGlobal
			}
			sp, err := s.InsertSuppression(context.Background(), ports.Suppression{ID: newV7(), OrganizationID: orgID,
				Address: "a-" + randomHex(tb, 4) + "@example.test", Scope: scope, Reason: ports.SuppressionManual, CreatedAt: at})
			if err != nil {
				tb.Fatal(err)
			}
			return sp.ID
		},
		list: func(s *postgres.Store, orgID string, q ports.PageQuery) ([]string, string, error) {
			p, err := s.ListSuppressions(context.Background(), orgID, q)
			return ids(p, err, func(sp ports.Suppression) string { return sp.ID })
		},
	},
	{
		name: "webhook endpoints",
		add: func(tb testing.TB, s *postgres.Store, orgID string, at time.Time) string {
			return mustEndpoint(tb, s, orgID, at, ports.EventEmailSent).ID
		},
		list: func(s *postgres.Store, orgID string, q ports.PageQuery) ([]string, string, error) {
			p, err := s.ListEndpoints(context.Background(), orgID, q)
			return ids(p, err, func(e ports.WebhookEndpoint) string { return e.ID })
		},
	},
}

// TestLists_KeysetPaging walks every list with a bare-array form page by page: newest first, rows created
// at the same instant ordered by id, no row twice or missed, the last page without a cursor, and nothing
// of another organization on any page.
func TestLists_KeysetPaging(t *testing.T) {
	t.Parallel()
	for _, l := range pagedLists {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			s := pgtest.Store(t)
			a, b := mustSignup(t, s), mustSignup(t, s)
			// Five rows, two pairs sharing a creation time, inserted out of order.
			var want []string
			for _, at := range []time.Time{baseTime.Add(time.Minute), baseTime, baseTime.Add(2 * time.Minute), baseTime, baseTime.Add(time.Minute)} {
				want = append(want, l.add(t, s, a.org.ID, at))
			}
			l.add(t, s, b.org.ID, baseTime.Add(time.Hour)) // newer than all of A's
			all, next, err := l.list(s, a.org.ID, ports.Unpaged())
			if err != nil || next != "" || len(all) != 5 {
				t.Fatalf("unpaged list = %v, next %q (%v)", all, next, err)
			}
			if !slices.Equal(slices.Sorted(slices.Values(all)), slices.Sorted(slices.Values(want))) {
				t.Fatalf("unpaged list %v holds other rows than %v", all, want)
			}
			if all[0] != want[2] {
				t.Fatalf("first row %s, want the newest %s", all[0], want[2])
			}

			var walked []string
			q := ports.PageQuery{Limit: 2}
			for pages := 0; ; pages++ {
				got, next, err := l.list(s, a.org.ID, q)
				if err != nil || pages > 3 {
					t.Fatalf("page %d: %v (%v)", pages, got, err)
				}
				if len(got) > 2 || (next != "" && len(got) != 2) {
					t.Fatalf("page %d has %d rows, next %q", pages, len(got), next)
				}
				walked = append(walked, got...)
				if next == "" {
					break
				}
				q.Cursor = next
			}
			if !slices.Equal(walked, all) {
				t.Fatalf("pages gave %v, want the unpaged order %v", walked, all)
			}

			// A page size that is the exact count ends without a cursor.
			if got, next, err := l.list(s, a.org.ID, ports.PageQuery{Limit: 5}); err != nil || next != "" || len(got) != 5 {
				t.Fatalf("limit 5 = %v, next %q (%v)", got, next, err)
			}
			if got, _, err := l.list(s, b.org.ID, ports.Unpaged()); err != nil || len(got) != 1 {
				t.Fatalf("B lists %v (%v), want its one row", got, err)
			}
			// A's cursor used by B shows only B's rows older than it: none.
			first, next, _ := l.list(s, a.org.ID, ports.PageQuery{Limit: 1})
			if got, _, err := l.list(s, b.org.ID, ports.PageQuery{Limit: 10, Cursor: next}); err != nil || len(got) != 0 || len(first) != 1 {
				t.Fatalf("B with A's cursor = %v (%v)", got, err)
			}

			for _, bad := range []ports.PageQuery{{Limit: 1, Cursor: "nope"}, {Limit: 1, Cursor: "dnY"}, {Limit: ports.MaxUnpagedListRows + 1}, {Limit: -1}} {
				_, _, err := l.list(s, a.org.ID, bad)
				requireCode(t, err, ports.CodeInvalidArgument)
			}
		})
	}
}

func TestSuppressions_GlobalListIsPagedApart(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	l := pagedLists[2]
	tenant := l.add(t, s, a.org.ID, baseTime)
	g1 := l.add(t, s, "", baseTime)
	g2 := l.add(t, s, "", baseTime.Add(time.Second))
	got, next, err := l.list(s, "", ports.PageQuery{Limit: 1})
	if err != nil || len(got) != 1 || got[0] != g2 || next == "" {
		t.Fatalf("first global page = %v, next %q (%v)", got, next, err)
	}
	got, next, err = l.list(s, "", ports.PageQuery{Limit: 1, Cursor: next})
	if err != nil || len(got) != 1 || got[0] != g1 {
		t.Fatalf("second global page = %v, next %q (%v)", got, next, err)
	}
	if rest, _, _ := l.list(s, "", ports.PageQuery{Limit: 1, Cursor: next}); slices.Contains(rest, tenant) {
		t.Fatalf("the global list shows a tenant row: %v", rest)
	}
	if got, _, _ := l.list(s, a.org.ID, ports.Unpaged()); !slices.Equal(got, []string{tenant}) {
		t.Fatalf("tenant list = %v, want only %s", got, tenant)
	}
}

// TestTemplateVersions_NewestAndPaged checks GetTemplate's window (the newest versions, oldest first, and
// whether older ones exist) and the version pages (newest first, cursor on the version number).
func TestTemplateVersions_NewestAndPaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	tpl := ports.Template{ID: newV7(), OrganizationID: a.org.ID, Name: "t", CreatedAt: baseTime}
	if err := s.InsertTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.InsertTemplateVersion(ctx, a.org.ID, ports.TemplateVersion{TemplateID: tpl.ID, Subject: fmt.Sprint("s", i+1), Text: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	numbers := func(vs []ports.TemplateVersion) []int {
		out := make([]int, 0, len(vs))
		for _, v := range vs {
			out = append(out, v.Version)
		}
		return out
	}
	for _, tc := range []struct {
		shown     int
		want      []int
		truncated bool
	}{{3, []int{3, 4, 5}, true}, {5, []int{1, 2, 3, 4, 5}, false}, {50, []int{1, 2, 3, 4, 5}, false}, {0, []int{}, true}} {
		got, err := s.GetTemplate(ctx, a.org.ID, tpl.ID, tc.shown)
		if err != nil || !slices.Equal(numbers(got.Versions), tc.want) || got.VersionsTruncated != tc.truncated {
			t.Errorf("GetTemplate(%d) = versions %v truncated %v (%v), want %v %v", tc.shown, numbers(got.Versions), got.VersionsTruncated, err, tc.want, tc.truncated)
		}
		if len(got.Versions) > 0 && got.Versions[len(got.Versions)-1].Subject != "s5" {
			t.Errorf("GetTemplate(%d): the newest version is %+v", tc.shown, got.Versions[len(got.Versions)-1])
		}
	}

	var walked []int
	q := ports.PageQuery{Limit: 2}
	for pages := 0; ; pages++ {
		p, err := s.ListTemplateVersions(ctx, a.org.ID, tpl.ID, q)
		if err != nil || pages > 3 {
			t.Fatalf("page %d: %+v (%v)", pages, p, err)
		}
		walked = append(walked, numbers(p.Data)...)
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	if !slices.Equal(walked, []int{5, 4, 3, 2, 1}) {
		t.Fatalf("version pages gave %v, want 5..1", walked)
	}
	requireCode(t, firstErr(s.ListTemplateVersions(ctx, b.org.ID, tpl.ID, ports.PageQuery{})), ports.CodeNotFound)
	requireCode(t, firstErr(s.ListTemplateVersions(ctx, a.org.ID, newV7(), ports.PageQuery{})), ports.CodeNotFound)
	// A cursor of another list, or garbage, is refused; so is a limit over 100.
	domCursor := pagedLists[0]
	domCursor.add(t, s, a.org.ID, baseTime)
	domCursor.add(t, s, a.org.ID, baseTime)
	_, next, _ := domCursor.list(s, a.org.ID, ports.PageQuery{Limit: 1})
	for _, bad := range []ports.PageQuery{{Cursor: next}, {Cursor: "nope"}, {Limit: ports.MaxListLimit + 1}} {
		requireCode(t, firstErr(s.ListTemplateVersions(ctx, a.org.ID, tpl.ID, bad)), ports.CodeInvalidArgument)
	}
}

// TestInsertWithin_ConcurrentCreatesStopAtMax starts many creations at once against a bound of 3: exactly
// three succeed and the organization holds three, for domains, webhook endpoints and API keys alike.
// Another organization's rows do not count, and max 0 means no bound.
func TestInsertWithin_ConcurrentCreatesStopAtMax(t *testing.T) {
	t.Parallel()
	const max, tries = 3, 12
	kinds := []struct {
		name   string
		table  string
		insert func(tb testing.TB, s *postgres.Store, orgID string, max int) (bool, error)
	}{
		{"domains", "domains", func(tb testing.TB, s *postgres.Store, orgID string, max int) (bool, error) {
			d := newDomain(tb, orgID, "c-"+randomHex(tb, 4)+".example.test", baseTime)
			return s.InsertDomainWithin(context.Background(), d, domainCreated(d), max)
		}},
		{"webhook endpoints", "webhook_endpoints", func(tb testing.TB, s *postgres.Store, orgID string, max int) (bool, error) {
			return s.InsertEndpointWithin(context.Background(), newEndpoint(tb, orgID, baseTime, ports.EventEmailSent), max)
		}},
		{"api keys", "api_keys", func(tb testing.TB, s *postgres.Store, orgID string, max int) (bool, error) {
			return s.InsertAPIKeyWithin(context.Background(), newAPIKey(tb, orgID, baseTime), max)
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			s := pgtest.Store(t)
			a, b := mustSignup(t, s), mustSignup(t, s)
			if ok, err := k.insert(t, s, b.org.ID, max); !ok || err != nil {
				t.Fatalf("B's first insert: %v %v", ok, err)
			}
			var wg sync.WaitGroup
			results := make(chan bool, tries)
			start := make(chan struct{})
			for range tries {
				wg.Go(func() {
					<-start
					ok, err := k.insert(t, s, a.org.ID, max)
					if err != nil {
						t.Errorf("insert: %v", err)
					}
					results <- ok
				})
			}
			close(start)
			wg.Wait()
			close(results)
			inserted := 0
			for ok := range results {
				if ok {
					inserted++
				}
			}
			count := countRows(t, s, "SELECT count(*) FROM "+k.table+" WHERE organization_id = $1", a.org.ID)
			if inserted != max || count != max {
				t.Fatalf("%d of %d concurrent inserts succeeded and A holds %d rows, want %d", inserted, tries, count, max)
			}
			// No bound: max below 1.
			if ok, err := k.insert(t, s, a.org.ID, 0); !ok || err != nil {
				t.Fatalf("insert with no bound: %v %v", ok, err)
			}
		})
	}
}

// TestInsertAPIKeyWithin_RevokedKeysDoNotCount: the bound is on keys that work, so revoking one makes room.
func TestInsertAPIKeyWithin_RevokedKeysDoNotCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	first := newAPIKey(t, a.org.ID, baseTime)
	if ok, err := s.InsertAPIKeyWithin(ctx, first, 1); !ok || err != nil {
		t.Fatalf("first key: %v %v", ok, err)
	}
	if ok, err := s.InsertAPIKeyWithin(ctx, newAPIKey(t, a.org.ID, baseTime), 1); ok || err != nil {
		t.Fatalf("second key over the bound: %v %v, want refused without error", ok, err)
	}
	if err := s.RevokeAPIKey(ctx, a.org.ID, first.ID, baseTime); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.InsertAPIKeyWithin(ctx, newAPIKey(t, a.org.ID, baseTime), 1); !ok || err != nil {
		t.Fatalf("a key after revoking the first: %v %v", ok, err)
	}
	// A refused domain writes nothing: no records, no event.
	d := newDomain(t, a.org.ID, "x.example.test", baseTime)
	if ok, err := s.InsertDomainWithin(ctx, d, domainCreated(d), 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	over := newDomain(t, a.org.ID, "y.example.test", baseTime)
	if ok, err := s.InsertDomainWithin(ctx, over, domainCreated(over), 1); ok || err != nil {
		t.Fatalf("second domain over the bound: %v %v", ok, err)
	}
	for _, q := range []string{"SELECT count(*) FROM dns_records WHERE domain_id = $1", "SELECT count(*) FROM events WHERE domain_id = $1"} {
		if n := countRows(t, s, q, over.ID); n != 0 {
			t.Fatalf("%s = %d for a refused domain", q, n)
		}
	}
	// The unique name is still reported as a conflict, not as the bound.
	dup := newDomain(t, a.org.ID, "x.example.test", baseTime)
	_, err := s.InsertDomainWithin(ctx, dup, domainCreated(dup), 0)
	requireConflict(t, err, "domains_org_name_key")
}
