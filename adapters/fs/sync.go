package fs

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

const (
	// maxSyncGroup bounds the files one sync pass makes durable.
	maxSyncGroup = 128
	// maxPasses bounds the passes running at once. Two let a group form and start syncing while the pass
	// before it waits for the disk, which the file system folds into the same journal commit when it can.
	maxPasses = 2
)

// pendingPut is a Put whose bytes are written to its temporary file and which waits for a sync pass to make
// them the key's object.
type pendingPut struct {
	key  string
	tmp  *os.File
	path string // the key's file
	err  error
	done chan struct{}
	// linked: the key got its name by link(2) (it did not exist); synced: the file's bytes are on disk.
	linked, synced bool
}

// syncer makes concurrent Puts durable together. Each fsync of a new file and each fsync of a directory
// waits for the file system's journal to reach the disk, so a Put synced on its own costs two disk flushes
// one after the other (the file, then the directory holding its new name); callers arriving while a pass
// runs queue up and go together into the next pass, which syncs every file of the group and each of their
// directories once, in one round when the keys are new (pass). A Put returns only after the pass holding it
// has synced its file and its directory: when Put returns nil, the object survives a crash, as before.
//
// There is no goroutine while nothing is queued: a Put that finds fewer than maxPasses passes running runs
// passes until its own file is done and hands what queued meanwhile to a new goroutine, which runs pass
// after pass until the queue is empty.
type syncer struct {
	// syncFile and syncDir make a file's bytes and a directory's entries durable (fsync(2)), link gives a
	// new key its name (link(2)); tests replace them to watch the order of a pass.
	syncFile func(*os.File) error
	syncDir  func(dir string) error
	link     func(oldname, newname string) error

	mu    sync.Mutex
	queue []*pendingPut
	// passes counts the passes running; at most maxPasses run at once.
	passes int
}

func newSyncer() *syncer {
	return &syncer{syncFile: (*os.File).Sync, syncDir: syncDir, link: os.Link}
}

// commit queues p and returns once p's pass is done; p.err then tells how it went.
func (s *syncer) commit(p *pendingPut) {
	p.done = make(chan struct{})
	s.mu.Lock()
	s.queue = append(s.queue, p)
	lead := s.passes < maxPasses
	if lead {
		s.passes++
	}
	s.mu.Unlock()
	if !lead {
		<-p.done
		return
	}
	// The Put runs passes until its own is done (another pass may have taken it), then hands what queued
	// meanwhile to a goroutine. Each runner holds one of the maxPasses places until next finds nothing.
	for group := s.next(); group != nil; group = s.next() {
		s.pass(group)
		select {
		case <-p.done:
			if more := s.next(); more != nil {
				go func() {
					for group := more; group != nil; group = s.next() {
						s.pass(group)
					}
				}()
			}
			return
		default:
		}
	}
	<-p.done
}

// next takes up to maxSyncGroup queued Puts in arrival order; when none is left the caller's place among
// the running passes is given up.
func (s *syncer) next() []*pendingPut {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		s.passes--
		return nil
	}
	n := min(len(s.queue), maxSyncGroup)
	group := s.queue[:n:n]
	s.queue = append([]*pendingPut(nil), s.queue[n:]...)
	return group
}

// pass makes a group durable with one round of syncs where it can. A key that does not exist yet gets its
// name by link(2), which never replaces an object, and the new file and its directory are then synced at
// once (each needs the other only by the time Put returns; a crash before both are synced can leave a torn
// object only under a key no Put has yet returned for). A key that exists already is replaced as before:
// the file synced, renamed over the key, then the directory synced, so that a crash never tears an object
// a caller may rely on. Every sync of a round runs at once, so the file system can flush them in one journal
// commit. A Put whose file fails to sync or to get its name fails alone; a directory that fails to sync
// fails the Puts named in it.
func (s *syncer) pass(group []*pendingPut) {
	var replace []*pendingPut
	for _, p := range group {
		switch err := s.link(p.tmp.Name(), p.path); {
		case err == nil:
			p.linked = true
		case errors.Is(err, iofs.ErrExist) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) ||
			errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EMLINK):
			replace = append(replace, p) // an existing object, or a file system without hard links
		default:
			p.err = fmt.Errorf("fs: put %s: %w", p.key, err)
		}
	}
	s.syncRound(group, func(p *pendingPut) bool { return p.linked })
	for _, p := range replace {
		if p.err == nil {
			p.err = p.install()
		}
	}
	if len(replace) > 0 {
		s.syncRound(replace, func(*pendingPut) bool { return true })
	}
	for _, p := range group {
		if p.linked && p.err != nil {
			p.unlink()
		}
		_ = p.tmp.Close()
		if p.linked || p.err != nil {
			// A linked Put's temporary name is only a second name of its object; a crash before this removal
			// reaches the disk can leave it behind, and no key can name it (keys never start with ".").
			_ = os.Remove(p.tmp.Name())
		}
		close(p.done)
	}
}

// syncRound syncs, all at once, the file of every Put of group that has no error yet and the directory of
// every one of them that dirOf selects (one sync per directory).
func (s *syncer) syncRound(group []*pendingPut, withDir func(*pendingPut) bool) {
	var wg sync.WaitGroup
	dirs := map[string][]*pendingPut{}
	for _, p := range group {
		if p.err != nil {
			continue
		}
		if withDir(p) {
			d := filepath.Dir(p.path)
			dirs[d] = append(dirs[d], p)
		}
		if p.synced {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.syncFile(p.tmp); err != nil {
				p.err = fmt.Errorf("fs: put %s: sync: %w", p.key, err)
			}
			p.synced = true
		}()
	}
	dirErrs := make(map[string]error, len(dirs))
	var mu sync.Mutex
	for dir := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A name is durable only once its directory is (fsync(2) on the directory).
			err := s.syncDir(dir)
			mu.Lock()
			dirErrs[dir] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	for dir, ps := range dirs {
		if err := dirErrs[dir]; err != nil {
			for _, p := range ps {
				if p.err == nil {
					p.err = fmt.Errorf("fs: put %s: sync directory: %w", p.key, err)
				}
			}
		}
	}
}

// unlink removes the key's name of a linked Put that failed, unless another Put has replaced it meanwhile,
// so that a Put that fails leaves no object behind.
func (p *pendingPut) unlink() {
	mine, err := p.tmp.Stat()
	if err != nil {
		return
	}
	if fi, err := os.Lstat(p.path); err == nil && os.SameFile(fi, mine) {
		_ = os.Remove(p.path)
	}
}

// install renames the synced temporary file over the key.
func (p *pendingPut) install() error {
	if err := os.Rename(p.tmp.Name(), p.path); err != nil {
		return fmt.Errorf("fs: put %s: %w", p.key, err)
	}
	return nil
}
