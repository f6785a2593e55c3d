package template

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/postmill/postmill/ports"
)

func version(id, subject string) ports.TemplateVersion {
	return ports.TemplateVersion{ID: id, Subject: subject, HTML: "<p>{{ x }}</p>", Text: "{{ x }}"}
}

func TestCacheKeepsMostRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := NewCache(2)
	a1, err := c.Get(version("a", "A"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(version("b", "B")); err != nil {
		t.Fatal(err)
	}
	// Using a makes b the least recently used, so c evicts b.
	if again, _ := c.Get(version("a", "ignored: versions are immutable")); again != a1 {
		t.Error("a second Get of a cached version compiled it again")
	}
	if _, err := c.Get(version("c", "C")); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 2 {
		t.Errorf("Len() = %d, want 2", c.Len())
	}
	if got, _ := c.Get(version("a", "other")); got != a1 {
		t.Error("a was evicted; b was the least recently used")
	}
	if got, _ := c.Get(version("b", "B2")); got.Subject.Render(nil) != "B2" {
		t.Error("b was kept; it should have been evicted and compiled again")
	}
}

func TestCacheErrorsAndUnnamedVersions(t *testing.T) {
	t.Parallel()
	c := NewCache(0)
	if c.size != DefaultCacheSize {
		t.Errorf("size %d, want the default %d", c.size, DefaultCacheSize)
	}
	_, err := c.Get(ports.TemplateVersion{ID: "bad", Subject: "a\nb", HTML: "<svg><style><</style>"})
	e, ok := ports.AsError(err)
	if !ok || len(e.Details) != 2 || e.Details[0].Path != "subject" || e.Details[1].Path != "html" {
		t.Errorf("got %v, want violations on subject and html", err)
	}
	if _, err := c.Get(version("", "no id")); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 0 {
		t.Errorf("Len() = %d: a failed or unnamed version was cached", c.Len())
	}
}

func TestCacheConcurrentGets(t *testing.T) {
	t.Parallel()
	c := NewCache(8)
	var wg sync.WaitGroup
	results := make([][]*CompiledVersion, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 32 {
				id := fmt.Sprint(i % 16)
				cv, err := c.Get(version(id, "S"+id))
				if err != nil {
					t.Error(err)
					return
				}
				if got := cv.Subject.Render(nil); got != "S"+id {
					t.Errorf("version %s rendered subject %q", id, got)
				}
				results[g] = append(results[g], cv)
			}
		})
	}
	wg.Wait()
	if n := c.Len(); n > 8 {
		t.Errorf("cache grew to %d entries, bound 8", n)
	}
}

// The cache is bounded by the weight of what it keeps as well as by a count: placeholder-dense versions
// evict older ones once their weight passes the budget, and one heavier than the whole budget is compiled
// and not kept.
func TestCacheBoundedByWeight(t *testing.T) {
	t.Parallel()
	c := NewCache(1000)
	heavy := func(id string, n int) ports.TemplateVersion {
		return ports.TemplateVersion{ID: id, Subject: "s", HTML: "<p>" + strings.Repeat("{{ a }}", n) + "</p>"}
	}
	one, err := CompileVersion(heavy("", 10_000))
	if err != nil {
		t.Fatal(err)
	}
	c.maxBytes = 3*one.weight() + one.weight()/2 // room for three
	for i := range 5 {
		if _, err := c.Get(heavy(fmt.Sprint(i), 10_000)); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != 3 || c.bytes > c.maxBytes {
		t.Errorf("%d versions of weight %d kept (budget %d), want 3", c.Len(), c.bytes, c.maxBytes)
	}
	if _, ok := c.Lookup("0"); ok {
		t.Error("the least recently used version was kept")
	}
	if _, err := c.Get(heavy("big", 50_000)); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Lookup("big"); ok || c.Len() != 3 {
		t.Errorf("a version heavier than the budget was kept (%d kept)", c.Len())
	}
}
