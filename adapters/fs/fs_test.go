package fs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/postmill/postmill/adapters/fs"
	"github.com/postmill/postmill/ports"
	"github.com/postmill/postmill/ports/porttest"
)

func newStore(tb testing.TB) *fs.Store {
	tb.Helper()
	s, err := fs.New(filepath.Join(tb.TempDir(), "blobs"))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestBlobStoreContract(t *testing.T) {
	t.Parallel()
	porttest.ExerciseBlobStore(t, func(t *testing.T) ports.BlobStore { return newStore(t) })
}

func TestKeysCannotEscapeTheRoot(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	outside := filepath.Join(filepath.Dir(s.Root()), "outside")
	for _, key := range []string{
		"", "/etc/passwd", "../outside", "a/../../outside", "a/./b", "a//b", "a/", ".hidden", "a/.tmp-1",
		`a\..\..\outside`, "a\x00b", "..",
	} {
		if err := s.Put(ctx, key, []byte("x"), "text/plain"); ports.ErrorCode(err) != ports.CodeInvalidArgument {
			t.Errorf("Put(%q) = %v, want invalid_argument", key, err)
		}
		if _, err := s.Get(ctx, key); ports.ErrorCode(err) != ports.CodeInvalidArgument {
			t.Errorf("Get(%q) = %v, want invalid_argument", key, err)
		}
		if err := s.Delete(ctx, key); ports.ErrorCode(err) != ports.CodeInvalidArgument {
			t.Errorf("Delete(%q) = %v, want invalid_argument", key, err)
		}
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatalf("a key wrote outside the root: %v", err)
	}
}

func TestWritesLeaveNoTemporariesAndPrivateFiles(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, "att/o/m/a", []byte("one"), ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "att/o/m/a", []byte("two"), ""); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(s.Root(), "att", "o", "m"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "a" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only the object", names)
	}
	fi, err := os.Stat(filepath.Join(s.Root(), "att", "o", "m", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		t.Fatalf("object mode %v is readable by others", perm)
	}
}

func TestDeleteRemovesEmptiedDirectories(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, "att/o/m/a", []byte("x"), ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "att/o/n/a", []byte("x"), ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "att/o/m/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "att", "o", "m")); !os.IsNotExist(err) {
		t.Fatalf("emptied directory still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "att", "o", "n", "a")); err != nil {
		t.Fatalf("sibling gone: %v", err)
	}
	if _, err := os.Stat(s.Root()); err != nil {
		t.Fatalf("root gone: %v", err)
	}
}

func TestNewRefusesEmptyDirectory(t *testing.T) {
	t.Parallel()
	if _, err := fs.New(""); err == nil {
		t.Fatal("New(\"\") succeeded")
	}
}
