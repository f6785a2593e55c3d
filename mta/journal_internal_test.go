package mta

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

func handedReport(id string, at time.Time) ports.DeliveryReport {
	return ports.DeliveryReport{
		Job: ports.DeliveryJob{ID: id}, Handed: true, At: at,
		Recipients: []ports.RecipientOutcome{
			{RecipientID: "r1", Kind: ports.OutcomeDelivered, Response: "250 ok"},
			{RecipientID: "r2", Kind: ports.OutcomeBounced, Response: "550 5.1.1 unknown"},
		},
	}
}

func mustOpenJournal(tb testing.TB, dir string, now time.Time) *journal {
	tb.Helper()
	j, err := openJournal(dir, now)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = j.close() })
	return j
}

// TestJournalReadBack: recorded jobs survive a reopen with their outcomes; done ones, ones older than
// journalMaxAge and a line torn by a crash do not; the file is rewritten with the live entries only.
func TestJournalReadBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now().Round(0)
	j := mustOpenJournal(t, dir, now)
	for _, id := range []string{"kept", "done", "old"} {
		at := now
		if id == "old" {
			at = now.Add(-journalMaxAge - time.Hour)
		}
		if _, err := j.record(handedReport(id, at)); err != nil {
			t.Fatal(err)
		}
	}
	j.done("done")
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "journal-0.log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"job":"torn","at":"2026-`) // a crash in the middle of a write
	_ = f.Close()

	again := mustOpenJournal(t, dir, now)
	if again.count() != 1 {
		t.Fatalf("%d entries after reopening, want 1", again.count())
	}
	e, ok := again.get("kept")
	if !ok || !e.delivered() || !e.At.Equal(now) {
		t.Fatalf("kept entry %+v, %v", e, ok)
	}
	r := e.report(ports.DeliveryJob{ID: "kept"})
	if !r.Handed || len(r.Recipients) != 2 || r.Recipients[1].Response != "550 5.1.1 unknown" {
		t.Fatalf("report rebuilt as %+v", r)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != 1 || strings.Contains(string(data), "torn") {
		t.Fatalf("rewritten journal holds %d lines:\n%s", lines, data)
	}
}

// TestJournalCompactsAndEvicts: the file is rewritten once it grows past its bound, keeping only the live
// entries; past journalMaxEntries the oldest entry is forgotten.
func TestJournalCompactsAndEvicts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := mustOpenJournal(t, dir, time.Now())
	const compactAt = 64 << 10
	j.compactAt = compactAt
	big := handedReport("", time.Now())
	big.Recipients[0].Response = "250 " + strings.Repeat("x", 900)
	line, _ := json.Marshal(entryOf(big))
	n := compactAt/len(line) + 10
	for i := range n {
		big.Job.ID = fmt.Sprintf("job-%d", i)
		if _, err := j.record(big); err != nil {
			t.Fatal(err)
		}
		if i < n-1 {
			j.done(big.Job.ID)
		}
	}
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, "journal-0.log"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() > compactAt/2 {
		t.Fatalf("journal of %d bytes was not compacted", info.Size())
	}
	again := mustOpenJournal(t, dir, time.Now())
	if _, ok := again.get(fmt.Sprintf("job-%d", n-1)); !ok || again.count() != 1 {
		t.Fatalf("after compaction: %d entries", again.count())
	}

	mem := mustOpenJournal(t, "", time.Now())
	var evicted string
	for i := range journalMaxEntries + 1 {
		e, err := mem.record(handedReport(fmt.Sprintf("m-%d", i), time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		evicted = e
	}
	if evicted != "m-0" || mem.count() != journalMaxEntries {
		t.Fatalf("evicted %q, %d entries", evicted, mem.count())
	}
}

// TestJournalWritesBeforeReturning: record returns once the line is in the file (so it outlives a killed
// process) without an fsync; sync fsyncs what was written, and concurrent syncs share fsyncs.
func TestJournalWritesBeforeReturning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := mustOpenJournal(t, dir, time.Now())
	if _, err := j.record(handedReport("written", time.Now())); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "journal-0.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"job":"written"`) {
		t.Fatalf("the recorded line is not in the file after record returned: %q", raw)
	}
	if n := j.syncCount(); n != 0 {
		t.Fatalf("record fsynced %d times, want none", n)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := j.sync(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := j.syncCount(); n < 1 || n > 8 {
		t.Fatalf("8 concurrent syncs made %d fsyncs, want 1 to 8", n)
	}
}
