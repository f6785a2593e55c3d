package broadcast

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// fakeBacklog is how long the delivery queue's oldest ready bulk job has waited, as the test sets it. It
// counts the times it was asked.
type fakeBacklog struct {
	mu    sync.Mutex
	wait  time.Duration
	err   error
	calls int
	asked chan struct{} // receives (without blocking) at every question
}

func newFakeBacklog(wait time.Duration) *fakeBacklog {
	return &fakeBacklog{wait: wait, asked: make(chan struct{}, 1)}
}

func (b *fakeBacklog) BulkWait(context.Context) (time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	select {
	case b.asked <- struct{}{}:
	default:
	}
	return b.wait, b.err
}

func (b *fakeBacklog) set(wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wait = wait
}

func (b *fakeBacklog) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// pacedExpander is the fixture's broadcast service with a backlog to pace against.
func (f *fixture) pacedExpander(t *testing.T, backlog ports.BulkBacklog, maxBacklog time.Duration, lease time.Duration) (*Service, *countingStore) {
	t.Helper()
	st := &countingStore{fakeStore: f.store}
	svc, err := New(Config{BaseURL: "https://mail.example.test/", BatchSize: 7, Concurrency: 4, Lease: lease, MaxBacklog: maxBacklog},
		Deps{Store: st, Audience: f.audience, Domains: fakeDomains{}, Emails: f.emails, Keyring: f.keyring,
			Clock: fixedClock{now}, Backlog: backlog})
	if err != nil {
		t.Fatal(err)
	}
	return svc, st
}

func (f *fixture) startBroadcast(t *testing.T) ports.Broadcast {
	t.Helper()
	b := f.create(t)
	if _, err := f.svc.SendBroadcast(context.Background(), orgA, b.ID); err != nil {
		t.Fatal(err)
	}
	return b
}

// While the oldest bulk job ready for delivery has waited MaxBacklog or more, the expander writes nothing;
// once the MTA has caught up, it goes on and sends every contact once.
func TestExpander_WaitsWhileTheBacklogIsFull(t *testing.T) {
	f := newFixture(t, 30) // 5 pages of 7
	backlog := newFakeBacklog(10 * time.Second)
	svc, st := f.pacedExpander(t, backlog, 10*time.Second, DefaultLease)
	b := f.startBroadcast(t)
	done := expandInBackground(context.Background(), svc)

	for backlog.count() < 3 {
		waitFor(t, backlog.asked, "the expander to count the backlog")
	}
	f.emails.mu.Lock()
	sent := len(f.emails.byKey)
	f.emails.mu.Unlock()
	if pages, _ := st.counts(); pages != 0 || sent != 0 {
		t.Fatalf("with a full backlog the expander recorded %d pages and sent %d emails", pages, sent)
	}
	backlog.set(9 * time.Second)
	waitDone(t, done, "the expander")
	f.assertSentOncePerContact(t, b.ID, 30)
	if pages, _ := st.counts(); pages != 5 {
		t.Fatalf("%d pages recorded, want 5", pages)
	}
}

// A backlog that never drains (no MTA is running) holds each page for at most a third of the lease: the
// broadcast slows down but is expanded.
func TestExpander_ABacklogThatDoesNotDrainSlowsButDoesNotStop(t *testing.T) {
	f := newFixture(t, 30)
	backlog := newFakeBacklog(time.Hour)
	svc, st := f.pacedExpander(t, backlog, 10*time.Second, 1500*time.Millisecond)
	b := f.startBroadcast(t)
	waitDone(t, expandInBackground(context.Background(), svc), "the expander")
	f.assertSentOncePerContact(t, b.ID, 30)
	if pages, _ := st.counts(); pages != 5 {
		t.Fatalf("%d pages recorded, want 5", pages)
	}
	// Each of the 5 pages and the last, empty read waited (a third of the lease, looking every 250 ms).
	if n := backlog.count(); n < 12 {
		t.Fatalf("the backlog was read %d times, want each page to wait", n)
	}
}

// A queue that cannot tell its backlog does not hold the broadcast.
func TestExpander_BacklogUnavailable(t *testing.T) {
	f := newFixture(t, 30)
	backlog := newFakeBacklog(time.Hour)
	backlog.err = errors.New("connection refused")
	svc, _ := f.pacedExpander(t, backlog, 10*time.Second, DefaultLease)
	b := f.startBroadcast(t)
	waitDone(t, expandInBackground(context.Background(), svc), "the expander")
	f.assertSentOncePerContact(t, b.ID, 30)
	if backlog.count() == 0 {
		t.Fatal("the backlog was never read")
	}
}
