package sending

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// signallingOutbox is an Outbox that tells of jobs committed to it (ports.OutboxSignal) and counts the
// relay's rounds.
type signallingOutbox struct {
	ports.Outbox
	added  chan struct{}
	rounds chan int
	n      *atomic.Int32
}

func (o signallingOutbox) OutboxAdded() <-chan struct{} { return o.added }

func (o signallingOutbox) RelayDue(context.Context, time.Time, int, func(context.Context, []ports.DeliveryJob) error) (int, error) {
	o.rounds <- int(o.n.Add(1))
	return 0, nil
}

// The relay pauses RelayInterval after a round that found nothing, and starts its next round at once when
// the outbox tells of jobs committed to it.
func TestRelayRunsWhenTheOutboxSignals(t *testing.T) {
	t.Parallel()
	out := signallingOutbox{added: make(chan struct{}, 1), rounds: make(chan int, 10), n: new(atomic.Int32)}
	kr, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{RelayInterval: time.Hour}, Deps{
		Messages: fakeMessages{}, Domains: fakeDomains{}, Organizations: fakeOrganizations{}, Outbox: out,
		Delivery: fakeDelivery{}, Queue: fakeQueue{}, Blobs: fakeBlobs{}, Scanner: fakeScanner{},
		Keyring: kr, Clock: fixedClock{orderNow},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.RunRelay(ctx) }()
	next := func() int {
		select {
		case k := <-out.rounds:
			return k
		case <-time.After(30 * time.Second): // a bound on failure, not a measurement
			t.Fatal("no relay round within 30 s")
			return 0
		}
	}
	if k := next(); k != 1 {
		t.Fatalf("first round %d", k)
	}
	out.added <- struct{}{}
	if k := next(); k != 2 {
		t.Fatalf("round after the signal %d, want 2", k)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunRelay returned %v", err)
	}
}
