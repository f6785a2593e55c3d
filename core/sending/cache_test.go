package sending

import (
	"strings"
	"testing"
	"time"
)

// fakeNow is a hand-moved clock for the cache; the cache itself is pure apart from the time it reads.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time { return f.t }

func TestTTLCache(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{t: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	c := newTTLCache[string, int](time.Second, clock.now)

	if _, ok := c.get("a"); ok {
		t.Fatal("empty cache answered")
	}
	c.put("a", 1)
	if v, ok := c.get("a"); !ok || v != 1 {
		t.Fatalf("get = %d, %v", v, ok)
	}
	clock.t = clock.t.Add(999 * time.Millisecond)
	if _, ok := c.get("a"); !ok {
		t.Fatal("entry expired before its ttl")
	}
	c.put("b", 2)
	clock.t = clock.t.Add(time.Millisecond)
	if _, ok := c.get("a"); ok {
		t.Fatal("entry outlived its ttl")
	}
	if v, ok := c.get("b"); !ok || v != 2 {
		t.Fatalf("b = %d, %v", v, ok)
	}
	c.put("b", 3)
	if v, _ := c.get("b"); v != 3 {
		t.Fatalf("put did not replace: %d", v)
	}
}

func TestTTLCacheSweepsExpiredEntries(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{t: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	c := newTTLCache[int, int](time.Second, clock.now)
	for i := range cacheSweepEvery - 1 {
		c.put(i, i)
	}
	clock.t = clock.t.Add(2 * time.Second)
	c.put(-1, -1) // the sweep-triggering insertion
	c.mu.Lock()
	n := len(c.entries)
	c.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d entries after the sweep, want only the fresh one", n)
	}
}

func TestTTLCacheDisabled(t *testing.T) {
	t.Parallel()
	c := newTTLCache[string, int](-1, time.Now)
	c.put("a", 1)
	if _, ok := c.get("a"); ok {
		t.Fatal("a disabled cache answered")
	}
}

// TestTTLCacheForget: forgetting drops the entries that match, and for ttl afterwards refuses values for
// matching keys, which may come from a read that began before the change; other keys are cached as usual.
func TestTTLCacheForget(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{t: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	c := newTTLCache[string, int](time.Second, clock.now)
	c.put("a", 1)
	c.put("b", 2)
	c.forget("a")
	if _, ok := c.get("a"); ok {
		t.Fatal("a forgotten entry answered")
	}
	if v, ok := c.get("b"); !ok || v != 2 {
		t.Fatalf("b = %d, %v after forgetting a", v, ok)
	}
	c.put("a", 1) // a read that raced the change brings the old value back
	if _, ok := c.get("a"); ok {
		t.Fatal("a value stored right after its key was forgotten")
	}
	c.put("c", 3)
	if _, ok := c.get("c"); !ok {
		t.Fatal("an unrelated key was refused")
	}
	clock.t = clock.t.Add(time.Second)
	c.put("a", 4)
	if v, ok := c.get("a"); !ok || v != 4 {
		t.Fatalf("a = %d, %v once the guard ran out", v, ok)
	}
	c.clear()
	for _, k := range []string{"a", "b", "c"} {
		if _, ok := c.get(k); ok {
			t.Errorf("%s answered after clear", k)
		}
	}
	c.forgetIf(func(k string) bool { return strings.HasPrefix(k, "org1/") })
	c.put("org1/x", 1)
	clock.t = clock.t.Add(time.Second)
	c.put("org2/y", 2)
	if _, ok := c.get("org2/y"); !ok {
		t.Error("guards that ran out still refuse")
	}
	c.mu.Lock()
	n := len(c.guards)
	c.mu.Unlock()
	if n != 0 {
		t.Errorf("%d guards kept after they ran out", n)
	}
}
