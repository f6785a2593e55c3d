package postgres_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestOutboundData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	other := newSendFixture(t, s)

	nm := f.newSend(t, "a@one.example", "b@two.example")
	nm.Message.Headers = map[string]string{"X-Tag": "v"}
	nm.Message.Attachments = []ports.StoredAttachment{{ID: newV7(), Filename: "a.pdf", ContentType: "application/pdf", Size: 10, Key: "att/k"}}
	id := f.mustInsert(t, nm)

	m, d, err := s.OutboundData(ctx, f.org.ID, id)
	if err != nil {
		t.Fatalf("OutboundData: %v", err)
	}
	if m.ID != id || m.From != nm.Message.From || m.HTML != nm.Message.HTML || m.Headers["X-Tag"] != "v" ||
		len(m.Recipients) != 2 || m.Recipients[1].Address != "b@two.example" || len(m.Attachments) != 1 || m.Attachments[0].Key != "att/k" {
		t.Fatalf("message = %+v", m)
	}
	if d.ID != f.dom.ID || d.Name != f.dom.Name || d.DKIMSelector != f.dom.DKIMSelector || string(d.DKIMPrivateKey) != string(f.dom.DKIMPrivateKey) {
		t.Fatalf("domain = %+v", d)
	}
	for _, orgID := range []string{other.org.ID} {
		_, _, err := s.OutboundData(ctx, orgID, id)
		requireCode(t, err, ports.CodeNotFound)
	}
	_, _, err = s.OutboundData(ctx, f.org.ID, newV7())
	requireCode(t, err, ports.CodeNotFound)
}

// deliveredApplication is what the core decides when the server accepted every recipient of the message.
func deliveredApplication(m ports.Message, at time.Time) ports.DeliveryApplication {
	resp := "250 2.0.0 Ok: queued as ABC"
	a := ports.DeliveryApplication{
		JobID: newV7(), OrganizationID: m.OrganizationID, MessageID: m.ID,
		Recipients: map[string]ports.MessageStatus{}, MessageStatus: ports.StatusDelivered,
	}
	for _, r := range m.Recipients {
		a.Recipients[r.ID] = ports.StatusDelivered
		a.Events = append(a.Events,
			ports.Event{ID: newV7(), OrganizationID: m.OrganizationID, Type: ports.EventEmailSent, MessageID: m.ID, RecipientID: r.ID, OccurredAt: at},
			ports.Event{ID: newV7(), OrganizationID: m.OrganizationID, Type: ports.EventEmailDelivered, MessageID: m.ID, RecipientID: r.ID, ProviderResponse: &resp, OccurredAt: at.Add(time.Millisecond)},
		)
	}
	return a
}

