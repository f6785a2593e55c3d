package fs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestPutsReturnOnlyOnceDurable: Puts arriving while a sync pass runs are made durable together, in one
// pass that syncs every file before renaming it and syncs the directory once after the renames, and no Put
// returns before the pass holding it has synced its file and its directory. Nothing is timed: the first
// pass is held at its file sync until the others have queued.
func TestPutsReturnOnlyOnceDurable(t *testing.T) {
	t.Parallel()
	s, err := New(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log []string
	record := func(format string, args ...any) {
		mu.Lock()
		log = append(log, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	gate := make(chan struct{})
	held := make(chan struct{})
	var holdOnce sync.Once
	s.sync.syncFile = func(f *os.File) error {
		holdOnce.Do(func() { close(held); <-gate }) // the first pass waits here
		record("file %s", f.Name())
		return f.Sync()
	}
	s.sync.syncDir = func(dir string) error {
		record("dir %s", dir)
		return syncDir(dir)
	}
	ctx := context.Background()
	put := func(key string, returned chan<- string) {
		if err := s.Put(ctx, key, []byte(key), "text/plain"); err != nil {
			t.Errorf("Put(%s): %v", key, err)
		}
		record("return %s", key)
		returned <- key
	}
	const n = 10
	returned := make(chan string, n+1)
	go put("inbound/raw/first", returned)
	<-held
	for i := range n {
		go put(fmt.Sprintf("inbound/raw/k%02d", i), returned)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		s.sync.mu.Lock()
		q := len(s.sync.queue)
		s.sync.mu.Unlock()
		if q == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Puts queued", q, n)
		}
	}
	select {
	case k := <-returned:
		t.Fatalf("Put(%s) returned before any sync", k)
	default:
	}
	close(gate)
	for range n + 1 {
		<-returned
	}

	mu.Lock()
	defer mu.Unlock()
	dir := filepath.Join(s.Root(), "inbound", "raw")
	at := func(entry string) int {
		i := slices.Index(log, entry)
		if i < 0 {
			t.Fatalf("%q not in %q", entry, log)
		}
		return i
	}
	var dirSyncs []int
	for i, e := range log {
		if e == "dir "+dir {
			dirSyncs = append(dirSyncs, i)
		}
	}
	if len(dirSyncs) != 2 {
		t.Fatalf("%d directory syncs for two passes, want 2: %q", len(dirSyncs), log)
	}
	for i := range n {
		key := fmt.Sprintf("inbound/raw/k%02d", i)
		ret := at("return " + key)
		// The queued Puts are the second pass: each returns after the second directory sync.
		if ret < dirSyncs[1] {
			t.Errorf("Put(%s) returned before its directory was synced: %q", key, log)
		}
		if b, err := os.ReadFile(filepath.Join(s.Root(), filepath.FromSlash(key))); err != nil || string(b) != key {
			t.Errorf("%s: %q, %v", key, b, err)
		}
	}
	if at("return inbound/raw/first") < dirSyncs[0] {
		t.Errorf("the first Put returned before its directory was synced: %q", log)
	}
	// Every file of the second pass is synced before its directory is.
	files := 0
	for i := dirSyncs[0] + 1; i < dirSyncs[1]; i++ {
		if len(log[i]) > 5 && log[i][:5] == "file " {
			files++
		}
	}
	if files != n {
		t.Errorf("%d files synced in the second pass, want %d: %q", files, n, log)
	}
	left, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	if len(left) != 0 {
		t.Errorf("temporaries left: %v", left)
	}
}

// TestFailedSyncFailsOnlyItsPut: a file that cannot be synced fails its own Put and leaves no object or
// temporary, while the Puts of the same pass succeed; a directory that cannot be synced fails every Put
// renamed into it.
func TestFailedSyncFailsOnlyItsPut(t *testing.T) {
	t.Parallel()
	s, err := New(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	real := s.sync.syncFile
	s.sync.syncFile = func(f *os.File) error {
		if b, _ := os.ReadFile(f.Name()); string(b) == "bad" {
			return fmt.Errorf("injected")
		}
		return real(f)
	}
	if err := s.Put(ctx, "a/bad", []byte("bad"), ""); err == nil {
		t.Fatal("Put with a failing sync succeeded")
	}
	if _, err := s.Get(ctx, "a/bad"); err == nil {
		t.Fatal("an object whose sync failed is readable")
	}
	if err := s.Put(ctx, "a/good", []byte("good"), ""); err != nil {
		t.Fatal(err)
	}
	s.sync.syncDir = func(string) error { return fmt.Errorf("injected") }
	if err := s.Put(ctx, "b/x", []byte("x"), ""); err == nil {
		t.Fatal("Put with a failing directory sync succeeded")
	}
	left, _ := filepath.Glob(filepath.Join(s.Root(), "*", tempPrefix+"*"))
	if len(left) != 0 {
		t.Errorf("temporaries left: %v", left)
	}
}
