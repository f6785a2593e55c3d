package postgres_test

import (
	"context"
	"testing"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestBounceClass_RecordAndEvent: a bounce's class is stored with its record and listed back, a bounce
// written without one lists with none (the core classifies it then), and the class of an event reaches the
// webhook fan-out, where an event without one has none.
func TestBounceClass_RecordAndEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	nm := f.newSend(t, "blocked@example.com", "later@example.com")
	id := f.mustInsert(t, nm)
	blocked, later := nm.Message.Recipients[0], nm.Message.Recipients[1]
	spam := "smtp; 554 5.7.1 Client host [192.0.2.1] blocked using zen.spamhaus.org"
	full := "smtp; 452 4.2.2 Mailbox full"

	// With an events stream every event is fanned out (and so handed to payloads), subscribed or not.
	if err := s.RegisterEventStream(ctx, "kafka"); err != nil {
		t.Fatal(err)
	}
	err := s.ApplyFeedback(ctx, f.org.ID, id, func([]ports.Recipient) ports.FeedbackApplication {
		return ports.FeedbackApplication{
			Recipients: map[string]ports.MessageStatus{blocked.ID: ports.StatusBounced},
			Events: []ports.Event{
				{ID: newV7(), Type: ports.EventEmailBounced, RecipientID: blocked.ID, ProviderResponse: &spam,
					BounceClass: ports.BounceClassSpamBlock, OccurredAt: baseTime},
				{ID: newV7(), Type: ports.EventEmailDeliveryDelayed, RecipientID: later.ID, ProviderResponse: &full,
					OccurredAt: baseTime},
			},
			Bounces: []ports.Bounce{
				{ID: newV7(), RecipientID: blocked.ID, Address: blocked.Address, Type: ports.BounceHard, Class: ports.BounceClassSpamBlock,
					Status: "5.7.1", Action: "failed", DiagnosticCode: spam, CreatedAt: baseTime},
				{ID: newV7(), RecipientID: later.ID, Address: later.Address, Type: ports.BounceSoft, Status: "4.2.2",
					Action: "delayed", DiagnosticCode: full, CreatedAt: baseTime.Add(1)},
			},
		}
	})
	if err != nil {
		t.Fatalf("ApplyFeedback: %v", err)
	}

	page, err := s.ListBounces(ctx, f.org.ID, ports.PageQuery{Limit: 10})
	if err != nil || len(page.Data) != 2 {
		t.Fatalf("ListBounces = %+v (%v)", page, err)
	}
	classes := map[string]string{}
	for _, b := range page.Data {
		classes[b.RecipientID] = b.Class
	}
	if classes[blocked.ID] != ports.BounceClassSpamBlock || classes[later.ID] != "" {
		t.Errorf("listed classes %v, want spam_block for %s and none for %s", classes, blocked.ID, later.ID)
	}

	handed := map[string]string{}
	if _, err := s.FanOut(ctx, baseTime, 100, func(_ context.Context, events []ports.Event) (map[string][]byte, error) {
		for _, e := range events {
			handed[e.Type+" "+e.RecipientID] = e.BounceClass
		}
		return nil, nil
	}); err != nil {
		t.Fatalf("FanOut: %v", err)
	}
	if got := handed[ports.EventEmailBounced+" "+blocked.ID]; got != ports.BounceClassSpamBlock {
		t.Errorf("bounced event handed with class %q, want spam_block (all: %v)", got, handed)
	}
	if got, ok := handed[ports.EventEmailDeliveryDelayed+" "+later.ID]; !ok || got != "" {
		t.Errorf("delayed event handed with class %q (present %v), want none", got, ok)
	}
}
