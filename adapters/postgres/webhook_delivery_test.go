package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestClaimDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	e := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered, ports.EventEmailBounced)
	off := newEndpoint(t, a.org.ID, baseTime, ports.EventEmailDelivered)
	off.Enabled = false
	if err := s.InsertEndpoint(ctx, off); err != nil {
		t.Fatal(err)
	}
	turnedOff := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)

	now := baseTime.Add(time.Hour)
	failedDue := mustDelivery(t, s, e, ports.WebhookFailed, ptr(now.Add(-time.Minute)), baseTime)
	pendingDue := mustDelivery(t, s, e, ports.WebhookPending, ptr(now), baseTime)
	notYet := mustDelivery(t, s, e, ports.WebhookFailed, ptr(now.Add(time.Second)), baseTime)
	mustDelivery(t, s, e, ports.WebhookPending, nil, baseTime)                             // never due (a test delivery)
	mustDelivery(t, s, e, ports.WebhookDelivered, nil, baseTime)                           // done
	mustDelivery(t, s, e, ports.WebhookDead, ptr(now.Add(-time.Hour)), baseTime)           // done, whatever its time
	mustDelivery(t, s, e, ports.WebhookBlocked, ptr(now.Add(-time.Hour)), baseTime)        // done
	mustDelivery(t, s, off, ports.WebhookPending, ptr(now.Add(-time.Hour)), baseTime)      // endpoint disabled
	mustDelivery(t, s, turnedOff, ports.WebhookFailed, ptr(now.Add(-time.Hour)), baseTime) // disabled below
	mustExec(t, s, `UPDATE webhook_endpoints SET enabled = false WHERE id = $1`, turnedOff.ID)

	leaseUntil := now.Add(time.Minute)
	claimed, err := s.ClaimDue(ctx, now, leaseUntil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := claimedIDs(claimed); !slices.Equal(got, []string{failedDue.ID, pendingDue.ID}) {
		t.Fatalf("ClaimDue = %v, want %v (earliest due first)", got, []string{failedDue.ID, pendingDue.ID})
	}
	c := claimed[0]
	if c.Lease == "" || c.Lease == claimed[1].Lease {
		t.Fatalf("leases %q and %q, want distinct tokens", c.Lease, claimed[1].Lease)
	}
	if c.Delivery.Status != ports.WebhookFailed || c.Delivery.EventID != failedDue.EventID ||
		string(c.Delivery.Payload) != string(failedDue.Payload) || c.Delivery.OrganizationID != a.org.ID {
		t.Fatalf("claimed delivery = %+v, want %+v", c.Delivery, failedDue)
	}
	requireTime(t, "nextRetryAt", c.Delivery.NextRetryAt, now.Add(-time.Minute))
	if c.Endpoint.ID != e.ID || c.Endpoint.URL != e.URL || string(c.Endpoint.Secret) != string(e.Secret) ||
		!c.Endpoint.Enabled || !slices.Equal(c.Endpoint.EventTypes, e.EventTypes) || c.Endpoint.OrganizationID != a.org.ID {
		t.Fatalf("claimed endpoint = %+v, want %+v", c.Endpoint, e)
	}
	requireTime(t, "endpoint createdAt", &c.Endpoint.CreatedAt, e.CreatedAt)

	// While leased, nobody else gets them, even at the last instant of the lease; what has become due
	// meanwhile is claimed.
	if again, err := s.ClaimDue(ctx, leaseUntil, leaseUntil, 10); err != nil || !slices.Equal(claimedIDs(again), []string{notYet.ID}) {
		t.Fatalf("ClaimDue during the lease = %v (%v), want only %s, due since", claimedIDs(again), err, notYet.ID)
	}
	// Once the lease has passed, they are due again under new leases.
	later := leaseUntil.Add(time.Millisecond)
	again, err := s.ClaimDue(ctx, later, later.Add(time.Minute), 1)
	if err != nil || len(again) != 1 || again[0].Delivery.ID != failedDue.ID || again[0].Lease == c.Lease {
		t.Fatalf("ClaimDue after the lease = %+v (%v), want %s under a new lease (limit 1)", again, err, failedDue.ID)
	}
	if n, err := s.ClaimDue(ctx, now, leaseUntil, 0); err != nil || len(n) != 0 {
		t.Fatalf("ClaimDue with limit 0 = %v, %v", n, err)
	}
}

