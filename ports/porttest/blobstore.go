package porttest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// blobTimeout bounds every call of the blob suite; the largest object is 12 MiB on loopback.
const blobTimeout = time.Minute

// ExerciseBlobStore runs the ports.BlobStore contract against the stores newStore returns. newStore is
// called once per subtest and must return a store that no other subtest writes to (its own directory or
// bucket, or at least its own key prefix), registering its cleanup on t.
//
// What is asserted is exactly what the port promises: bytes come back as they were put (binary, empty, and
// larger than the 10 MiB attachment limit); Put replaces; Get of a missing key is not_found; Delete is
// idempotent; keys contain slashes (attachment keys are att/<org>/<message>/<attachment>) and keys that
// share a prefix are independent; concurrent Puts of one key leave one whole version, never a mix, and a
// concurrent Get sees either not_found or one whole version. The suite never uses a key that is a proper
// prefix "directory" of another key (att/a and att/a/b), since generated keys never do that.
func ExerciseBlobStore(t *testing.T, newStore func(t *testing.T) ports.BlobStore) {
	t.Helper()

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		binaryContent := make([]byte, 512)
		for i := range binaryContent {
			binaryContent[i] = byte(i) // every byte value, including NUL, CR, LF and 0xFF, twice
		}
		for _, tc := range []struct {
			name string
			data []byte
		}{
			{"text", []byte("hello, world\r\n")},
			{"binary", binaryContent},
			{"empty", []byte{}},
			{"large", pattern(12<<20, 7)}, // above ports.MaxAttachmentBytes
		} {
			key := "roundtrip/" + newID() + "/" + tc.name
			ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
			if err := s.Put(ctx, key, tc.data, "application/octet-stream"); err != nil {
				cancel()
				t.Fatalf("%s: Put(%q): %v", tc.name, key, err)
			}
			got, err := s.Get(ctx, key)
			cancel()
			if err != nil {
				t.Fatalf("%s: Get(%q): %v", tc.name, key, err)
			}
			if !bytes.Equal(got, tc.data) {
				t.Fatalf("%s: Get returned %d bytes that differ from the %d put (first difference at %d)",
					tc.name, len(got), len(tc.data), firstDifference(got, tc.data))
			}
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
		defer cancel()
		key := "overwrite/" + newID()
		mustPut(t, ctx, s, key, []byte("the first, longer version of the object"))
		second := []byte("second")
		mustPut(t, ctx, s, key, second)
		if got := mustGet(t, ctx, s, key); !bytes.Equal(got, second) {
			t.Fatalf("after overwriting, Get = %q, want %q", got, second)
		}
	})

	t.Run("GetMissingIsNotFound", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
		defer cancel()
		for _, key := range []string{"missing/" + newID(), "missing/" + newID() + "/deeper/still"} {
			got, err := s.Get(ctx, key)
			if code := ports.ErrorCode(err); code != ports.CodeNotFound {
				t.Fatalf("Get(%q) of a missing key = (%d bytes, %v), code %q; want code %q",
					key, len(got), err, code, ports.CodeNotFound)
			}
		}
	})

	t.Run("DeleteIsIdempotent", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
		defer cancel()
		key := "delete/" + newID()
		mustPut(t, ctx, s, key, []byte("to be deleted"))
		for i := range 2 {
			if err := s.Delete(ctx, key); err != nil {
				t.Fatalf("Delete #%d of %q: %v", i+1, key, err)
			}
			if _, err := s.Get(ctx, key); ports.ErrorCode(err) != ports.CodeNotFound {
				t.Fatalf("Get after Delete #%d: err %v, want not_found", i+1, err)
			}
		}
		if err := s.Delete(ctx, "delete/"+newID()+"/never/written"); err != nil {
			t.Fatalf("Delete of a key never written: %v", err)
		}
		// A deleted key can be written again.
		mustPut(t, ctx, s, key, []byte("again"))
		if got := mustGet(t, ctx, s, key); string(got) != "again" {
			t.Fatalf("Get after re-Put = %q, want %q", got, "again")
		}
	})

	t.Run("KeysWithSlashes", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
		defer cancel()
		org, msg := newID(), newID()
		keys := []string{
			"att/" + org + "/" + msg + "/" + newID(),
			"att/" + org + "/" + msg + "/" + newID(),
			"att/" + org + "/" + newID() + "/" + newID(),
			"raw/" + org + "/" + msg,
		}
		for i, k := range keys {
			mustPut(t, ctx, s, k, fmt.Appendf(nil, "object %d", i))
		}
		for i, k := range keys {
			if got, want := mustGet(t, ctx, s, k), fmt.Sprintf("object %d", i); string(got) != want {
				t.Fatalf("Get(%q) = %q, want %q", k, got, want)
			}
		}
		// Deleting one key leaves its siblings that share the prefix.
		if err := s.Delete(ctx, keys[0]); err != nil {
			t.Fatalf("Delete(%q): %v", keys[0], err)
		}
		if _, err := s.Get(ctx, keys[0]); ports.ErrorCode(err) != ports.CodeNotFound {
			t.Fatalf("Get of a deleted key: err %v, want not_found", err)
		}
		for i, k := range keys[1:] {
			if got, want := mustGet(t, ctx, s, k), fmt.Sprintf("object %d", i+1); string(got) != want {
				t.Fatalf("after deleting a sibling, Get(%q) = %q, want %q", k, got, want)
			}
		}
		// The prefix itself is not an object.
		if _, err := s.Get(ctx, "att/"+org+"/"+msg); ports.ErrorCode(err) != ports.CodeNotFound {
			t.Fatalf("Get of a key prefix: err %v, want not_found", err)
		}
		// Emptying a "directory" and writing into it again works.
		for _, k := range keys[1:] {
			if err := s.Delete(ctx, k); err != nil {
				t.Fatalf("Delete(%q): %v", k, err)
			}
		}
		mustPut(t, ctx, s, keys[1], []byte("back"))
		if got := mustGet(t, ctx, s, keys[1]); string(got) != "back" {
			t.Fatalf("Get after re-Put into an emptied prefix = %q", got)
		}
	})

	t.Run("ConcurrentPutsAreAtomic", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
		defer cancel()
		const writers, size = 6, 1 << 20
		key := "atomic/" + newID()
		versions := make([][]byte, writers)
		for i := range versions {
			versions[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
		}
		// whole reports whether b is exactly one of the versions.
		whole := func(b []byte) bool {
			return len(b) == size && bytes.Count(b, b[:1]) == size && b[0] >= 'a' && b[0] < 'a'+writers
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4*writers)
		stop := make(chan struct{})
		wg.Add(1)
		go func() { // a reader racing the writers
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := s.Get(ctx, key)
				switch {
				case ports.ErrorCode(err) == ports.CodeNotFound:
				case err != nil:
					errs <- fmt.Errorf("concurrent Get: %w", err)
					return
				case !whole(got):
					errs <- fmt.Errorf("concurrent Get saw a partial or mixed object (%d bytes)", len(got))
					return
				}
			}
		}()
		var writersWG sync.WaitGroup
		for i := range writers {
			writersWG.Add(1)
			go func() {
				defer writersWG.Done()
				for range 3 {
					if err := s.Put(ctx, key, versions[i], "application/octet-stream"); err != nil {
						errs <- fmt.Errorf("concurrent Put: %w", err)
						return
					}
				}
			}()
		}
		writersWG.Wait()
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := mustGet(t, ctx, s, key); !whole(got) {
			t.Fatalf("after concurrent Puts, Get returned a partial or mixed object (%d bytes)", len(got))
		}
	})
}

func mustPut(tb testing.TB, ctx context.Context, s ports.BlobStore, key string, data []byte) {
	tb.Helper()
	if err := s.Put(ctx, key, data, "application/octet-stream"); err != nil {
		tb.Fatalf("Put(%q): %v", key, err)
	}
}

func mustGet(tb testing.TB, ctx context.Context, s ports.BlobStore, key string) []byte {
	tb.Helper()
	got, err := s.Get(ctx, key)
	if err != nil {
		tb.Fatalf("Get(%q): %v", key, err)
	}
	return got
}

// pattern returns n deterministic bytes that are not periodic on any small stride, so a store that drops,
// repeats or reorders a chunk is caught.
func pattern(n int, seed uint64) []byte {
	b := make([]byte, n)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
