package kafka

import "github.com/twmb/franz-go/pkg/kgo"

// tracker follows one assigned partition: the records received and not yet part of the acked run, in
// offset order, and how far that run has been committed. Kafka commits one offset per partition — "every
// record before this one is done" — so records acked out of order wait until the records before them are
// acked too. The consumer's mutex guards it.
type tracker struct {
	pending   []*entry        // received records, ascending offsets, starting after the acked run
	lastAdded int64           // highest offset received in this assignment
	acked     kgo.EpochOffset // the acked run ends before acked.Offset (the offset to commit); -1 for none
	committed kgo.EpochOffset // what the broker last accepted; -1 for nothing yet
	dead      bool            // revoked or lost: nothing is committed for it any more
}

// entry is one received record.
type entry struct {
	offset int64
	epoch  int32
	done   bool
}

func newTracker() *tracker {
	none := kgo.EpochOffset{Epoch: -1, Offset: -1}
	return &tracker{lastAdded: -1, acked: none, committed: none}
}

// add registers a received record. A record at or below an offset already received in this assignment
// (a re-fetch) is not tracked again: its first delivery settles it. add then returns nil.
func (t *tracker) add(offset int64, epoch int32) *entry {
	if offset <= t.lastAdded {
		return nil
	}
	t.lastAdded = offset
	e := &entry{offset: offset, epoch: epoch}
	t.pending = append(t.pending, e)
	return e
}

// ack marks e done and extends the acked run over every leading done record.
func (t *tracker) ack(e *entry) {
	e.done = true
	n := 0
	for n < len(t.pending) && t.pending[n].done {
		n++
	}
	if n == 0 {
		return
	}
	last := t.pending[n-1]
	t.acked = kgo.EpochOffset{Epoch: last.epoch, Offset: last.offset + 1}
	clear(t.pending[:n]) // let the entries go
	t.pending = t.pending[n:]
}

// uncommitted returns the offset to commit when the acked run reaches beyond the last commit.
func (t *tracker) uncommitted() (kgo.EpochOffset, bool) {
	if t.dead || t.acked.Offset <= t.committed.Offset {
		return kgo.EpochOffset{}, false
	}
	return t.acked, true
}

// committedTo records a commit the broker accepted; an older one arriving late never moves it back.
func (t *tracker) committedTo(to kgo.EpochOffset) {
	if to.Offset > t.committed.Offset {
		t.committed = to
	}
}