// TestClaimDue_Concurrent: four dispatchers never hold the same delivery, and together take them all.
func TestClaimDue_Concurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	mustEvents(t, s, a.org.ID, ports.EventEmailDelivered, 400)
	if n, err := s.FanOut(ctx, baseTime, 1000, payloadsOf); err != nil || n != 400 {
		t.Fatalf("FanOut = %d, %v", n, err)
	}

	var mu sync.Mutex
	claims := map[string]int{}
	var total atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				due, err := s.ClaimDue(ctx, baseTime, baseTime.Add(time.Minute), 9)
				if err != nil {
					t.Errorf("ClaimDue: %v", err)
					return
				}
				if len(due) == 0 {
					return
				}
				mu.Lock()
				for _, d := range due {
					claims[d.Delivery.ID]++
				}
				over := total.Add(int64(len(due))) > 400
				mu.Unlock()
				if over {
					t.Errorf("more claims than deliveries")
					return
				}
			}
		})
	}
	wg.Wait()
	if len(claims) != 400 {
		t.Fatalf("claimed %d distinct deliveries, want 400", len(claims))
	}
	for id, n := range claims {
		if n != 1 {
			t.Fatalf("delivery %s claimed %d times", id, n)
		}
	}
}

func TestRecordAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	e := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	now := baseTime.Add(time.Hour)
	var ds []ports.WebhookDelivery
	for range 5 {
		ds = append(ds, mustDelivery(t, s, e, ports.WebhookPending, ptr(now), baseTime))
	}
	claimed, err := s.ClaimDue(ctx, now, now.Add(time.Minute), 10)
	if err != nil || len(claimed) != 5 {
		t.Fatalf("ClaimDue = %d, %v", len(claimed), err)
	}
	lease := map[string]string{}
	for _, c := range claimed {
		lease[c.Delivery.ID] = c.Lease
	}

	retryAt := now.Add(15 * time.Minute)
	deliveredAt := now.Add(time.Second)
	err = s.RecordAttempts(ctx, []ports.WebhookAttempt{
		{DeliveryID: ds[0].ID, Lease: lease[ds[0].ID], Status: ports.WebhookDelivered, Attempts: 1, ResponseCode: 204, DeliveredAt: &deliveredAt},
		{DeliveryID: ds[1].ID, Lease: lease[ds[1].ID], Status: ports.WebhookFailed, Attempts: 1, ResponseCode: 503, NextRetryAt: &retryAt, BlockedReason: "only for blocked"},
		{DeliveryID: ds[2].ID, Lease: lease[ds[2].ID], Status: ports.WebhookBlocked, Attempts: 1, NextRetryAt: &retryAt, BlockedReason: blockedWhy},
		{DeliveryID: ds[3].ID, Lease: "stale-" + lease[ds[3].ID], Status: ports.WebhookDead, Attempts: 5, ResponseCode: 500},
		{DeliveryID: "not-a-uuid", Lease: "x", Status: ports.WebhookDelivered, Attempts: 1},
		{DeliveryID: newV7(), Lease: "x", Status: ports.WebhookDelivered, Attempts: 1},
	})
	if err != nil {
		t.Fatalf("RecordAttempts: %v", err)
	}
	d0 := mustGetDelivery(t, s, a.org.ID, ds[0].ID)
	if d0.Status != ports.WebhookDelivered || d0.Attempts != 1 || d0.ResponseCode != 204 || d0.NextRetryAt != nil {
		t.Fatalf("delivered = %+v", d0)
	}
	requireTime(t, "deliveredAt", d0.DeliveredAt, deliveredAt)
	d1 := mustGetDelivery(t, s, a.org.ID, ds[1].ID)
	if d1.Status != ports.WebhookFailed || d1.Attempts != 1 || d1.ResponseCode != 503 || d1.DeliveredAt != nil || d1.BlockedReason != "" {
		t.Fatalf("failed = %+v", d1)
	}
	requireTime(t, "nextRetryAt", d1.NextRetryAt, retryAt)
	if d2 := mustGetDelivery(t, s, a.org.ID, ds[2].ID); d2.Status != ports.WebhookBlocked || d2.NextRetryAt != nil || d2.BlockedReason != blockedWhy {
		t.Fatalf("blocked = %+v, want no next retry whatever the result said, and the reason", d2)
	}
	if recent, err := s.ListRecentDeliveries(ctx, a.org.ID, 10); err != nil || !hasBlockedReason(recent, ds[2].ID, blockedWhy) {
		t.Fatalf("ListRecentDeliveries = %+v, %v; want the blocked delivery with its reason", recent, err)
	}
	if d3 := mustGetDelivery(t, s, a.org.ID, ds[3].ID); d3.Status != ports.WebhookPending || d3.Attempts != 0 {
		t.Fatalf("delivery recorded under a stale lease = %+v, want it untouched", d3)
	}

	// The failed one is due at its retry time, not before; the delivered and blocked ones never again. The
	// two still leased come back once their lease has passed.
	if due, err := s.ClaimDue(ctx, retryAt.Add(-time.Millisecond), retryAt, 10); err != nil ||
		!sameIDs(claimedIDs(due), ds[3].ID, ds[4].ID) {
		t.Fatalf("ClaimDue before the retry time = %v (%v), want only the two whose lease passed", claimedIDs(due), err)
	}
	due, err := s.ClaimDue(ctx, retryAt, retryAt.Add(time.Minute), 10)
	if err != nil || len(due) != 1 || due[0].Delivery.ID != ds[1].ID {
		t.Fatalf("ClaimDue at the retry time = %v (%v), want %s", claimedIDs(due), err, ds[1].ID)
	}
	// A dispatcher hands back a delivery it did not attempt: a failed result without a retry time keeps
	// the delivery due at its previous time.
	handBack := ports.WebhookAttempt{DeliveryID: ds[1].ID, Lease: due[0].Lease, Status: ports.WebhookFailed, Attempts: 1, ResponseCode: 503}
	if err := s.RecordAttempts(ctx, []ports.WebhookAttempt{handBack}); err != nil {
		t.Fatal(err)
	}
	if d1 := mustGetDelivery(t, s, a.org.ID, ds[1].ID); d1.NextRetryAt == nil || !d1.NextRetryAt.Equal(retryAt) {
		t.Fatalf("handed-back delivery's next retry = %v, want its previous due time %v", d1.NextRetryAt, retryAt)
	}
	if err := s.RecordAttempts(ctx, nil); err != nil {
		t.Fatalf("RecordAttempts(nil) = %v", err)
	}
}

