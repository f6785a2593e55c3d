package catcher

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
)

// File names in the catcher's directory: <id>.eml is the message as received, <id>.json its summary. The
// summary is written last, so a message whose summary exists is whole; anything else found at start (a
// message without a summary, a temporary file) is what a crash left behind and is removed.
const (
	rawExt     = ".eml"
	summaryExt = ".json"
	tmpPrefix  = ".tmp-"
)

// idPattern is the form of every id the catcher makes: the receipt time in nanoseconds and 32 random
// bits, in fixed-width hex, so ids sort by time. Anything else asked for is not_found, which also keeps
// names from outside the directory (../) from ever reaching the file system.
var idPattern = regexp.MustCompile(`^[0-9a-f]{24}$`)

// store keeps the newest messages as files in one directory and their summaries in memory, newest last.
type store struct {
	dir      string
	max      int
	maxBytes int64

	mu    sync.Mutex
	index []ports.CaughtMessage // oldest first
	bytes int64                 // sum of index[i].Size
}

// openStore reads the summaries already in dir (messages caught before a restart), drops what a crash
// left half written, and applies the bounds.
func openStore(dir string, max int, maxBytes int64) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("catcher: %w", err)
	}
	s := &store{dir: dir, max: max, maxBytes: maxBytes}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("catcher: %w", err)
	}
	have := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		id, ok := strings.CutSuffix(name, summaryExt)
		if !ok || !idPattern.MatchString(id) {
			continue
		}
		m, err := s.readSummary(id)
		if err != nil {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		have[id] = true
		s.index = append(s.index, m)
		s.bytes += m.Size
	}
	for _, e := range entries {
		name := e.Name()
		id, isRaw := strings.CutSuffix(name, rawExt)
		if strings.HasPrefix(name, tmpPrefix) || (isRaw && idPattern.MatchString(id) && !have[id]) {
			_ = os.Remove(filepath.Join(dir, name))
		}
	}
	slices.SortFunc(s.index, func(a, b ports.CaughtMessage) int { return strings.Compare(a.ID, b.ID) })
	s.mu.Lock()
	s.evictLocked()
	s.mu.Unlock()
	return s, nil
}

// readSummary loads one summary and checks that it names its own file and that the message file is there.
func (s *store) readSummary(id string) (ports.CaughtMessage, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, id+summaryExt))
	if err != nil {
		return ports.CaughtMessage{}, err
	}
	var m ports.CaughtMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return ports.CaughtMessage{}, err
	}
	if m.ID != id {
		return ports.CaughtMessage{}, errors.New("summary names another message")
	}
	fi, err := os.Stat(filepath.Join(s.dir, id+rawExt))
	if err != nil {
		return ports.CaughtMessage{}, err
	}
	m.Size = fi.Size()
	return m, nil
}

// newID returns a fresh id for a message received at t.
func newID(t time.Time) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%016x%08x", uint64(t.UnixNano()), binary.BigEndian.Uint32(r[:]))
}

// add writes a message and its summary, then makes room by evicting the oldest ones.
func (s *store) add(m ports.CaughtMessage, raw []byte) error {
	if err := writeFile(s.dir, m.ID+rawExt, raw); err != nil {
		return err
	}
	sum, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := writeFile(s.dir, m.ID+summaryExt, sum); err != nil {
		_ = os.Remove(filepath.Join(s.dir, m.ID+rawExt))
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.index, m.ID, func(e ports.CaughtMessage, id string) int { return strings.Compare(e.ID, id) })
	s.index = slices.Insert(s.index, i, m)
	s.bytes += m.Size
	s.evictLocked()
	return nil
}

// evictLocked removes the oldest messages until both bounds hold; the newest message always stays.
func (s *store) evictLocked() {
	for len(s.index) > 1 && (len(s.index) > s.max || s.bytes > s.maxBytes) {
		old := s.index[0]
		s.index = s.index[1:]
		s.bytes -= old.Size
		s.removeFiles(old.ID)
	}
}

func (s *store) removeFiles(id string) {
	_ = os.Remove(filepath.Join(s.dir, id+summaryExt))
	_ = os.Remove(filepath.Join(s.dir, id+rawExt))
}

// list returns the summaries, newest first.
func (s *store) list() []ports.CaughtMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ports.CaughtMessage, len(s.index))
	for i, m := range s.index {
		out[len(s.index)-1-i] = m
	}
	return out
}

// get returns the summary and the raw message of id. Errors: not_found.
func (s *store) get(id string) (ports.CaughtMessage, []byte, error) {
	notFound := ports.NotFound("message not found")
	if !idPattern.MatchString(id) {
		return ports.CaughtMessage{}, nil, notFound
	}
	s.mu.Lock()
	i, ok := slices.BinarySearchFunc(s.index, id, func(e ports.CaughtMessage, id string) int { return strings.Compare(e.ID, id) })
	var m ports.CaughtMessage
	if ok {
		m = s.index[i]
	}
	s.mu.Unlock()
	if !ok {
		return ports.CaughtMessage{}, nil, notFound
	}
	raw, err := os.ReadFile(filepath.Join(s.dir, id+rawExt))
	if errors.Is(err, os.ErrNotExist) {
		return ports.CaughtMessage{}, nil, notFound // evicted or cleared meanwhile
	}
	if err != nil {
		return ports.CaughtMessage{}, nil, fmt.Errorf("catcher: %w", err)
	}
	return m, raw, nil
}

// clear deletes every message.
func (s *store) clear() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.index {
		s.removeFiles(m.ID)
	}
	s.index, s.bytes = nil, 0
	return nil
}

// writeFile writes name in dir through a temporary file and a rename, so a crash never leaves half a file
// under the real name.
func writeFile(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("catcher: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("catcher: %w", err)
	}
	return nil
}
