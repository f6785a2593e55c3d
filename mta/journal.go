package mta

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
)

// The handed-over journal remembers the jobs whose message a receiving server accepted (250 after DATA),
// with every recipient's outcome, from before the outcome is reported until the report is recorded. A job
// whose report failed comes back from the queue; the journal then has the MTA report the same outcomes
// again instead of sending the message again. Without it, any recurring failure after a 250 — a core
// outage, a report the store refuses — would resend one message for as long as the failure lasts.
//
// On disk it is an append-only file of JSON lines in Config.JournalDir: a record line per handed-over job,
// written before the report is attempted (concurrent jobs share one write), and a done line once the
// report is recorded. A written line outlives the process — kill -9 included — in the kernel's page
// cache; it is fsynced when the report fails, before the job goes back to the queue (sync), so a
// recurring failure is covered across a machine crash too. A report that succeeds is durable in the
// core's store (its commit is fsynced), so its line needs no fsync of its own. Opening reads it back,
// drops what is done or older than journalMaxAge, and rewrites it; it is rewritten the same way whenever
// it grows past journalCompactBytes. Each process locks its own file (journal-N.log), so MTA processes
// sharing a data directory never share a journal, and a process restarted after a crash picks up a free
// one — its predecessor's, or another.
//
// The window it cannot close is a crash between the server's 250 and the write, or a machine crash
// between the server's 250 and the report's commit: that message may be sent again, as any at-least-once
// system would.

// Bounds of the journal.
const (
	// journalMaxAge is how long an entry is kept when its job never comes back (a job dead-lettered and
	// never put back, or acked by another process). Longer than the core's default maximum age (72 h) of
	// a message's delivery.
	journalMaxAge = 7 * 24 * time.Hour
	// journalMaxEntries bounds the jobs remembered at once; past it the oldest is forgotten (logged).
	journalMaxEntries = 100000
	// journalCompactBytes is the file size past which the file is rewritten with the live entries only.
	journalCompactBytes = 4 << 20
	// journalMaxLine bounds one line read back; a longer one is not a line this code wrote.
	journalMaxLine = 1 << 20
	// journalFiles is how many processes can share one journal directory.
	journalFiles = 16
)

// journalEntry is one line of the journal: a handed-over job's report, or Done for a job whose report was
// recorded.
type journalEntry struct {
	Job     string           `json:"job"`
	Done    bool             `json:"done,omitempty"`
	At      time.Time        `json:"at,omitzero"`
	Handed  bool             `json:"handed,omitempty"`
	Reports []journalOutcome `json:"rcpts,omitempty"`
}

type journalOutcome struct {
	ID       string                    `json:"id"`
	Kind     ports.DeliveryOutcomeKind `json:"kind"`
	Response string                    `json:"resp,omitempty"`
}

// delivered reports whether the entry holds a recipient the receiving server accepted.
func (e journalEntry) delivered() bool {
	for _, o := range e.Reports {
		if o.Kind == ports.OutcomeDelivered {
			return true
		}
	}
	return false
}

// report rebuilds the job's report from the entry.
func (e journalEntry) report(job ports.DeliveryJob) ports.DeliveryReport {
	r := ports.DeliveryReport{Job: job, Handed: e.Handed, At: e.At}
	for _, o := range e.Reports {
		r.Recipients = append(r.Recipients, ports.RecipientOutcome{RecipientID: o.ID, Kind: o.Kind, Response: o.Response})
	}
	return r
}

func entryOf(r ports.DeliveryReport) journalEntry {
	e := journalEntry{Job: r.Job.ID, At: r.At, Handed: r.Handed}
	for _, o := range r.Recipients {
		e.Reports = append(e.Reports, journalOutcome{ID: o.RecipientID, Kind: o.Kind, Response: o.Response})
	}
	return e
}

// journal is the handed-over journal; without a file it keeps the same state in memory only.
type journal struct {
	dir  string
	lock *os.File // held for the process's lifetime of the file; nil in memory
	path string
	// compactAt is the file size past which it is rewritten (journalCompactBytes; tests lower it).
	compactAt int64

	mu      sync.Mutex
	entries map[string]journalEntry
	order   []string // job ids in the order recorded (ids already done are skipped lazily)
	f       *os.File
	size    int64
	// Group commit: lines waiting to be written, the callers waiting for their write, and those waiting
	// for an fsync covering everything written before they asked.
	buf      []byte
	waiters  []chan error
	syncers  []chan error
	fsyncs   int // fsyncs made for sync (postmill_mta_journal_fsyncs_total)
	flushing bool
	closed   bool
}