// blockedWhy is a refusal as the webhook sender words it.
const blockedWhy = "10.0.0.5 is a private address (10.0.0.0/8, RFC 1918); an operator can allow it with POSTMILL_WEBHOOK_ALLOW_NETS=10.0.0.5"

func hasBlockedReason(ds []ports.WebhookDelivery, id, reason string) bool {
	for _, d := range ds {
		if d.ID == id {
			return d.BlockedReason == reason
		}
	}
	return false
}

func sameIDs(got []string, want ...string) bool {
	return slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want)))
}

// TestRecordAttempts_NeedsALease: a result without a lease, or for a delivery nobody claimed, changes
// nothing; a test delivery is written with its outcome and, failed, is retried like any other.
func TestRecordAttempts_NeedsALease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	e := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailBounced)
	retryAt := baseTime.Add(15 * time.Minute)
	testDelivery := ports.WebhookDelivery{
		ID: newV7(), OrganizationID: a.org.ID, EndpointID: e.ID, EventID: "evt_test_" + newID(),
		EventType: ports.EventEmailDelivered, Status: ports.WebhookFailed, Attempts: 1, ResponseCode: 500,
		NextRetryAt: &retryAt, CreatedAt: baseTime,
		Payload: []byte(`{"id":"evt_test","data":{"test":true,"message_id":null}}`),
	}
	if err := s.InsertDelivery(ctx, testDelivery); err != nil {
		t.Fatal(err)
	}
	got := mustGetDelivery(t, s, a.org.ID, testDelivery.ID)
	if got.Status != ports.WebhookFailed || got.Attempts != 1 || got.ResponseCode != 500 {
		t.Fatalf("test delivery = %+v", got)
	}
	requireTime(t, "nextRetryAt", got.NextRetryAt, retryAt)
	leased := mustDelivery(t, s, e, ports.WebhookPending, ptr(baseTime), baseTime)
	if due, err := s.ClaimDue(ctx, baseTime, baseTime.Add(time.Hour), 10); err != nil || len(due) != 1 || due[0].Delivery.ID != leased.ID {
		t.Fatalf("ClaimDue = %v (%v), want only the due delivery", claimedIDs(due), err)
	}
	err := s.RecordAttempts(ctx, []ports.WebhookAttempt{
		{DeliveryID: testDelivery.ID, Status: ports.WebhookDelivered, Attempts: 2, ResponseCode: 200, DeliveredAt: ptr(baseTime)},
		{DeliveryID: leased.ID, Status: ports.WebhookDelivered, Attempts: 1, ResponseCode: 200, DeliveredAt: ptr(baseTime)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := mustGetDelivery(t, s, a.org.ID, testDelivery.ID); d.Status != ports.WebhookFailed || d.Attempts != 1 {
		t.Fatalf("unclaimed delivery recorded without a lease = %+v", d)
	}
	if d := mustGetDelivery(t, s, a.org.ID, leased.ID); d.Status != ports.WebhookPending || d.Attempts != 0 {
		t.Fatalf("leased delivery recorded without its lease = %+v", d)
	}
	if due, err := s.ClaimDue(ctx, retryAt, retryAt.Add(time.Hour), 10); err != nil || len(due) != 1 || due[0].Delivery.ID != testDelivery.ID {
		t.Fatalf("ClaimDue at the test delivery's retry time = %v (%v), want it", claimedIDs(due), err)
	}
}

// TestInsertDelivery_BlockedReason: a test delivery written after a blocked attempt keeps the guard's
// reason; a delivery in another state stores none, whatever it carried.
func TestInsertDelivery_BlockedReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	e := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	base := ports.WebhookDelivery{
		OrganizationID: a.org.ID, EndpointID: e.ID, EventType: ports.EventEmailDelivered, Attempts: 1,
		CreatedAt: baseTime, Payload: []byte("{}"), BlockedReason: blockedWhy,
	}
	blocked, delivered := base, base
	blocked.ID, blocked.EventID, blocked.Status = newV7(), "evt_test_"+newID(), ports.WebhookBlocked
	delivered.ID, delivered.EventID, delivered.Status = newV7(), "evt_test_"+newID(), ports.WebhookDelivered
	for _, d := range []ports.WebhookDelivery{blocked, delivered} {
		if err := s.InsertDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustGetDelivery(t, s, a.org.ID, blocked.ID); got.BlockedReason != blockedWhy {
		t.Fatalf("blocked test delivery's reason = %q, want %q", got.BlockedReason, blockedWhy)
	}
	if got := mustGetDelivery(t, s, a.org.ID, delivered.ID); got.BlockedReason != "" {
		t.Fatalf("delivered test delivery's reason = %q, want none", got.BlockedReason)
	}
}

func TestInsertDelivery_Replay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	e := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	original := mustEvents(t, s, a.org.ID, ports.EventEmailDelivered, 1)[0]
	replay := ports.WebhookDelivery{
		ID: newV7(), OrganizationID: a.org.ID, EndpointID: e.ID, EventID: "evt_replay_" + newID(),
		EventType: ports.EventEmailDelivered, Status: ports.WebhookPending, NextRetryAt: ptr(baseTime),
		CreatedAt: baseTime, OriginalEventID: original,
		Payload: []byte("{\"id\":\"evt_replay\",\n \"data\":{\"original_event_id\":\"" + original + "\"}}"),
	}
	if err := s.InsertDelivery(ctx, replay); err != nil {
		t.Fatal(err)
	}
	got := mustGetDelivery(t, s, a.org.ID, replay.ID)
	if got.EventID != replay.EventID || got.OriginalEventID != original || string(got.Payload) != string(replay.Payload) ||
		got.EndpointID != e.ID || got.Status != ports.WebhookPending || got.Attempts != 0 {
		t.Fatalf("replay delivery = %+v, want %+v", got, replay)
	}
	requireTime(t, "nextRetryAt", got.NextRetryAt, baseTime)
	if due, err := s.ClaimDue(ctx, baseTime, baseTime.Add(time.Minute), 10); err != nil || len(due) != 1 ||
		due[0].Delivery.OriginalEventID != original {
		t.Fatalf("the replay is not due at once: %+v (%v)", due, err)
	}
	requireConflict(t, s.InsertDelivery(ctx, replay), "webhook_deliveries_pkey")

	if err := s.DeleteEndpoint(ctx, a.org.ID, e.ID); err != nil {
		t.Fatal(err)
	}
	replay.ID = newV7()
	requireCode(t, s.InsertDelivery(ctx, replay), ports.CodeNotFound)
}

// TestDeleteEndpoint_Cascades: an endpoint's deliveries go with it, others stay, and a dispatcher's result
// for a deleted delivery is ignored.
func TestDeleteEndpoint_Cascades(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	gone := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailSent)
	kept := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailSent)
	mustEvents(t, s, a.org.ID, ports.EventEmailSent, 3)
	if n, err := s.FanOut(ctx, baseTime, 10, payloadsOf); n != 3 || err != nil {
		t.Fatalf("FanOut = %d, %v", n, err)
	}
	due, err := s.ClaimDue(ctx, baseTime, baseTime.Add(time.Minute), 100)
	if err != nil || len(due) != 6 {
		t.Fatalf("ClaimDue = %d, %v", len(due), err)
	}
	if err := s.DeleteEndpoint(ctx, a.org.ID, gone.ID); err != nil {
		t.Fatal(err)
	}
	byEndpoint := deliveriesByEndpoint(t, s, a.org.ID)
	if len(byEndpoint[gone.ID]) != 0 || len(byEndpoint[kept.ID]) != 3 {
		t.Fatalf("after delete: %d deliveries of the deleted endpoint, %d of the other; want 0 and 3",
			len(byEndpoint[gone.ID]), len(byEndpoint[kept.ID]))
	}
	var results []ports.WebhookAttempt
	for _, d := range due {
		results = append(results, ports.WebhookAttempt{DeliveryID: d.Delivery.ID, Lease: d.Lease, Status: ports.WebhookDelivered,
			Attempts: 1, ResponseCode: 200, DeliveredAt: ptr(baseTime)})
		if d.Endpoint.ID == gone.ID {
			_, err := s.GetDelivery(ctx, a.org.ID, d.Delivery.ID)
			requireCode(t, err, ports.CodeNotFound)
		}
	}
	if err := s.RecordAttempts(ctx, results); err != nil {
		t.Fatalf("RecordAttempts with deleted deliveries: %v", err)
	}
	for _, d := range deliveriesByEndpoint(t, s, a.org.ID)[kept.ID] {
		if d.Status != ports.WebhookDelivered {
			t.Fatalf("kept endpoint's delivery = %+v", d)
		}
	}
}

func TestListRecentDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	e1 := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailSent)
	e2 := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailSent)
	var want []string // newest first
	for i := range 4 {
		e := e1
		if i%2 == 1 {
			e = e2
		}
		d := mustDelivery(t, s, e, ports.WebhookPending, nil, baseTime.Add(time.Duration(i)*time.Minute))
		want = append([]string{d.ID}, want...)
	}
	// Two at the newest instant: the later id first.
	tie1 := mustDelivery(t, s, e1, ports.WebhookPending, nil, baseTime.Add(time.Hour))
	tie2 := mustDelivery(t, s, e2, ports.WebhookPending, nil, baseTime.Add(time.Hour))
	want = append([]string{tie2.ID, tie1.ID}, want...)

	got, err := s.ListRecentDeliveries(ctx, a.org.ID, 100)
	if err != nil || !slices.Equal(deliveryIDs(got), want) {
		t.Fatalf("ListRecentDeliveries = %v (%v), want %v", deliveryIDs(got), err, want)
	}
	got, err = s.ListRecentDeliveries(ctx, a.org.ID, 3)
	if err != nil || !slices.Equal(deliveryIDs(got), want[:3]) {
		t.Fatalf("ListRecentDeliveries(limit 3) = %v (%v), want %v", deliveryIDs(got), err, want[:3])
	}
	if got, err := s.ListRecentDeliveries(ctx, a.org.ID, 0); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("ListRecentDeliveries(limit 0) = %#v, %v", got, err)
	}
}

