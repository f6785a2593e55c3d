package template

import (
	"fmt"
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