// openJournal opens (creating) a journal file in dir that no other process holds, or a journal in memory
// when dir is "".
func openJournal(dir string, now time.Time) (*journal, error) {
	j := &journal{dir: dir, entries: map[string]journalEntry{}, compactAt: journalCompactBytes}
	if dir == "" {
		return j, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal directory: %w", err)
	}
	for i := range journalFiles {
		base := filepath.Join(dir, fmt.Sprintf("journal-%d", i))
		lock, err := os.OpenFile(base+".lock", os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("journal lock: %w", err)
		}
		ok, err := tryLock(lock)
		if err != nil {
			_ = lock.Close()
			return nil, fmt.Errorf("journal lock: %w", err)
		}
		if !ok {
			_ = lock.Close()
			continue
		}
		j.lock, j.path = lock, base+".log"
		if err := j.load(now); err != nil {
			_ = lock.Close()
			return nil, err
		}
		return j, nil
	}
	return nil, fmt.Errorf("journal: all %d journal files in %s are held by other processes", journalFiles, dir)
}

// load reads the file back and rewrites it with the live entries.
func (j *journal) load(now time.Time) error {
	f, err := os.Open(j.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("journal: %w", err)
	default:
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), journalMaxLine)
		for sc.Scan() {
			var e journalEntry
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Job == "" {
				continue // a line torn by a crash while it was written
			}
			if e.Done {
				delete(j.entries, e.Job)
				continue
			}
			if _, seen := j.entries[e.Job]; !seen {
				j.order = append(j.order, e.Job)
			}
			j.entries[e.Job] = e
		}
		err := sc.Err()
		_ = f.Close()
		if err != nil && !errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("journal: read %s: %w", j.path, err)
		}
	}
	j.pruneLocked(now)
	return j.rewriteLocked()
}

// get returns the entry of a job handed over and not yet reported.
func (j *journal) get(jobID string) (journalEntry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[jobID]
	return e, ok
}

// record remembers a handed-over job's report and returns once it is written to the file (not fsynced:
// see sync). It returns the evicted job id when the journal was full.
func (j *journal) record(r ports.DeliveryReport) (evicted string, err error) {
	e := entryOf(r)
	line, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	j.mu.Lock()
	if _, seen := j.entries[e.Job]; !seen {
		j.order = append(j.order, e.Job)
	}
	j.entries[e.Job] = e
	if len(j.entries) > journalMaxEntries {
		evicted = j.evictOldestLocked()
	}
	wait := j.appendLocked(append(line, '\n'), true)
	j.mu.Unlock()
	if wait == nil {
		return evicted, nil
	}
	return evicted, <-wait
}

// done forgets a job whose report was recorded. The done line is written with the next group, without
// waiting: losing it in a crash only leaves an entry that is pruned later.
func (j *journal) done(jobID string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.entries[jobID]; !ok {
		return
	}
	delete(j.entries, jobID)
	line, _ := json.Marshal(journalEntry{Job: jobID, Done: true})
	j.appendLocked(append(line, '\n'), false)
	if len(j.order) > 2*len(j.entries)+1024 {
		j.compactOrderLocked()
	}
}

// syncCount reports how many fsyncs sync has made.
func (j *journal) syncCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.fsyncs
}

// count reports how many jobs are remembered.
func (j *journal) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.entries)
}

// appendLocked queues line for the file and starts a flush when none runs; with wait it returns the
// channel that receives the result of the write covering the line. In memory it does nothing.
func (j *journal) appendLocked(line []byte, wait bool) chan error {
	if j.lock == nil || j.closed {
		return nil
	}
	j.buf = append(j.buf, line...)
	var ch chan error
	if wait {
		ch = make(chan error, 1)
		j.waiters = append(j.waiters, ch)
	}
	j.startFlushLocked()
	return ch
}

func (j *journal) startFlushLocked() {
	if !j.flushing {
		j.flushing = true
		go j.flush()
	}
}

