package broadcast

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// countingStore is one expander's view of the shared store: it counts the pages this expander recorded
// (RecordBatch moved the cursor) and those it tried to record in vain.
type countingStore struct {
	*fakeStore
	mu             sync.Mutex
	pages, refused int
}

func (c *countingStore) RecordBatch(ctx context.Context, b ports.Broadcast, cursor string, rs []ports.BroadcastRecipient, lease time.Duration) (bool, error) {
	moved, err := c.fakeStore.RecordBatch(ctx, b, cursor, rs, lease)
	c.mu.Lock()
	defer c.mu.Unlock()
	if moved {
		c.pages++
	} else {
		c.refused++
	}
	return moved, err
}

func (c *countingStore) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pages, c.refused
}

// gatedEmails is one expander's send path: every send waits until the gate opens, and entered is closed
// at the first one, so a test can hold an expander in the middle of its first page.
type gatedEmails struct {
	*fakeEmails
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once
	mu      sync.Mutex
	sends   int
}

func newGatedEmails(e *fakeEmails, open bool) *gatedEmails {
	g := &gatedEmails{fakeEmails: e, gate: make(chan struct{}), entered: make(chan struct{})}
	if open {
		close(g.gate)
	}
	return g
}

func (g *gatedEmails) Send(ctx context.Context, orgID string, req ports.SendRequest) (ports.SendResult, error) {
	g.mu.Lock()
	g.sends++
	g.mu.Unlock()
	g.once.Do(func() { close(g.entered) })
	<-g.gate
	return g.fakeEmails.Send(ctx, orgID, req)
}

func (g *gatedEmails) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sends
}

// expanderOn is a second core process's broadcast service: its own expander, with lease, on the fixture's
// store, audience and send path.
func (f *fixture) expanderOn(t *testing.T, lease time.Duration, emails ports.EmailService) (*Service, *countingStore) {
	t.Helper()
	st := &countingStore{fakeStore: f.store}
	svc, err := New(Config{BaseURL: "https://mail.example.test/", BatchSize: 7, Concurrency: 4, Lease: lease},
		Deps{Store: st, Audience: f.audience, Domains: fakeDomains{}, Emails: emails, Keyring: f.keyring, Clock: fixedClock{now}})
	if err != nil {
		t.Fatal(err)
	}
	return svc, st
}

func expandInBackground(ctx context.Context, svc *Service) chan error {
	done := make(chan error, 1)
	go func() { done <- svc.ExpandOnce(ctx) }()
	return done
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func waitDone(t *testing.T, done <-chan error, who string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", who)
	}
}

func (f *fixture) assertSentOncePerContact(t *testing.T, id string, contacts int) {
	t.Helper()
	if b, _ := f.store.GetBroadcast(context.Background(), orgA, id); b.Status != ports.BroadcastSent {
		t.Fatalf("status = %s", b.Status)
	}
	if n := len(f.emails.byKey); n != contacts {
		t.Fatalf("%d messages, want %d", n, contacts)
	}
	seen := map[string]bool{}
	for _, r := range f.store.recipients[id] {
		if seen[r.ContactID] {
			t.Fatalf("contact %s recorded twice", r.ContactID)
		}
		seen[r.ContactID] = true
	}
	if len(seen) != contacts {
		t.Fatalf("%d recipients, want %d", len(seen), contacts)
	}
}

// Two expanders (two core processes) on one store: while one works a broadcast under its lease, the
// other's claim does not get it, sends nothing and records nothing; the first expands every page.
func TestExpander_TwoExpandersOneBroadcast(t *testing.T) {
	f := newFixture(t, 30) // 5 pages of 7
	ctx := context.Background()
	b := f.create(t)
	if _, err := f.svc.SendBroadcast(ctx, orgA, b.ID); err != nil {
		t.Fatal(err)
	}
	emailsA, emailsB := newGatedEmails(f.emails, false), newGatedEmails(f.emails, true)
	a, storeA := f.expanderOn(t, time.Minute, emailsA)
	other, storeB := f.expanderOn(t, time.Minute, emailsB)

	doneA := expandInBackground(ctx, a)
	waitFor(t, emailsA.entered, "the first expander's first send")
	// The first expander is in the middle of its first page; the second polls now.
	if err := other.ExpandOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if pages, refused := storeB.counts(); pages != 0 || refused != 0 || emailsB.count() != 0 {
		t.Fatalf("the second expander worked the leased broadcast: %d pages recorded, %d refused, %d sends", pages, refused, emailsB.count())
	}
	close(emailsA.gate)
	waitDone(t, doneA, "the first expander")
	if pages, refused := storeA.counts(); pages != 5 || refused != 0 {
		t.Fatalf("the first expander recorded %d pages (%d refused), want all 5", pages, refused)
	}
	f.assertSentOncePerContact(t, b.ID, 30)
}

// An expander whose lease ran out while it was stuck in a page, and was taken by another claim, records
// nothing when it comes back (its token is no longer the stored one, though the cursor still is the one it
// read) and stops; the new holder expands the whole broadcast, one message per contact.
func TestExpander_LostLeaseStopsTheExpander(t *testing.T) {
	f := newFixture(t, 30)
	ctx := context.Background()
	b := f.create(t)
	if _, err := f.svc.SendBroadcast(ctx, orgA, b.ID); err != nil {
		t.Fatal(err)
	}
	emailsA, emailsB := newGatedEmails(f.emails, false), newGatedEmails(f.emails, false)
	stale, storeA := f.expanderOn(t, 50*time.Millisecond, emailsA)
	holder, storeB := f.expanderOn(t, time.Minute, emailsB)

	doneA := expandInBackground(ctx, stale)
	waitFor(t, emailsA.entered, "the first expander's first send")
	time.Sleep(150 * time.Millisecond) // its lease runs out
	doneB := expandInBackground(ctx, holder)
	waitFor(t, emailsB.entered, "the second expander's first send")
	// Both are in the first page, from the same cursor. The first comes back first.
	close(emailsA.gate)
	waitDone(t, doneA, "the expander that lost its lease")
	if pages, refused := storeA.counts(); pages != 0 || refused != 1 {
		t.Fatalf("the expander that lost its lease recorded %d pages (%d refused), want 0 (1 refused)", pages, refused)
	}
	close(emailsB.gate)
	waitDone(t, doneB, "the expander holding the lease")
	if pages, refused := storeB.counts(); pages != 5 || refused != 0 {
		t.Fatalf("the lease holder recorded %d pages (%d refused), want all 5", pages, refused)
	}
	f.assertSentOncePerContact(t, b.ID, 30)
}
