package lookupcache

import (
	"strings"
	"testing"
	"time"
)

// fakeNow is a hand-moved clock for the cache; the cache itself is pure apart from the time it reads.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time { return f.t }

func TestCache(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{t: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	c := New[string, int](time.Second, 0, clock.now)

	if _, ok := c.Get("a"); ok {
		t.Fatal("empty cache answered")
	}
	c.Put("a", 1)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("get = %d, %v", v, ok)
	}
	clock.t = clock.t.Add(999 * time.Millisecond)
	if _, ok := c.Get("a"); !ok {
		t.Fatal("entry expired before its ttl")
	}
	c.Put("b", 2)
	clock.t = clock.t.Add(time.Millisecond)
	if _, ok := c.Get("a"); ok {
		t.Fatal("entry outlived its ttl")
	}
	if v, ok := c.Get("b"); !ok || v != 2 {
		t.Fatalf("b = %d, %v", v, ok)
	}
	c.Put("b", 3)
	if v, _ := c.Get("b"); v != 3 {
		t.Fatalf("put did not replace: %d", v)
	}
}

func TestCacheSweepsExpiredEntries(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{t: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	c := New[int, int](time.Second, 0, clock.now)
	for i := range SweepEvery - 1 {
		c.Put(i, i)
	}
	clock.t = clock.t.Add(2 * time.Second)
	c.Put(-1, -1) // the sweep-triggering insertion
	if n := c.Len(); n != 1 {
		t.Fatalf("%d entries after the sweep, want only the fresh one", n)
	}
}

func TestCacheDisabled(t *testing.T) {
	t.Parallel()
	c := New[string, int](-1, 0, time.Now)
	c.Put("a", 1)
	if _, ok := c.Get("a"); ok {
		t.Fatal("a disabled cache answered")
	}
}

// TestTTLCacheForget: forgetting drops the entries that match, and for ttl afterwards refuses values for
// matching keys, which may come from a read that began before the change; other keys are cached as usual.
func TestCacheForget(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{t: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	c := New[string, int](time.Second, 0, clock.now)
	c.Put("a", 1)
	c.Put("b", 2)
	c.Forget("a")
	if _, ok := c.Get("a"); ok {
		t.Fatal("a forgotten entry answered")
	}
	if v, ok := c.Get("b"); !ok || v != 2 {
		t.Fatalf("b = %d, %v after forgetting a", v, ok)
	}
	c.Put("a", 1) // a read that raced the change brings the old value back
	if _, ok := c.Get("a"); ok {
		t.Fatal("a value stored right after its key was forgotten")
	}
	c.Put("c", 3)
	if _, ok := c.Get("c"); !ok {
		t.Fatal("an unrelated key was refused")
	}
	clock.t = clock.t.Add(time.Second)
	c.Put("a", 4)
	if v, ok := c.Get("a"); !ok || v != 4 {
		t.Fatalf("a = %d, %v once the guard ran out", v, ok)
	}
	c.Clear()
	for _, k := range []string{"a", "b", "c"} {
		if _, ok := c.Get(k); ok {
			t.Errorf("%s answered after clear", k)
		}
	}
	c.ForgetIf(func(k string, _ int) bool { return strings.HasPrefix(k, "org1/") })
	c.Put("org1/x", 1)
	clock.t = clock.t.Add(time.Second)
	c.Put("org2/y", 2)
	if _, ok := c.Get("org2/y"); !ok {
		t.Error("guards that ran out still refuse")
	}
	if n := c.guardCount(); n != 0 {
		t.Errorf("%d guards kept after they ran out", n)
	}
}

// TestCacheBounded: a cache with a bound drops entries to make room and never holds more than its bound,
// keeping the newest.
func TestCacheBounded(t *testing.T) {
	t.Parallel()
	c := New[string, int](time.Hour, 3, time.Now)
	for i := range 10 {
		c.Put(string(rune('a'+i)), i)
		if n := c.Len(); n > 3 {
			t.Fatalf("%d entries after %d puts, bound 3", n, i+1)
		}
	}
	if _, ok := c.Get("j"); !ok {
		t.Fatal("the newest entry was not kept")
	}
}

// TestCacheForgetByValue: ForgetIf may match on the value, and its guard then refuses matching values
// under any key.
func TestCacheForgetByValue(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{t: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	c := New[string, string](time.Second, 0, clock.now)
	c.Put("k1", "org1")
	c.Put("k2", "org2")
	c.ForgetIf(func(_ string, org string) bool { return org == "org1" })
	if _, ok := c.Get("k1"); ok {
		t.Fatal("an entry whose value matched was kept")
	}
	if _, ok := c.Get("k2"); !ok {
		t.Fatal("an entry whose value did not match was dropped")
	}
	c.Put("k3", "org1")
	if _, ok := c.Get("k3"); ok {
		t.Fatal("a matching value was stored under a new key during the guard")
	}
}
