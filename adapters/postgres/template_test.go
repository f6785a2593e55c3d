package postgres_test

import (
	"context"
	"sort"
	"sync"
	"testing"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func mustTemplate(tb testing.TB, s *postgres.Store, orgID string) ports.Template {
	tb.Helper()
	t := ports.Template{ID: newV7(), OrganizationID: orgID, Name: "welcome", CreatedAt: baseTime}
	if err := s.InsertTemplate(context.Background(), t); err != nil {
		tb.Fatalf("InsertTemplate: %v", err)
	}
	return t
}

func TestTemplateVersions_NumberedAndPublished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	tpl := mustTemplate(t, s, a.org.ID)

	if _, err := s.PublishedTemplateVersion(ctx, a.org.ID, tpl.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("published version before any publish: %v, want not_found", err)
	}
	for want := 1; want <= 3; want++ {
		v, err := s.InsertTemplateVersion(ctx, a.org.ID, ports.TemplateVersion{
			ID: newV7(), TemplateID: tpl.ID, Subject: "Hi {{ name }}", HTML: "<p>v</p>", CreatedAt: baseTime,
		})
		if err != nil || v.Version != want {
			t.Fatalf("version %d: got %d (%v)", want, v.Version, err)
		}
	}
	requireCode(t, firstErr(s.PublishTemplateVersion(ctx, a.org.ID, tpl.ID, 4, baseTime)), ports.CodeNotFound)
	got, err := s.PublishTemplateVersion(ctx, a.org.ID, tpl.ID, 2, baseTime)
	if err != nil || got.CurrentVersion == nil || *got.CurrentVersion != 2 {
		t.Fatalf("publish 2: %+v (%v)", got, err)
	}
	pv, err := s.PublishedTemplateVersion(ctx, a.org.ID, tpl.ID)
	if err != nil || pv.Version != 2 || pv.Subject != "Hi {{ name }}" {
		t.Fatalf("published version = %+v (%v)", pv, err)
	}
	full, err := s.GetTemplate(ctx, a.org.ID, tpl.ID, ports.TemplateVersionsShown)
	if err != nil || len(full.Versions) != 3 || full.Versions[0].Version != 1 || full.Versions[2].Version != 3 {
		t.Fatalf("GetTemplate = %+v (%v)", full, err)
	}
	list, err := dataOf(s.ListTemplates(ctx, a.org.ID, ports.Unpaged()))
	if err != nil || len(list) != 1 || list[0].Versions != nil || *list[0].CurrentVersion != 2 {
		t.Fatalf("ListTemplates = %+v (%v)", list, err)
	}
}

// TestTemplateVersions_Concurrent creates versions of one template from many goroutines at once: every
// creation succeeds and the numbers are exactly 1..n.
func TestTemplateVersions_Concurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	tpl := mustTemplate(t, s, a.org.ID)

	const n = 24
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		nums []int
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.InsertTemplateVersion(ctx, a.org.ID, ports.TemplateVersion{ID: newV7(), TemplateID: tpl.ID, Subject: "s", Text: "t"})
			if err != nil {
				t.Errorf("InsertTemplateVersion: %v", err)
				return
			}
			mu.Lock()
			nums = append(nums, v.Version)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Ints(nums)
	for i, v := range nums {
		if v != i+1 {
			t.Fatalf("version numbers = %v, want 1..%d", nums, n)
		}
	}
}

func TestTemplates_CrossOrganization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	tpl := mustTemplate(t, s, a.org.ID)
	if _, err := s.InsertTemplateVersion(ctx, a.org.ID, ports.TemplateVersion{TemplateID: tpl.ID, Subject: "s", Text: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PublishTemplateVersion(ctx, a.org.ID, tpl.ID, 1, baseTime); err != nil {
		t.Fatal(err)
	}

	requireCode(t, firstErr(s.GetTemplate(ctx, b.org.ID, tpl.ID, ports.TemplateVersionsShown)), ports.CodeNotFound)
	requireCode(t, firstErr(s.InsertTemplateVersion(ctx, b.org.ID, ports.TemplateVersion{TemplateID: tpl.ID, Subject: "s", Text: "t"})), ports.CodeNotFound)
	requireCode(t, firstErr(s.PublishTemplateVersion(ctx, b.org.ID, tpl.ID, 1, baseTime)), ports.CodeNotFound)
	requireCode(t, firstErr(s.PublishedTemplateVersion(ctx, b.org.ID, tpl.ID)), ports.CodeNotFound)
	if list, err := dataOf(s.ListTemplates(ctx, b.org.ID, ports.Unpaged())); err != nil || len(list) != 0 {
		t.Fatalf("B lists %d templates (%v)", len(list), err)
	}
	full, err := s.GetTemplate(ctx, a.org.ID, tpl.ID, ports.TemplateVersionsShown)
	if err != nil || len(full.Versions) != 1 {
		t.Fatalf("A's template after B's attempts: %+v (%v)", full, err)
	}
}

// firstErr drops a result and keeps the error.
func firstErr[T any](_ T, err error) error { return err }

func TestPublishedTemplateVersionID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	tpl := mustTemplate(t, s, a.org.ID)
	requireCode(t, firstErr(s.PublishedTemplateVersionID(ctx, a.org.ID, tpl.ID)), ports.CodeNotFound)
	v1, err := s.InsertTemplateVersion(ctx, a.org.ID, ports.TemplateVersion{TemplateID: tpl.ID, Subject: "s", Text: "1"})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := s.InsertTemplateVersion(ctx, a.org.ID, ports.TemplateVersion{TemplateID: tpl.ID, Subject: "s", Text: "2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []ports.TemplateVersion{v2, v1} {
		if _, err := s.PublishTemplateVersion(ctx, a.org.ID, tpl.ID, v.Version, baseTime); err != nil {
			t.Fatal(err)
		}
		if id, err := s.PublishedTemplateVersionID(ctx, a.org.ID, tpl.ID); err != nil || id != v.ID {
			t.Fatalf("after publishing %d: id %q (%v), want %q", v.Version, id, err, v.ID)
		}
	}
	requireCode(t, firstErr(s.PublishedTemplateVersionID(ctx, b.org.ID, tpl.ID)), ports.CodeNotFound)
}
