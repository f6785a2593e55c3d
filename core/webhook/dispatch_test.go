package webhook

import (
	"testing"

	"github.com/postmill/postmill/ports"
)

func due(endpointID, deliveryID string) ports.DueDelivery {
	return ports.DueDelivery{
		Delivery: ports.WebhookDelivery{ID: deliveryID, EndpointID: endpointID},
		Endpoint: ports.WebhookEndpoint{ID: endpointID},
		Lease:    "lease-" + deliveryID,
	}
}

func TestSlotsAdmit(t *testing.T) {
	t.Parallel()
	// inFlight 4, perEndpoint 2, backlog 3: endpoint a takes 2 slots and queues a third delivery (which
	// counts against the process's 4); its fourth is dropped (backlog); b starts in the last place; then the
	// process is full and b2 and c are dropped.
	s := newSlots(4, 2, 3)
	steps := []struct {
		d    ports.DueDelivery
		want admission
		free int
	}{
		{due("a", "a1"), admitStart, 3},
		{due("a", "a2"), admitStart, 2},
		{due("a", "a3"), admitWait, 1},
		{due("a", "a4"), admitDrop, 1},
		{due("b", "b1"), admitStart, 0},
		{due("b", "b2"), admitDrop, 0},
		{due("c", "c1"), admitDrop, 0},
	}
	for i, st := range steps {
		if got := s.admit(st.d); got != st.want {
			t.Fatalf("step %d: admit(%s) = %d, want %d", i, st.d.Delivery.ID, got, st.want)
		}
		if got := s.free(); got != st.free {
			t.Fatalf("step %d: free = %d, want %d", i, got, st.free)
		}
	}
	if _, ok := s.endpoints["c"]; ok {
		t.Fatal("dropped endpoint c kept an entry")
	}
}

func TestSlotsReleaseHandsOverInOrder(t *testing.T) {
	t.Parallel()
	s := newSlots(4, 1, 10)
	for _, id := range []string{"a1", "a2", "a3"} {
		s.admit(due("a", id))
	}
	if s.free() != 1 {
		t.Fatalf("free = %d, want 1 (queued deliveries count against the process)", s.free())
	}
	for i, want := range []string{"a2", "a3"} {
		next, ok := s.release("a")
		if !ok || next.Delivery.ID != want || next.Lease != "lease-"+want {
			t.Fatalf("release = %+v, %v; want %s", next, ok, want)
		}
		if s.free() != 2+i {
			t.Fatalf("free = %d after a hand-over, want %d", s.free(), 2+i)
		}
	}
	if _, ok := s.release("a"); ok {
		t.Fatal("release handed over from an empty queue")
	}
	if s.free() != 4 || len(s.endpoints) != 0 {
		t.Fatalf("free = %d, endpoints = %v; want 4 and none", s.free(), s.endpoints)
	}
	if _, ok := s.release("a"); ok || s.free() != 4 {
		t.Fatal("releasing an idle endpoint changed the accounting")
	}
}

func TestSlotsStop(t *testing.T) {
	t.Parallel()
	s := newSlots(8, 1, 10)
	s.admit(due("a", "a1"))
	s.admit(due("a", "a2"))
	s.admit(due("a", "a3"))
	s.admit(due("b", "b1"))
	if dropped := s.stop(); len(dropped) != 2 || dropped[0].Delivery.ID != "a2" || dropped[1].Delivery.ID != "a3" {
		t.Fatalf("stop dropped %+v, want a2 and a3", dropped)
	}
	if got := s.admit(due("c", "c1")); got != admitDrop {
		t.Fatalf("admit after stop = %d, want drop", got)
	}
	if _, ok := s.release("a"); ok {
		t.Fatal("release after stop handed over a queued delivery")
	}
	s.release("b")
	if s.free() != 8 || len(s.endpoints) != 0 {
		t.Fatalf("free = %d, endpoints = %v after every attempt ended", s.free(), s.endpoints)
	}
}

func TestSlotsBacklogAtLeastPerEndpoint(t *testing.T) {
	t.Parallel()
	s := newSlots(8, 4, 1)
	for i := range 4 {
		if got := s.admit(due("a", string(rune('0'+i)))); got != admitStart {
			t.Fatalf("admit %d = %d, want start", i, got)
		}
	}
}

func TestDroppedDeliveryIsHandedBackAtOnce(t *testing.T) {
	t.Parallel()
	results := make(chan ports.WebhookAttempt, 1)
	d := &dispatcher{results: results, slots: newSlots(1, 1, 1), freed: make(chan struct{}, 1)}
	d.slots.admit(due("a", "a1")) // fills the process
	dd := due("b", "b1")
	dd.Delivery.Status, dd.Delivery.Attempts, dd.Delivery.ResponseCode = ports.WebhookFailed, 2, 503
	d.submit(dd)
	got := <-results
	want := ports.WebhookAttempt{DeliveryID: "b1", Lease: "lease-b1", Status: ports.WebhookFailed, Attempts: 2, ResponseCode: 503}
	if got.DeliveryID != want.DeliveryID || got.Lease != want.Lease || got.Status != want.Status ||
		got.Attempts != want.Attempts || got.ResponseCode != want.ResponseCode || got.NextRetryAt != nil || got.DeliveredAt != nil {
		t.Fatalf("handed back %+v, want %+v (unchanged, no next attempt time)", got, want)
	}
	if !d.handedBack.Load() {
		t.Fatal("the claim loop is not told to pause after a hand-back")
	}
}
