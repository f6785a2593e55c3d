package broadcast

import (
	"context"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

type fakeProtection struct{ paused *bool }

func (p fakeProtection) Protection(context.Context, string) (ports.Protection, error) {
	return ports.Protection{BroadcastsPaused: *p.paused, Reason: "complaint rate 0.40%"}, nil
}

// TestExpander_AutomaticProtectionPauses checks that a broadcast of an organization whose broadcasts
// automatic protection paused sends nothing and is parked with the reason, and goes on once the pause is
// lifted.
func TestExpander_AutomaticProtectionPauses(t *testing.T) {
	f := newFixture(t, 10)
	paused := true
	f.svc.deps.Protection = fakeProtection{&paused}
	ctx := context.Background()
	b := f.create(t)
	if _, err := f.svc.SendBroadcast(ctx, orgA, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.ExpandOnce(ctx); err != nil {
		t.Fatal(err)
	}
	p, _ := f.store.GetBroadcast(ctx, orgA, b.ID)
	if len(f.emails.byKey) != 0 || p.Status != ports.BroadcastSending || p.PausedUntil == nil ||
		!strings.Contains(p.FailureReason, "automatic protection") {
		t.Fatalf("paused broadcast: %d sent, %+v", len(f.emails.byKey), p)
	}
	paused = false
	f.svc.deps.Clock = fixedClock{p.PausedUntil.Add(1)}
	if err := f.svc.ExpandOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if done, _ := f.store.GetBroadcast(ctx, orgA, b.ID); done.Status != ports.BroadcastSent || len(f.emails.byKey) != 10 {
		t.Fatalf("after the pause was lifted: %+v, %d sent", done, len(f.emails.byKey))
	}
}
