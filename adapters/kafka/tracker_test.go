package kafka

import "testing"

func TestTrackerCommitsOnlyTheContiguousAckedRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		offsets []int64 // received, in order
		acks    []int   // indexes into offsets, in ack order
		want    int64   // offset to commit after all acks; -1 for nothing
	}{
		{"nothing acked", []int64{5, 6, 7}, nil, -1},
		{"first acked", []int64{5, 6, 7}, []int{0}, 6},
		{"in order", []int64{5, 6, 7}, []int{0, 1, 2}, 8},
		{"later ones only", []int64{5, 6, 7}, []int{2, 1}, -1},
		{"out of order, then the first", []int64{5, 6, 7}, []int{2, 0}, 6},
		{"out of order, all", []int64{5, 6, 7}, []int{2, 0, 1}, 8},
		{"gaps in offsets (compaction, transaction markers)", []int64{5, 9, 12}, []int{0, 1}, 10},
		{"a hole in the middle holds the rest", []int64{0, 1, 2, 3, 4}, []int{0, 2, 3, 4}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := newTracker()
			var es []*entry
			for _, o := range tc.offsets {
				es = append(es, tr.add(o, 3))
			}
			for _, i := range tc.acks {
				tr.ack(es[i])
			}
			to, ok := tr.uncommitted()
			if got := map[bool]int64{true: to.Offset, false: -1}[ok]; got != tc.want {
				t.Fatalf("offset to commit = %d, want %d", got, tc.want)
			}
			if ok && to.Epoch != 3 {
				t.Fatalf("epoch %d, want the record's 3", to.Epoch)
			}
		})
	}
}

func TestTrackerAfterCommitAndDeath(t *testing.T) {
	t.Parallel()
	tr := newTracker()
	a, b := tr.add(0, 0), tr.add(1, 0)
	if tr.add(1, 0) != nil || tr.add(0, 0) != nil {
		t.Fatal("a re-fetched offset was tracked twice")
	}
	tr.ack(a)
	to, _ := tr.uncommitted()
	tr.committedTo(to)
	if _, ok := tr.uncommitted(); ok {
		t.Fatal("something left to commit right after the commit")
	}
	tr.committedTo(tr.acked) // a late, equal commit changes nothing
	tr.ack(b)
	tr.dead = true
	if _, ok := tr.uncommitted(); ok {
		t.Fatal("a revoked partition still wants a commit")
	}
}
