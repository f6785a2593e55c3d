package postgres_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// offsetList is a list paged by limit and offset (topics, segments, broadcasts), seen through its store
// method.
type offsetList struct {
	name string
	// add inserts a row of orgID created at at and returns its id.
	add  func(tb testing.TB, s *postgres.Store, orgID string, at time.Time) string
	list func(s *postgres.Store, orgID string, limit, offset int) ([]string, error)
}

func idsOf[T any](rows []T, err error, id func(T) string) ([]string, error) {
	out := make([]string, 0, len(rows))
	for _, v := range rows {
		out = append(out, id(v))
	}
	return out, err
}

var offsetLists = []offsetList{
	{
		name: "topics",
		add: func(tb testing.TB, s *postgres.Store, orgID string, at time.Time) string {
			t, err := s.CreateTopic(context.Background(), ports.Topic{ID: newID(), OrganizationID: orgID,
				Key: "k" + randomHex(tb, 4), Name: "T", CreatedAt: at, UpdatedAt: at})
			if err != nil {
				tb.Fatal(err)
			}
			return t.ID
		},
		list: func(s *postgres.Store, orgID string, limit, offset int) ([]string, error) {
			ts, err := s.ListTopics(context.Background(), orgID, limit, offset)
			return idsOf(ts, err, func(t ports.Topic) string { return t.ID })
		},
	},
	{
		name: "segments",
		add: func(tb testing.TB, s *postgres.Store, orgID string, at time.Time) string {
			plan := cond(ports.FieldText, "email", "", "exists", nil)
			seg, err := s.CreateSegment(context.Background(), ports.Segment{ID: newID(), OrganizationID: orgID, Name: "S",
				Rule: json.RawMessage(`{"field":"email","cmp":"exists"}`), Plan: &plan, CreatedAt: at, UpdatedAt: at})
			if err != nil {
				tb.Fatal(err)
			}
			return seg.ID
		},
		list: func(s *postgres.Store, orgID string, limit, offset int) ([]string, error) {
			segs, err := s.ListSegments(context.Background(), orgID, limit, offset)
			return idsOf(segs, err, func(seg ports.Segment) string { return seg.ID })
		},
	},
	{
		name: "broadcasts",
		add: func(tb testing.TB, s *postgres.Store, orgID string, at time.Time) string {
			b := newBroadcastRow(orgID, "")
			b.CreatedAt, b.UpdatedAt = at, at
			if err := s.InsertBroadcast(context.Background(), b); err != nil {
				tb.Fatal(err)
			}
			return b.ID
		},
		list: func(s *postgres.Store, orgID string, limit, offset int) ([]string, error) {
			bs, err := s.ListBroadcasts(context.Background(), orgID, limit, offset)
			return idsOf(bs, err, func(b ports.Broadcast) string { return b.ID })
		},
	},
}

// TestOffsetLists_PageNewestFirstWithinTheOrganization: limit and offset select the page in SQL, newest
// first, and another organization's rows are never counted or shown.
func TestOffsetLists_PageNewestFirstWithinTheOrganization(t *testing.T) {
	st := pgtest.Store(t)
	for _, l := range offsetLists {
		t.Run(l.name, func(t *testing.T) {
			a, b := mustSignup(t, st), mustSignup(t, st)
			var want []string // newest first
			for i := range 5 {
				// The other organization's rows are interleaved, newer than each of a's.
				want = append([]string{l.add(t, st, a.org.ID, baseTime.Add(time.Duration(2*i)*time.Second))}, want...)
				l.add(t, st, b.org.ID, baseTime.Add(time.Duration(2*i+1)*time.Second))
			}
			for _, c := range []struct{ limit, offset int }{{25, 0}, {2, 1}, {2, 4}, {3, 5}, {1, 0}} {
				got, err := l.list(st, a.org.ID, c.limit, c.offset)
				end := min(c.offset+c.limit, len(want))
				if w := want[min(c.offset, len(want)):end]; err != nil || !slices.Equal(got, w) {
					t.Errorf("limit %d offset %d = %v, %v; want %v", c.limit, c.offset, got, err, w)
				}
			}
		})
	}
}
