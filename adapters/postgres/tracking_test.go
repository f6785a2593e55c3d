package postgres_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestRecordEngagement_OpenedOnce races opens of one message: exactly one email.opened is recorded, the
// recipient moves delivered → opened, and a click then moves it on and is recorded every time.
func TestRecordEngagement_OpenedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	nm := f.newSend(t, "reader@example.com")
	id := f.mustInsert(t, nm)
	rcpt := nm.Message.Recipients[0]
	mustExec(t, s, `UPDATE recipients SET status = 'delivered' WHERE id = $1`, rcpt.ID)

	var recorded atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.RecordEngagement(ctx, ports.Event{ID: newV7(), OrganizationID: f.org.ID, Type: ports.EventEmailOpened, MessageID: id, RecipientID: rcpt.ID, OccurredAt: baseTime}, true)
			if err != nil {
				t.Errorf("RecordEngagement: %v", err)
			}
			if ok {
				recorded.Add(1)
			}
		}()
	}
	wg.Wait()
	if recorded.Load() != 1 {
		t.Fatalf("%d opens recorded, want exactly 1", recorded.Load())
	}
	for range 2 {
		ok, err := s.RecordEngagement(ctx, ports.Event{ID: newV7(), OrganizationID: f.org.ID, Type: ports.EventEmailClicked, MessageID: id, RecipientID: rcpt.ID, URL: "https://example.com/a", LinkID: "0", OccurredAt: baseTime}, false)
		if err != nil || !ok {
			t.Fatalf("click: %v (%v)", ok, err)
		}
	}
	m, err := s.GetMessage(ctx, f.org.ID, id)
	if err != nil || m.Status != ports.StatusClicked || m.Recipients[0].Status != ports.StatusClicked {
		t.Fatalf("after open and clicks: status %q recipient %q (%v)", m.Status, m.Recipients[0].Status, err)
	}
	counts := map[string]int{}
	for _, e := range m.Events {
		counts[e.Type]++
	}
	if counts[ports.EventEmailOpened] != 1 || counts[ports.EventEmailClicked] != 2 {
		t.Fatalf("event counts = %v", counts)
	}
	var url, link string
	if err := s.Pool().QueryRow(ctx, `SELECT url, link_id FROM events WHERE message_id = $1 AND type = 'email.clicked' LIMIT 1`, id).Scan(&url, &link); err != nil || url != "https://example.com/a" || link != "0" {
		t.Fatalf("stored click = %q %q (%v)", url, link, err)
	}

	html, err := s.MessageHTML(ctx, f.org.ID, id)
	if err != nil || html != nm.Message.HTML {
		t.Fatalf("MessageHTML = %q (%v)", html, err)
	}
	b := mustSignup(t, s)
	requireCode(t, firstErr(s.MessageHTML(ctx, b.org.ID, id)), ports.CodeNotFound)
	requireCode(t, firstErr(s.RecordEngagement(ctx, ports.Event{ID: newV7(), OrganizationID: b.org.ID, Type: ports.EventEmailOpened, MessageID: id, RecipientID: rcpt.ID, OccurredAt: baseTime}, true)), ports.CodeNotFound)
}

func TestSetDomainTracking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	d := mustDomain(t, s, a.org.ID)
	on, off := true, false

	got, err := s.SetDomainTracking(ctx, a.org.ID, d.ID, ports.TrackingSettings{OpenTracking: &on})
	if err != nil || !got.OpenTracking || got.ClickTracking || len(got.Records) == 0 {
		t.Fatalf("open on: %+v (%v)", got, err)
	}
	got, err = s.SetDomainTracking(ctx, a.org.ID, d.ID, ports.TrackingSettings{ClickTracking: &on})
	if err != nil || !got.OpenTracking || !got.ClickTracking {
		t.Fatalf("click on keeps open: %+v (%v)", got, err)
	}
	got, err = s.SetDomainTracking(ctx, a.org.ID, d.ID, ports.TrackingSettings{OpenTracking: &off})
	if err != nil || got.OpenTracking || !got.ClickTracking {
		t.Fatalf("open off keeps click: %+v (%v)", got, err)
	}
	byName, err := s.DomainByName(ctx, a.org.ID, d.Name)
	if err != nil || byName.OpenTracking || !byName.ClickTracking {
		t.Fatalf("DomainByName = %+v (%v)", byName, err)
	}
	requireCode(t, firstErr(s.SetDomainTracking(ctx, b.org.ID, d.ID, ports.TrackingSettings{OpenTracking: &on})), ports.CodeNotFound)
	if again, _ := s.GetDomain(ctx, a.org.ID, d.ID); again.OpenTracking {
		t.Fatal("B's attempt changed A's domain")
	}
}

// TestRecordEngagement_EveryRecipientMoves: the second recipient's first open writes no event (once per
// message) but still moves that recipient, so the message becomes opened when everyone opened.
func TestRecordEngagement_EveryRecipientMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	nm := f.newSend(t, "one@example.com", "two@example.com")
	id := f.mustInsert(t, nm)
	mustExec(t, s, `UPDATE recipients SET status = 'delivered' WHERE message_id = $1`, id)
	mustExec(t, s, `UPDATE messages SET status = 'delivered' WHERE id = $1`, id)
	open := func(r ports.Recipient) bool {
		t.Helper()
		ok, err := s.RecordEngagement(ctx, ports.Event{ID: newV7(), OrganizationID: f.org.ID, Type: ports.EventEmailOpened, MessageID: id, RecipientID: r.ID, OccurredAt: baseTime}, true)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !open(nm.Message.Recipients[0]) {
		t.Fatal("first open not recorded")
	}
	if m, _ := s.GetMessage(ctx, f.org.ID, id); m.Status != ports.StatusDelivered {
		t.Fatalf("one of two opened: message %q, want delivered", m.Status)
	}
	if open(nm.Message.Recipients[1]) {
		t.Fatal("a second email.opened was written for the message")
	}
	m, err := s.GetMessage(ctx, f.org.ID, id)
	if err != nil || m.Status != ports.StatusOpened || m.Recipients[1].Status != ports.StatusOpened {
		t.Fatalf("both opened: message %q, second recipient %q (%v)", m.Status, m.Recipients[1].Status, err)
	}
	if _, err := s.RecordEngagement(ctx, ports.Event{ID: newV7(), OrganizationID: f.org.ID, Type: "bogus", MessageID: id}, false); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("bogus event type: %v", err)
	}
}