func deliveryIDs(ds []ports.WebhookDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// TestCrossOrganization_Webhooks: organization B cannot see, change or delete A's endpoints and deliveries,
// nor attach a delivery to A's endpoint; the answers are those for ids that do not exist.
func TestCrossOrganization_Webhooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	e := mustEndpoint(t, s, a.org.ID, baseTime, ports.EventEmailDelivered)
	d := mustDelivery(t, s, e, ports.WebhookPending, nil, baseTime)

	if list, err := dataOf(s.ListEndpoints(ctx, b.org.ID, ports.Unpaged())); err != nil || len(list) != 0 {
		t.Fatalf("B lists %d endpoints (%v), want none", len(list), err)
	}
	_, err := s.GetEndpoint(ctx, b.org.ID, e.ID)
	requireCode(t, err, ports.CodeNotFound)
	_, err = s.SetEndpointSecret(ctx, b.org.ID, e.ID, []byte("sealed-by-b"))
	requireCode(t, err, ports.CodeNotFound)
	requireCode(t, s.DeleteEndpoint(ctx, b.org.ID, e.ID), ports.CodeNotFound)
	_, err = s.GetDelivery(ctx, b.org.ID, d.ID)
	requireCode(t, err, ports.CodeNotFound)
	if list, err := s.ListRecentDeliveries(ctx, b.org.ID, 100); err != nil || len(list) != 0 {
		t.Fatalf("B lists %d deliveries (%v), want none", len(list), err)
	}
	intruder := d
	intruder.ID = newV7()
	intruder.OrganizationID = b.org.ID
	requireCode(t, s.InsertDelivery(ctx, intruder), ports.CodeNotFound)

	got, err := s.GetEndpoint(ctx, a.org.ID, e.ID)
	if err != nil || string(got.Secret) != string(e.Secret) {
		t.Fatalf("A's endpoint after B's attempts = %+v (%v)", got, err)
	}
	if list, err := s.ListRecentDeliveries(ctx, a.org.ID, 100); err != nil || len(list) != 1 || list[0].ID != d.ID {
		t.Fatalf("A's deliveries after B's attempts = %v (%v)", deliveryIDs(list), err)
	}
}