func TestApplyDelivery_OncePerJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	nm := f.newSend(t, "ok@example.org", "gone@example.org")
	id := f.mustInsert(t, nm)
	ok, gone := nm.Message.Recipients[0], nm.Message.Recipients[1]

	at := baseTime.Add(time.Minute)
	bounce := "550 5.1.1 no such user"
	retry := ports.DeliveryJob{ID: newV7(), OrganizationID: f.org.ID, MessageID: id, Domain: "example.org",
		RecipientIDs: []string{ok.ID}, Attempt: 2, FirstQueuedAt: baseTime, NotBefore: at.Add(time.Minute)}
	a := ports.DeliveryApplication{
		JobID: newV7(), OrganizationID: f.org.ID, MessageID: id,
		Recipients:    map[string]ports.MessageStatus{ok.ID: ports.StatusDeliveryDelayed, gone.ID: ports.StatusBounced},
		MessageStatus: ports.StatusDeliveryDelayed,
		Events: []ports.Event{
			{ID: newV7(), OrganizationID: f.org.ID, Type: ports.EventEmailDeliveryDelayed, MessageID: id, RecipientID: ok.ID, OccurredAt: at},
			{ID: newV7(), OrganizationID: f.org.ID, Type: ports.EventEmailBounced, MessageID: id, RecipientID: gone.ID, ProviderResponse: &bounce, OccurredAt: at},
		},
		Suppressions: []ports.Suppression{{OrganizationID: f.org.ID, Address: "gone@example.org", Scope: ports.SuppressionScopeTenant, Reason: ports.SuppressionBounce}},
		Retry:        &retry,
	}
	applied, err := s.ApplyDelivery(ctx, a)
	if err != nil || !applied {
		t.Fatalf("ApplyDelivery = %v, %v", applied, err)
	}
	check := func() {
		t.Helper()
		m, err := s.GetMessage(ctx, f.org.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if m.Status != ports.StatusDeliveryDelayed || m.Recipients[0].Status != ports.StatusDeliveryDelayed || m.Recipients[1].Status != ports.StatusBounced {
			t.Fatalf("after apply: %s %+v", m.Status, m.Recipients)
		}
		if len(m.Events) != 3 || m.Events[2].Type != ports.EventEmailBounced || *m.Events[2].ProviderResponse != bounce {
			t.Fatalf("timeline = %+v", m.Events)
		}
		if n := countRows(t, s, `SELECT count(*) FROM delivery_outbox WHERE id = $1 AND attempt = 2`, retry.ID); n != 1 {
			t.Fatalf("retry jobs = %d", n)
		}
		if n := countRows(t, s, `SELECT count(*) FROM suppressions WHERE organization_id = $1`, f.org.ID); n != 1 {
			t.Fatalf("suppressions = %d", n)
		}
	}
	check()
	sup, err := s.SuppressedAmong(ctx, f.org.ID, []string{"gone@example.org"})
	if err != nil || !sup["gone@example.org"] {
		t.Fatalf("bounced address not suppressed: %v %v", sup, err)
	}

	// The same job reported again (a redelivery) changes nothing.
	again := a
	again.Recipients = map[string]ports.MessageStatus{ok.ID: ports.StatusDelivered, gone.ID: ports.StatusDelivered}
	again.MessageStatus = ports.StatusDelivered
	again.Events = []ports.Event{{ID: newV7(), OrganizationID: f.org.ID, Type: ports.EventEmailDelivered, MessageID: id, OccurredAt: at}}
	again.Retry = &ports.DeliveryJob{ID: newV7(), OrganizationID: f.org.ID, MessageID: id, Domain: "example.org", RecipientIDs: []string{ok.ID}, Attempt: 3}
	applied, err = s.ApplyDelivery(ctx, again)
	if err != nil || applied {
		t.Fatalf("second ApplyDelivery of one job = %v, %v; want false, nil", applied, err)
	}
	check()
}

