package fs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/fs"
)

// mustFile writes a file and sets its modification time.
func mustFile(tb testing.TB, path string, mtime time.Time) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		tb.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestSweepTemps: temporary files a crashed Put left behind are removed once older than TempMaxAge, at open
// and when asked; a recent one (a Put in flight, maybe in another process) and every object are kept.
func TestSweepTemps(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "blobs")
	old := time.Now().Add(-fs.TempMaxAge - time.Minute)
	leftovers := []string{filepath.Join(root, ".tmp-1"), filepath.Join(root, "inbound", "raw", ".tmp-2")}
	kept := []string{filepath.Join(root, "inbound", "raw", ".tmp-3"), filepath.Join(root, "inbound", "raw", "abc"),
		filepath.Join(root, "inbound", "part", "old")}
	for _, p := range leftovers {
		mustFile(t, p, old)
	}
	mustFile(t, kept[0], time.Now().Add(-fs.TempMaxAge+time.Minute))
	mustFile(t, kept[1], old)
	mustFile(t, kept[2], old)

	s, err := fs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	// New sweeps in the background.
	for deadline := time.Now().Add(10 * time.Second); exists(leftovers[0]) || exists(leftovers[1]); {
		if time.Now().After(deadline) {
			t.Fatalf("leftovers still there after open: %v %v", exists(leftovers[0]), exists(leftovers[1]))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range kept {
		if !exists(p) {
			t.Errorf("%s removed", p)
		}
	}

	another := filepath.Join(root, "inbound", "part", ".tmp-4")
	mustFile(t, another, old)
	if n, err := s.SweepTemps(fs.TempMaxAge); err != nil || n != 1 || exists(another) {
		t.Fatalf("SweepTemps = %d, %v (still there: %v), want 1", n, err, exists(another))
	}
	if n, err := s.SweepTemps(fs.TempMaxAge); err != nil || n != 0 {
		t.Fatalf("second SweepTemps = %d, %v, want 0", n, err)
	}
	// The store works as before, and a sweep with no age limit takes no object.
	if err := s.Put(context.Background(), "inbound/raw/def", []byte("raw"), "message/rfc822"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SweepTemps(0); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Get(context.Background(), "inbound/raw/def"); err != nil || string(b) != "raw" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	for _, p := range kept[1:] {
		if !exists(p) {
			t.Errorf("%s removed", p)
		}
	}
}