// sync returns once everything recorded before it is fsynced. It is called when a handed-over job's
// report failed, before the job goes back to the queue: from then on its line survives a machine crash.
// Concurrent calls share one fsync. In memory it does nothing.
func (j *journal) sync() error {
	j.mu.Lock()
	if j.lock == nil || j.closed {
		j.mu.Unlock()
		return nil
	}
	ch := make(chan error, 1)
	j.syncers = append(j.syncers, ch)
	j.startFlushLocked()
	j.mu.Unlock()
	return <-ch
}

// flush writes queued lines until none are left, fsyncing a group when a caller of sync waits for it;
// lines queued while one group is being written go in the next group, so concurrent jobs share writes
// and fsyncs.
func (j *journal) flush() {
	j.mu.Lock()
	for len(j.buf) > 0 || len(j.waiters) > 0 || len(j.syncers) > 0 {
		buf, waiters, syncers := j.buf, j.waiters, j.syncers
		j.buf, j.waiters, j.syncers = nil, nil, nil
		f := j.f
		j.mu.Unlock()

		var err error
		if len(buf) > 0 {
			_, err = f.Write(buf)
		}
		for _, w := range waiters {
			w <- err
		}
		if len(syncers) > 0 {
			if err == nil {
				err = f.Sync()
			}
			j.mu.Lock()
			j.fsyncs++
			j.mu.Unlock()
			for _, w := range syncers {
				w <- err
			}
		}

		j.mu.Lock()
		j.size += int64(len(buf))
		if j.size > j.compactAt {
			j.pruneLocked(time.Now())
			if err := j.rewriteLocked(); err != nil {
				// Appending goes on to the old file; another compactAt later it is tried again.
				j.size = 0
			}
		}
	}
	j.flushing = false
	j.mu.Unlock()
}

// rewriteLocked replaces the file with one holding the live entries only: written to a temporary file,
// fsynced, renamed over the old one, and the directory fsynced, so a crash leaves one or the other whole.
func (j *journal) rewriteLocked() error {
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	w := bufio.NewWriter(f)
	var size int64
	j.compactOrderLocked()
	for _, id := range j.order {
		line, err := json.Marshal(j.entries[id])
		if err != nil {
			continue
		}
		n, _ := w.Write(append(line, '\n'))
		size += int64(n)
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err == nil {
		err = syncDir(j.dir)
	}
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("journal: rewrite: %w", err)
	}
	_ = f.Close()
	nf, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if j.f != nil {
		_ = j.f.Close()
	}
	j.f, j.size = nf, size
	return nil
}

// pruneLocked forgets entries older than journalMaxAge.
func (j *journal) pruneLocked(now time.Time) {
	for id, e := range j.entries {
		if now.Sub(e.At) > journalMaxAge {
			delete(j.entries, id)
		}
	}
	j.compactOrderLocked()
}

// compactOrderLocked drops ids that are no longer remembered from order.
func (j *journal) compactOrderLocked() {
	kept := j.order[:0]
	seen := make(map[string]bool, len(j.entries))
	for _, id := range j.order {
		if _, ok := j.entries[id]; ok && !seen[id] {
			seen[id] = true
			kept = append(kept, id)
		}
	}
	clear(j.order[len(kept):])
	j.order = kept
}

// evictOldestLocked forgets the oldest remembered job and returns its id.
func (j *journal) evictOldestLocked() string {
	for len(j.order) > 0 {
		id := j.order[0]
		j.order = j.order[1:]
		if _, ok := j.entries[id]; ok {
			delete(j.entries, id)
			return id
		}
	}
	return ""
}

// close writes what is queued and releases the file.
func (j *journal) close() error {
	j.mu.Lock()
	if j.lock == nil || j.closed {
		j.mu.Unlock()
		return nil
	}
	for j.flushing {
		j.mu.Unlock()
		time.Sleep(time.Millisecond)
		j.mu.Lock()
	}
	j.closed = true
	var err error
	if len(j.buf) > 0 {
		if _, werr := j.f.Write(j.buf); werr != nil {
			err = werr
		}
		j.buf = nil
	}
	if j.f != nil {
		err = errors.Join(err, j.f.Sync(), j.f.Close())
	}
	j.mu.Unlock()
	return errors.Join(err, j.lock.Close()) // closing the descriptor releases the lock
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
