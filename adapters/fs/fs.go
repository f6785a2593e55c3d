// Package fs is the default ports.BlobStore: attachment bytes and raw mail as files under one directory
// (POSTMILL_DATA_DIR/blobs), for single-machine deployments that need no object store.
//
// A key maps to a path below the root, one directory per "/"-separated segment. Writes are atomic: the
// bytes go to a temporary file in the target directory and only a complete file ever gets the key's name
// (by link(2) for a new key, by rename(2) over an existing one), so a reader sees the old object or the new
// one, never a torn write. Put returns once the file and the directory holding its name are synced, so a
// crash right after Put returns loses nothing. Concurrent Puts are synced together (sync.go).
package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/postmill/postmill/ports"
)

const (
	dirPerm     = 0o700
	tempPrefix  = ".tmp-" // keys never have a segment starting with ".", so temporaries never collide
	putAttempts = 5       // a concurrent Delete may remove an emptied directory between MkdirAll and CreateTemp
)

// Store keeps blobs as files below a root directory. It is safe for concurrent use, including by several
// processes sharing the directory.
type Store struct {
	root string
	sync *syncer
}

var _ ports.BlobStore = (*Store)(nil)

// New returns a Store rooted at dir, creating it (mode 0700: attachments are private) if it is missing.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("fs: blob directory is empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fs: blob directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("fs: create blob directory: %w", err)
	}
	s := &Store{root: abs, sync: newSyncer()}
	// A crash between CreateTemp and link(2) leaves a temporary file that no key names. The sweep runs in
	// the background: a large store takes a while to walk, and nothing waits for it.
	go func() { _, _ = s.SweepTemps(TempMaxAge) }()
	return s, nil
}

// TempMaxAge is how old a temporary file must be before SweepTemps removes it: far longer than any Put
// takes between creating its temporary file and naming it, so an in-flight Put (of this process or of
// another one sharing the directory) is never touched.
const TempMaxAge = time.Hour

// SweepTemps removes the temporary files (".tmp-*") below the root last written more than olderThan ago,
// which only a crashed Put leaves behind, and returns how many it removed. New runs it with TempMaxAge.
// Files that vanish while it walks (a Put finishing, another sweep) are not errors.
func (s *Store) SweepTemps(olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	err := filepath.WalkDir(s.root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			if missing(err) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if missing(err) {
				return nil
			}
			return err
		}
		if !fi.Mode().IsRegular() || !fi.ModTime().Before(cutoff) {
			return nil
		}
		if err := os.Remove(p); err != nil && !missing(err) {
			return err
		}
		removed++
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("fs: sweeping temporary files: %w", err)
	}
	return removed, nil
}

// Root returns the directory the blobs live in.
func (s *Store) Root() string { return s.root }

// Put writes data under key atomically (a temporary file given the key's name once complete) and returns
// once the object and its name are synced to disk. Concurrent Puts share the syncs (sync.go). The content type is not kept: Postmill stores it with the attachment's metadata. Errors: invalid_argument (a key that
// is empty, absolute, or has an empty, "." or ".." segment or a segment starting with ".").
func (s *Store) Put(ctx context.Context, key string, data []byte, _ string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Dir(p)
	var tmp *os.File
	for attempt := 1; ; attempt++ {
		if err := os.MkdirAll(dir, dirPerm); err != nil && attempt == putAttempts {
			return fmt.Errorf("fs: put %s: %w", key, err)
		}
		tmp, err = os.CreateTemp(dir, tempPrefix+"*")
		if err == nil {
			break
		}
		if !errors.Is(err, iofs.ErrNotExist) || attempt == putAttempts {
			return fmt.Errorf("fs: put %s: %w", key, err)
		}
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("fs: put %s: %w", key, err)
	}
	pp := &pendingPut{key: key, tmp: tmp, path: p}
	s.sync.commit(pp)
	return pp.err
}

// Get returns the bytes stored under key. Errors: not_found, invalid_argument (an invalid key).
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		if missing(err) {
			return nil, ports.NotFound("blob %s not found", key)
		}
		return nil, fmt.Errorf("fs: get %s: %w", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fs: get %s: %w", key, err)
	}
	// A key that is a prefix of other keys is a directory here, not an object.
	if !fi.Mode().IsRegular() {
		return nil, ports.NotFound("blob %s not found", key)
	}
	// The open file is the inode a rename installed complete, so its size is final.
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("fs: get %s: %w", key, err)
	}
	return data, nil
}

// Delete removes key; a missing key is not an error. Directories left empty are removed up to the root, so
// that deleted messages leave no trail of empty directories. Errors: invalid_argument (an invalid key).
func (s *Store) Delete(ctx context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return nil // a prefix of other keys, not an object
	}
	if err := os.Remove(p); err != nil && !missing(err) {
		return fmt.Errorf("fs: delete %s: %w", key, err)
	}
	// Best effort: a directory that another Put is filling is not empty, and rmdir(2) refuses it.
	for dir := filepath.Dir(p); dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// path validates key and maps it below the root. Keys are generated by Postmill, so anything unusual is
// refused rather than cleaned: a cleaned key could alias another one.
func (s *Store) path(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// ValidateKey reports whether key can name a file below the root without escaping it or aliasing another
// key: not empty, not absolute, no backslash or NUL, and "/"-separated segments that are non-empty and do
// not start with "." (which excludes "." and ".." and the store's temporary files).
func ValidateKey(key string) error {
	bad := func(why string) error {
		return ports.ValidationError(ports.FieldViolation{Path: "key", Message: "invalid blob key: " + why})
	}
	switch {
	case key == "":
		return bad("empty")
	case strings.HasPrefix(key, "/") || filepath.IsAbs(key):
		return bad("absolute path")
	case strings.ContainsAny(key, "\\\x00"):
		return bad("backslash or NUL")
	}
	for _, seg := range strings.Split(key, "/") {
		switch {
		case seg == "":
			return bad("empty segment")
		case seg == "..":
			return bad("parent segment")
		case strings.HasPrefix(seg, "."):
			return bad("segment starting with a dot")
		}
	}
	return nil
}

// missing treats "a path component is a file" like "no such file": for a key below another key's file
// there is no object either.
func missing(err error) bool {
	return errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