// BenchmarkWebhookPipeline measures the store's share of webhook throughput: b.N events of one
// organization with one subscribed endpoint go through FanOut (batches of 1000, the core's default),
// ClaimDue (256) and RecordAttempts (every attempt delivered), with fan-out and dispatch running side by
// side as in the core. One op is one delivery; run with -benchtime=10000x for the 10,000-event figure.
// "dispatchers-4" runs two fan-outs and four dispatchers, as several core processes would.
func BenchmarkWebhookPipeline(b *testing.B) {
	for _, workers := range []struct{ fanOuts, dispatchers int }{{1, 1}, {2, 4}} {
		b.Run(fmt.Sprintf("dispatchers-%d", workers.dispatchers), func(b *testing.B) {
			ctx := context.Background()
			s := pgtest.Store(b)
			a := mustSignup(b, s)
			mustEndpoint(b, s, a.org.ID, baseTime, ports.EventEmailDelivered)
			mustEvents(b, s, a.org.ID, ports.EventEmailDelivered, b.N)
			mustExec(b, s, `VACUUM ANALYZE events`)
			now := time.Now()

			b.ResetTimer()
			var fanned, recorded atomic.Int64
			var wg sync.WaitGroup
			for range workers.fanOuts {
				wg.Go(func() {
					for fanned.Load() < int64(b.N) {
						n, err := s.FanOut(ctx, now, 1000, payloadsOf)
						if err != nil {
							b.Error(err)
							return
						}
						fanned.Add(int64(n))
					}
				})
			}
			for range workers.dispatchers {
				wg.Go(func() {
					for recorded.Load() < int64(b.N) {
						due, err := s.ClaimDue(ctx, now, now.Add(time.Minute), 256)
						if err != nil {
							b.Error(err)
							return
						}
						if len(due) == 0 {
							time.Sleep(time.Millisecond)
							continue
						}
						results := make([]ports.WebhookAttempt, len(due))
						for i, d := range due {
							results[i] = ports.WebhookAttempt{DeliveryID: d.Delivery.ID, Lease: d.Lease,
								Status: ports.WebhookDelivered, Attempts: 1, ResponseCode: 200, DeliveredAt: &now}
						}
						if err := s.RecordAttempts(ctx, results); err != nil {
							b.Error(err)
							return
						}
						recorded.Add(int64(len(due)))
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
			if n := countRows(b, s, `SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`); n != b.N {
				b.Fatalf("%d deliveries delivered, want %d", n, b.N)
			}
		})
	}
}