func TestApplyDelivery_ConcurrentSameJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	nm := f.newSend(t, "a@example.org")
	f.mustInsert(t, nm)
	a := deliveredApplication(nm.Message, baseTime)

	var appliedCount atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			applied, err := s.ApplyDelivery(ctx, a)
			if err != nil {
				t.Errorf("ApplyDelivery: %v", err)
			}
			if applied {
				appliedCount.Add(1)
			}
		})
	}
	wg.Wait()
	if appliedCount.Load() != 1 {
		t.Fatalf("applied %d times, want 1", appliedCount.Load())
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE message_id = $1 AND type = 'email.delivered'`, nm.Message.ID); n != 1 {
		t.Fatalf("delivered events = %d, want 1", n)
	}
}

// TestApplyDelivery_DerivedStatus: with MessageStatus "" the store derives the message status from all
// recipients' states after the update, under the message's lock.
func TestApplyDelivery_DerivedStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)

	for _, tc := range []struct {
		name string
		set  []ports.MessageStatus // new states of the three recipients ("" = unchanged: queued)
		want ports.MessageStatus
	}{
		{"least advanced wins", []ports.MessageStatus{ports.StatusDelivered, ports.StatusSent, ports.StatusDelivered}, ports.StatusSent},
		{"one still queued", []ports.MessageStatus{ports.StatusDelivered, "", ports.StatusDelivered}, ports.StatusQueued},
		{"delayed below sent", []ports.MessageStatus{ports.StatusDeliveryDelayed, ports.StatusSent, ports.StatusDelivered}, ports.StatusDeliveryDelayed},
		{"all delivered", []ports.MessageStatus{ports.StatusDelivered, ports.StatusDelivered, ports.StatusDelivered}, ports.StatusDelivered},
		{"mixed final is the non-failed state", []ports.MessageStatus{ports.StatusBounced, ports.StatusDelivered, ports.StatusFailed}, ports.StatusDelivered},
		{"all bounced", []ports.MessageStatus{ports.StatusBounced, ports.StatusBounced, ports.StatusBounced}, ports.StatusBounced},
		{"all failed", []ports.MessageStatus{ports.StatusFailed, ports.StatusFailed, ports.StatusFailed}, ports.StatusFailed},
		{"bounced and failed", []ports.MessageStatus{ports.StatusFailed, ports.StatusBounced, ports.StatusFailed}, ports.StatusBounced},
		{"failed over cancelled", []ports.MessageStatus{ports.StatusCancelled, ports.StatusFailed, ports.StatusCancelled}, ports.StatusFailed},
		{"engagement after delivery", []ports.MessageStatus{ports.StatusClicked, ports.StatusOpened, ports.StatusComplained}, ports.StatusOpened},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := f.newSend(t, "a@example.org", "b@example.org", "c@example.org")
			id := f.mustInsert(t, nm)
			a := ports.DeliveryApplication{JobID: newV7(), OrganizationID: f.org.ID, MessageID: id, Recipients: map[string]ports.MessageStatus{}}
			for i, st := range tc.set {
				if st != "" {
					a.Recipients[nm.Message.Recipients[i].ID] = st
				}
			}
			if applied, err := s.ApplyDelivery(ctx, a); err != nil || !applied {
				t.Fatalf("ApplyDelivery = %v, %v", applied, err)
			}
			m, err := s.GetMessage(ctx, f.org.ID, id)
			if err != nil || m.Status != tc.want {
				t.Fatalf("message status = %q (%v), want %q", m.Status, err, tc.want)
			}
		})
	}
}

// TestApplyDelivery_ConcurrentJobsOfOneMessage: two jobs of one message (two recipient domains) applied at
// once still leave the message delivered, because each application sees the other's recipients.
func TestApplyDelivery_ConcurrentJobsOfOneMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	for range 10 {
		nm := f.newSend(t, "a@one.example", "b@two.example")
		id := f.mustInsert(t, nm)
		var wg sync.WaitGroup
		for _, r := range nm.Message.Recipients {
			wg.Go(func() {
				a := ports.DeliveryApplication{JobID: newV7(), OrganizationID: f.org.ID, MessageID: id,
					Recipients: map[string]ports.MessageStatus{r.ID: ports.StatusDelivered}}
				if _, err := s.ApplyDelivery(ctx, a); err != nil {
					t.Errorf("ApplyDelivery: %v", err)
				}
			})
		}
		wg.Wait()
		if m, _ := s.GetMessage(ctx, f.org.ID, id); m.Status != ports.StatusDelivered {
			t.Fatalf("message after both jobs = %q, want delivered", m.Status)
		}
	}
}

func TestCrossOrganization_Delivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := newSendFixture(t, s)
	b := newSendFixture(t, s)
	nm := a.newSend(t, "x@example.org")
	id := a.mustInsert(t, nm)

	app := deliveredApplication(nm.Message, baseTime)
	app.OrganizationID = b.org.ID
	applied, err := s.ApplyDelivery(ctx, app)
	requireCode(t, err, ports.CodeNotFound)
	if applied {
		t.Fatal("B applied a delivery to A's message")
	}
	m, _ := s.GetMessage(ctx, a.org.ID, id)
	if m.Status != ports.StatusQueued || m.Recipients[0].Status != ports.StatusQueued || len(m.Events) != 1 {
		t.Fatalf("A's message after B's attempt = %+v", m)
	}
	// The refused attempt did not spend the job id: A's own report of it still applies.
	app.OrganizationID = a.org.ID
	if applied, err := s.ApplyDelivery(ctx, app); err != nil || !applied {
		t.Fatalf("A's report = %v, %v", applied, err)
	}
}
