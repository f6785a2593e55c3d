package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// maxSyncGroup bounds the files one sync pass makes durable.
const maxSyncGroup = 128

// pendingPut is a Put whose bytes are written to its temporary file and which waits for a sync pass to make
// them the key's object.
type pendingPut struct {
	key  string
	tmp  *os.File
	path string // the key's file
	err  error
	done chan struct{}
}

// syncer makes concurrent Puts durable together. Each fsync of a new file and each fsync of a directory
// waits for the file system's journal to reach the disk, so a Put synced on its own costs two disk flushes
// (the file, then the directory holding its name); callers arriving while a pass runs queue up and go
// together into the next pass, which syncs every file of the group at once, renames them, and syncs each
// of their directories once. A Put returns only after the pass holding it has synced its directory: when
// Put returns nil, the object survives a crash, as before.
//
// There is no goroutine while nothing is queued: the Put that finds no pass running runs the pass holding
// its own file and hands what queued meanwhile to a new goroutine, which runs pass after pass until the
// queue is empty.
type syncer struct {
	// syncFile and syncDir make a file's bytes and a directory's entries durable (fsync(2)); tests replace
	// them to watch the order of a pass.
	syncFile func(*os.File) error
	syncDir  func(dir string) error

	mu      sync.Mutex
	queue   []*pendingPut
	serving bool
}

func newSyncer() *syncer {
	return &syncer{syncFile: (*os.File).Sync, syncDir: syncDir}
}

// commit queues p and returns once p's pass is done; p.err then tells how it went.
func (s *syncer) commit(p *pendingPut) {
	p.done = make(chan struct{})
	s.mu.Lock()
	s.queue = append(s.queue, p)
	serving := s.serving
	s.serving = true
	s.mu.Unlock()
	if serving {
		<-p.done
		return
	}
	s.pass(s.next())
	if more := s.next(); more != nil {
		go func() {
			for group := more; group != nil; group = s.next() {
				s.pass(group)
			}
		}()
	}
	<-p.done
}

// next takes up to maxSyncGroup queued Puts in arrival order; when none is left the syncer stops serving.
func (s *syncer) next() []*pendingPut {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		s.serving = false
		return nil
	}
	n := min(len(s.queue), maxSyncGroup)
	group := s.queue[:n:n]
	s.queue = append([]*pendingPut(nil), s.queue[n:]...)
	return group
}

// pass makes a group durable: every temporary file synced (at once, so that the file system can flush them
// in one journal commit), then renamed over its key, then each directory that received a name synced once.
// A Put whose file fails to sync or rename fails alone; a directory that fails to sync fails the Puts
// renamed into it.
func (s *syncer) pass(group []*pendingPut) {
	var wg sync.WaitGroup
	for _, p := range group {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.syncFile(p.tmp); err != nil {
				p.err = fmt.Errorf("fs: put %s: sync: %w", p.key, err)
			}
		}()
	}
	wg.Wait()
	dirs := map[string][]*pendingPut{}
	for _, p := range group {
		if p.err == nil {
			p.err = p.install()
		}
		if p.err == nil {
			d := filepath.Dir(p.path)
			dirs[d] = append(dirs[d], p)
		}
	}
	for dir, ps := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The renames are durable only once the directory entries are (fsync(2) on the directory).
			if err := s.syncDir(dir); err != nil {
				for _, p := range ps {
					p.err = fmt.Errorf("fs: put %s: sync directory: %w", p.key, err)
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range group {
		if p.err != nil {
			_ = p.tmp.Close()
			_ = os.Remove(p.tmp.Name())
		}
		close(p.done)
	}
}

// install closes the synced temporary file and renames it over the key.
func (p *pendingPut) install() error {
	if err := p.tmp.Close(); err != nil {
		return fmt.Errorf("fs: put %s: %w", p.key, err)
	}
	if err := os.Rename(p.tmp.Name(), p.path); err != nil {
		return fmt.Errorf("fs: put %s: %w", p.key, err)
	}
	return nil
}
