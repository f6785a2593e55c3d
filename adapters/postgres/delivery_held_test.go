package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// heldJob is a job of orgID's sending domain domainID, first queued at baseTime, held at heldAt.
func heldJob(orgID, domainID string, heldAt time.Time) ports.HeldJob {
	return ports.HeldJob{
		Job: ports.DeliveryJob{ID: newV7(), OrganizationID: orgID, MessageID: newV7(), Domain: "rcpt.example",
			RecipientIDs: []string{newV7(), newV7()}, Attempt: 3, FirstQueuedAt: baseTime, NotBefore: baseTime.Add(time.Minute)},
		DomainID: domainID,
		Reason:   ports.HoldOrganizationPaused,
		HeldAt:   heldAt,
	}
}

func mustHold(tb testing.TB, s *postgres.Store, jobs ...ports.HeldJob) {
	tb.Helper()
	for _, j := range jobs {
		if err := s.HoldDelivery(context.Background(), j); err != nil {
			tb.Fatalf("HoldDelivery: %v", err)
		}
	}
}

// relayed takes every job due at now out of the outbox.
func relayed(tb testing.TB, s *postgres.Store, now time.Time) []ports.DeliveryJob {
	tb.Helper()
	var out []ports.DeliveryJob
	for {
		n, err := s.RelayDue(context.Background(), now, 100, func(_ context.Context, jobs []ports.DeliveryJob) error {
			out = append(out, jobs...)
			return nil
		})
		if err != nil {
			tb.Fatalf("RelayDue: %v", err)
		}
		if n == 0 {
			return out
		}
	}
}

// TestHeldDeliveries: a job is held once however often it is held; groups list each organization's
// sending domain with its count, longest held first; a release moves one group's jobs (and no other's) to
// the outbox unchanged (their lane included) but for when they are due and their first-queued time, which moves later by the
// time they were held so a hold does not count towards the maximum age.
func TestHeldDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	org1, org2, dom1, dom2 := newV7(), newV7(), newV7(), newV7()
	heldAt := baseTime.Add(time.Hour)
	a := heldJob(org1, dom1, heldAt)
	a.Job.Bulk = true // a broadcast's job keeps its lane through the hold
	b := heldJob(org1, dom2, heldAt.Add(time.Second))
	c := heldJob(org2, dom1, heldAt.Add(2*time.Second))
	mustHold(t, s, a, a, b, c)
	again := a
	again.HeldAt = heldAt.Add(time.Hour) // a redelivered job held again keeps its first hold
	mustHold(t, s, again)

	groups, err := s.HeldGroups(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	group := func(org, dom string) ports.HeldGroup {
		return ports.HeldGroup{OrganizationID: org, DomainID: dom, Jobs: 1}
	}
	want := []ports.HeldGroup{group(org1, dom1), group(org1, dom2), group(org2, dom1)}
	if !slices.Equal(groups, want) {
		t.Fatalf("groups %+v, want %+v", groups, want)
	}
	if top, _ := s.HeldGroups(ctx, 1); len(top) != 1 || top[0] != want[0] {
		t.Errorf("limited groups %+v", top)
	}

	now := heldAt.Add(3 * time.Hour)
	if n, err := s.ReleaseHeld(ctx, org2, dom2, now, 10); err != nil || n != 0 {
		t.Fatalf("release of a pair with nothing held: %d, %v", n, err)
	}
	n, err := s.ReleaseHeld(ctx, org1, dom1, now, 10)
	if err != nil || n != 1 {
		t.Fatalf("release: %d, %v", n, err)
	}
	out := relayed(t, s, now)
	if len(out) != 1 {
		t.Fatalf("outbox holds %d jobs, want 1", len(out))
	}
	got, wantJob := out[0], a.Job
	wantJob.FirstQueuedAt = baseTime.Add(3 * time.Hour) // held for three hours
	wantJob.NotBefore = now
	if got.ID != wantJob.ID || got.OrganizationID != org1 || got.MessageID != wantJob.MessageID || got.Domain != wantJob.Domain ||
		!slices.Equal(got.RecipientIDs, wantJob.RecipientIDs) || got.Attempt != wantJob.Attempt ||
		!got.FirstQueuedAt.Equal(wantJob.FirstQueuedAt) || !got.NotBefore.Equal(now) || !got.Bulk {
		t.Errorf("released job\n got  %+v\n want %+v", got, wantJob)
	}
	groups, _ = s.HeldGroups(ctx, 10)
	if !slices.Equal(groups, want[1:]) {
		t.Errorf("groups after the release %+v, want %+v", groups, want[1:])
	}
	// Released jobs are gone from the hold: a second release moves nothing.
	if n, _ := s.ReleaseHeld(ctx, org1, dom1, now, 10); n != 0 {
		t.Errorf("second release moved %d", n)
	}
}

// TestHeldDeliveries_ConcurrentReleases: releases running in several processes at once move every job
// of a group exactly once.
func TestHeldDeliveries_ConcurrentReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	org, dom := newV7(), newV7()
	ids := map[string]bool{}
	for i := range 60 {
		j := heldJob(org, dom, baseTime.Add(time.Duration(i)*time.Millisecond))
		ids[j.Job.ID] = true
		mustHold(t, s, j)
	}
	now := baseTime.Add(time.Hour)
	var mu sync.Mutex
	moved := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				n, err := s.ReleaseHeld(ctx, org, dom, now, 7)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				moved += n
				mu.Unlock()
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	out := relayed(t, s, now)
	if moved != 60 || len(out) != 60 {
		t.Fatalf("moved %d, outbox %d, want 60 each", moved, len(out))
	}
	for _, j := range out {
		if !ids[j.ID] {
			t.Fatalf("unknown job %s", j.ID)
		}
		delete(ids, j.ID)
	}
}
