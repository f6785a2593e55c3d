package fs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncLog records the syncs of a Store in order: "file <content>" (each test's content names its key) and
// "dir <path>".
type syncLog struct {
	mu  sync.Mutex
	log []string
}

func (l *syncLog) add(format string, args ...any) {
	l.mu.Lock()
	l.log = append(l.log, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// at returns the position of entry, failing the test when it is missing.
func (l *syncLog) at(t *testing.T, entry string) int {
	t.Helper()
	i := slices.Index(l.log, entry)
	if i < 0 {
		t.Fatalf("%q not in %q", entry, l.log)
	}
	return i
}

// TestPutsReturnOnlyOnceDurable: Puts arriving while the sync passes run queue up and are made durable
// together in one later pass, and no Put returns before its file is synced and its directory has been
// synced after the key got its name. Nothing is timed: every file sync waits at a gate until the queued
// Puts are seen queued.
func TestPutsReturnOnlyOnceDurable(t *testing.T) {
	t.Parallel()
	s, err := New(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	l := &syncLog{}
	gate := make(chan struct{})
	s.sync.syncFile = func(f *os.File) error {
		<-gate
		b, _ := os.ReadFile(f.Name())
		l.add("file %s", b)
		return f.Sync()
	}
	s.sync.syncDir = func(dir string) error {
		l.add("dir %s", dir)
		return syncDir(dir)
	}
	s.sync.link = func(oldname, newname string) error {
		b, _ := os.ReadFile(oldname)
		l.add("link %s", b)
		return os.Link(oldname, newname)
	}
	ctx := context.Background()
	returned := make(chan string, 32)
	put := func(key string) {
		if err := s.Put(ctx, key, []byte(key), "text/plain"); err != nil {
			t.Errorf("Put(%s): %v", key, err)
		}
		l.add("return %s", key)
		returned <- key
	}
	waitQueued := func(passes, queued int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			s.sync.mu.Lock()
			p, q := s.sync.passes, len(s.sync.queue)
			s.sync.mu.Unlock()
			if p == passes && q == queued {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d passes and %d Puts queued, want %d and %d", p, q, passes, queued)
			}
		}
	}
	var keys []string
	for i := range maxPasses {
		keys = append(keys, fmt.Sprintf("inbound/raw/pass%d", i))
		go put(keys[i])
		waitQueued(i+1, 0)
	}
	const n = 10
	for i := range n {
		keys = append(keys, fmt.Sprintf("inbound/raw/k%02d", i))
		go put(keys[len(keys)-1])
	}
	waitQueued(maxPasses, n)
	select {
	case k := <-returned:
		t.Fatalf("Put(%s) returned before its file was synced", k)
	default:
	}
	close(gate)
	for range keys {
		<-returned
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	dir := filepath.Join(s.Root(), "inbound", "raw")
	for _, key := range keys {
		linked, ret := l.at(t, "link "+key), l.at(t, "return "+key)
		if ret < l.at(t, "file "+key) {
			t.Errorf("Put(%s) returned before its file was synced: %q", key, l.log)
		}
		if !slices.Contains(l.log[linked:ret], "dir "+dir) {
			t.Errorf("Put(%s) returned before its directory was synced after its name was made: %q", key, l.log)
		}
		if b, err := os.ReadFile(filepath.Join(s.Root(), filepath.FromSlash(key))); err != nil || string(b) != key {
			t.Errorf("%s: %q, %v", key, b, err)
		}
	}
	dirs := 0
	for _, e := range l.log {
		if strings.HasPrefix(e, "dir ") {
			dirs++
		}
	}
	if dirs != maxPasses+1 {
		t.Errorf("%d directory syncs, want one per pass (%d): %q", dirs, maxPasses+1, l.log)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*")); len(left) != 0 {
		t.Errorf("temporaries left: %v", left)
	}
}

// TestReplacingPutSyncsBeforeRenaming: a Put over an existing key syncs its file while the key still names
// the old object, gives it the key's name only then, and syncs the directory after that, so that a crash
// never leaves a torn object under a key that named a whole one.
func TestReplacingPutSyncsBeforeRenaming(t *testing.T) {
	t.Parallel()
	s, err := New(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "a/k", []byte("old"), ""); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Root(), "a", "k")
	l := &syncLog{}
	s.sync.syncFile = func(f *os.File) error {
		b, _ := os.ReadFile(path)
		l.add("file synced while the key holds %s", b)
		return f.Sync()
	}
	s.sync.syncDir = func(dir string) error {
		b, _ := os.ReadFile(path)
		l.add("dir synced while the key holds %s", b)
		return syncDir(dir)
	}
	if err := s.Put(ctx, "a/k", []byte("new"), ""); err != nil {
		t.Fatal(err)
	}
	want := []string{"file synced while the key holds old", "dir synced while the key holds new"}
	if !slices.Equal(l.log, want) {
		t.Fatalf("syncs %q, want %q", l.log, want)
	}
	if b, err := s.Get(ctx, "a/k"); err != nil || string(b) != "new" {
		t.Fatalf("Get = %q, %v", b, err)
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

// TestManyConcurrentPutsLeaveNoPassRunning: after a burst of concurrent Puts every object is whole and the
// syncer is idle again, its count of running passes back at zero.
func TestManyConcurrentPutsLeaveNoPassRunning(t *testing.T) {
	t.Parallel()
	s, err := New(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("d%d/k%03d", i%3, i%150) // some keys twice: a new name and a replacement
			if err := s.Put(ctx, key, []byte(key), ""); err != nil {
				t.Errorf("Put(%s): %v", key, err)
			}
		}()
	}
	wg.Wait()
	s.sync.mu.Lock()
	passes, queued := s.sync.passes, len(s.sync.queue)
	s.sync.mu.Unlock()
	if passes != 0 || queued != 0 {
		t.Fatalf("%d passes running and %d Puts queued after every Put returned", passes, queued)
	}
	for i := range 150 {
		key := fmt.Sprintf("d%d/k%03d", i%3, i)
		if b, err := s.Get(ctx, key); err != nil || string(b) != key {
			t.Fatalf("Get(%s) = %q, %v", key, b, err)
		}
	}
}
