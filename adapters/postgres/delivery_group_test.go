package postgres_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// TestApplyDelivery_Group: applications written as one group are each applied once, each derives its own
// message's status, and a redelivered job in the same group (or a later one) applies nothing.
func TestApplyDelivery_Group(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)

	var msgs []ports.Message
	var apps []ports.DeliveryApplication
	for range 5 {
		nm := f.newSend(t, "a@example.org", "b@example.org")
		f.mustInsert(t, nm)
		msgs = append(msgs, nm.Message)
		a := deliveredApplication(nm.Message, baseTime)
		a.MessageStatus = "" // derived by the store
		apps = append(apps, a)
	}
	// The third message has only one of its recipients delivered: it stays queued.
	half := apps[2]
	half.Recipients = map[string]ports.MessageStatus{msgs[2].Recipients[0].ID: ports.StatusDelivered}
	half.Events = half.Events[:2]
	apps[2] = half
	// The first job comes twice (a redelivery racing its first report).
	group := append(apps, apps[0])

	results := s.WriteApplyGroup(ctx, group...)
	for i, r := range results {
		want := i < len(apps)
		if r.Err != nil || r.Applied != want {
			t.Fatalf("application %d = %v, %v; want %v, nil", i, r.Applied, r.Err, want)
		}
	}
	for i, m := range msgs {
		got, err := s.GetMessage(ctx, f.org.ID, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := ports.StatusDelivered
		if i == 2 {
			want = ports.StatusQueued
		}
		if got.Status != want {
			t.Errorf("message %d status = %q, want %q", i, got.Status, want)
		}
		wantEvents := 5 // queued, then sent and delivered per recipient
		if i == 2 {
			wantEvents = 3
		}
		if len(got.Events) != wantEvents {
			t.Errorf("message %d has %d events, want %d", i, len(got.Events), wantEvents)
		}
	}
	// Applied once: the same jobs again, grouped or alone, change nothing.
	for i, r := range s.WriteApplyGroup(ctx, apps...) {
		if r.Err != nil || r.Applied {
			t.Fatalf("second application %d = %v, %v; want false, nil", i, r.Applied, r.Err)
		}
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE organization_id = $1 AND type = 'email.delivered'`, f.org.ID); n != 9 {
		t.Fatalf("delivered events = %d, want 9", n)
	}
}

// TestApplyDelivery_GroupIsolatesFailures: an application for another organization's message and one the
// database refuses share a group with good ones; the good ones are applied, the others get their own
// errors, and neither spends its job id.
func TestApplyDelivery_GroupIsolatesFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	other := newSendFixture(t, s)

	good1 := f.newSend(t, "a@example.org")
	good2 := f.newSend(t, "b@example.org")
	foreign := other.newSend(t, "c@example.org")
	bad := f.newSend(t, "d@example.org")
	for _, nm := range []ports.NewMessage{good1, good2, bad} {
		f.mustInsert(t, nm)
	}
	other.mustInsert(t, foreign)

	crossOrg := deliveredApplication(foreign.Message, baseTime)
	crossOrg.OrganizationID = f.org.ID // f reports on other's message
	refused := deliveredApplication(bad.Message, baseTime)
	refused.MessageStatus = "no such status" // violates messages_status_check
	results := s.WriteApplyGroup(ctx,
		deliveredApplication(good1.Message, baseTime), crossOrg, refused, deliveredApplication(good2.Message, baseTime))

	if !results[0].Applied || results[0].Err != nil || !results[3].Applied || results[3].Err != nil {
		t.Fatalf("good applications = %+v, %+v", results[0], results[3])
	}
	requireCode(t, results[1].Err, ports.CodeNotFound)
	if results[2].Err == nil || results[2].Applied {
		t.Fatalf("refused application = %+v, want an error", results[2])
	}
	for _, nm := range []ports.NewMessage{good1, good2} {
		if m, _ := s.GetMessage(ctx, f.org.ID, nm.Message.ID); m.Status != ports.StatusDelivered {
			t.Errorf("good message %s = %q", nm.Message.ID, m.Status)
		}
	}
	if m, _ := s.GetMessage(ctx, f.org.ID, bad.Message.ID); m.Status != ports.StatusQueued || len(m.Events) != 1 {
		t.Errorf("refused message = %q with %d events; want it untouched", m.Status, len(m.Events))
	}
	// Without a failure of the whole group, the foreign message is not_found inside the group's transaction.
	good3 := f.newSend(t, "e@example.org")
	f.mustInsert(t, good3)
	results = s.WriteApplyGroup(ctx, crossOrg, deliveredApplication(good3.Message, baseTime))
	requireCode(t, results[0].Err, ports.CodeNotFound)
	if !results[1].Applied || results[1].Err != nil {
		t.Fatalf("good application beside a foreign one = %+v", results[1])
	}

	// Neither failure spent its job id: the right reports still apply.
	crossOrg.OrganizationID = other.org.ID
	refused.MessageStatus = ports.StatusDelivered
	for _, r := range s.WriteApplyGroup(ctx, crossOrg, refused) {
		if !r.Applied || r.Err != nil {
			t.Fatalf("corrected application = %+v", r)
		}
	}
}

// TestApplyDelivery_GroupJobsOfOneMessage: two jobs of one message in one group are written one after the
// other, so the second sees the first's recipients and the message ends delivered.
func TestApplyDelivery_GroupJobsOfOneMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	nm := f.newSend(t, "a@one.example", "b@two.example")
	id := f.mustInsert(t, nm)
	var apps []ports.DeliveryApplication
	for _, r := range nm.Message.Recipients {
		apps = append(apps, ports.DeliveryApplication{JobID: newV7(), OrganizationID: f.org.ID, MessageID: id,
			Recipients: map[string]ports.MessageStatus{r.ID: ports.StatusDelivered}})
	}
	for _, r := range s.WriteApplyGroup(ctx, apps...) {
		if !r.Applied || r.Err != nil {
			t.Fatalf("application = %+v", r)
		}
	}
	if m, _ := s.GetMessage(ctx, f.org.ID, id); m.Status != ports.StatusDelivered {
		t.Fatalf("message = %q, want delivered", m.Status)
	}
}

// TestApplyDelivery_ManyConcurrent: concurrent reports (grouped however they arrive) each apply once.
func TestApplyDelivery_ManyConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	var apps []ports.DeliveryApplication
	for range 40 {
		nm := f.newSend(t, "a@example.org")
		f.mustInsert(t, nm)
		apps = append(apps, deliveredApplication(nm.Message, baseTime))
	}
	var applied atomic.Int32
	var wg sync.WaitGroup
	for range 3 { // every job reported three times at once
		for _, a := range apps {
			wg.Go(func() {
				ok, err := s.ApplyDelivery(ctx, a)
				if err != nil {
					t.Errorf("ApplyDelivery: %v", err)
				}
				if ok {
					applied.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if applied.Load() != int32(len(apps)) {
		t.Fatalf("applied %d times, want %d", applied.Load(), len(apps))
	}
	if n := countRows(t, s, `SELECT count(*) FROM messages WHERE organization_id = $1 AND status = 'delivered'`, f.org.ID); n != len(apps) {
		t.Fatalf("delivered messages = %d, want %d", n, len(apps))
	}
}

// TestApplyDelivery_CallerGone: an application whose caller has gone before its group is written is not
// written, and answers with the caller's error.
func TestApplyDelivery_CallerGone(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	nm := f.newSend(t, "a@example.org")
	f.mustInsert(t, nm)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := s.WriteApplyGroup(ctx, deliveredApplication(nm.Message, baseTime)); r[0].Err != context.Canceled || r[0].Applied {
		t.Fatalf("result = %+v, want context.Canceled", r[0])
	}
	if m, _ := s.GetMessage(context.Background(), f.org.ID, nm.Message.ID); m.Status != ports.StatusQueued {
		t.Fatalf("message = %q, want queued", m.Status)
	}
}

// TestOutboundData_Group: a grouped read answers each caller with its own message, the same message to two
// callers, not_found to a caller of another organization or for a missing message, and falls back to one
// read each when the group fails as a whole.
func TestOutboundData_Group(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	other := newSendFixture(t, s)
	one := f.newSend(t, "a@one.example", "b@two.example")
	one.Message.Attachments = []ports.StoredAttachment{{ID: newV7(), Filename: "a.pdf", ContentType: "application/pdf", Size: 10, Key: "att/k"}}
	two := f.newSend(t, "c@example.org")
	f.mustInsert(t, one)
	f.mustInsert(t, two)

	rs := s.ReadOutboundGroup(ctx,
		[2]string{f.org.ID, one.Message.ID}, [2]string{f.org.ID, two.Message.ID}, [2]string{f.org.ID, one.Message.ID},
		[2]string{other.org.ID, one.Message.ID}, [2]string{f.org.ID, newV7()})
	for _, i := range []int{0, 2} {
		m, d := rs[i].Message, rs[i].Domain
		if rs[i].Err != nil || m.ID != one.Message.ID || len(m.Recipients) != 2 || m.Recipients[1].Address != "b@two.example" ||
			len(m.Attachments) != 1 || m.Attachments[0].Key != "att/k" || d.ID != f.dom.ID {
			t.Fatalf("read %d = %+v, %+v, %v", i, m, d, rs[i].Err)
		}
	}
	if m := rs[1].Message; rs[1].Err != nil || m.ID != two.Message.ID || len(m.Recipients) != 1 || len(m.Attachments) != 0 {
		t.Fatalf("read 1 = %+v, %v", m, rs[1].Err)
	}
	requireCode(t, rs[3].Err, ports.CodeNotFound)
	requireCode(t, rs[4].Err, ports.CodeNotFound)
	// Callers own what they are given.
	rs[0].Message.Recipients[0].Status = ports.StatusBounced
	if rs[2].Message.Recipients[0].Status != ports.StatusQueued {
		t.Fatal("two callers share one recipients slice")
	}

	// A malformed id fails the grouped statements; every other caller still gets its message.
	rs = s.ReadOutboundGroup(ctx, [2]string{f.org.ID, "not-a-uuid"}, [2]string{f.org.ID, two.Message.ID})
	if rs[0].Err == nil || rs[1].Err != nil || rs[1].Message.ID != two.Message.ID {
		t.Fatalf("reads = %+v", rs)
	}
}

// TestQueue_AckGroup: acks written as one statement are answered one by one; an ack whose lease was lost
// fails alone and leaves the job to its new holder.
func TestQueue_AckGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{PollInterval: 20 * time.Millisecond})
	if err := q.Publish(ctx, newJobs(3)); err != nil {
		t.Fatal(err)
	}
	ds := mustReceive(t, q, 3, 5*time.Second)
	if len(ds) != 3 {
		t.Fatalf("received %d", len(ds))
	}
	// The first delivery loses its lease: it is nacked and received again by another holder.
	if err := ds[0].Nack(ctx); err != nil {
		t.Fatal(err)
	}
	again := mustReceive(t, q, 1, 5*time.Second)[0]
	errs := q.AckGroup(ctx, ds[0], ds[1], ds[2])
	requireCode(t, errs[0], ports.CodeFailedPrecondition)
	if errs[1] != nil || errs[2] != nil {
		t.Fatalf("acks = %v", errs)
	}
	if n := countRows(t, s, `SELECT count(*) FROM delivery_queue`); n != 1 {
		t.Fatalf("rows = %d, want the re-received job only", n)
	}
	// The stale and the current holder in one group: only the current one deletes the job.
	errs = q.AckGroup(ctx, ds[0], again)
	requireCode(t, errs[0], ports.CodeFailedPrecondition)
	if errs[1] != nil {
		t.Fatalf("ack by the new holder: %v", errs[1])
	}
	if n := countRows(t, s, `SELECT count(*) FROM delivery_queue`); n != 0 {
		t.Fatalf("rows = %d", n)
	}
}

// TestQueue_ConcurrentAcks: concurrent Acks (grouped however they arrive) each delete their own job.
func TestQueue_ConcurrentAcks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	q := postgres.NewQueue(s.Pool(), postgres.QueueConfig{PollInterval: 20 * time.Millisecond})
	if err := q.Publish(ctx, newJobs(50)); err != nil {
		t.Fatal(err)
	}
	var ds []ports.Delivery
	for len(ds) < 50 {
		ds = append(ds, mustReceive(t, q, 50-len(ds), 5*time.Second)...)
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() {
			if err := d.Ack(ctx); err != nil {
				t.Errorf("Ack: %v", err)
			}
		})
	}
	wg.Wait()
	if n := countRows(t, s, `SELECT count(*) FROM delivery_queue`); n != 0 {
		t.Fatalf("rows = %d", n)
	}
}

// deliverDecision decides the recipients in ids delivered, recording what decide was given.
func deliverDecision(seen *[][]ports.Recipient, ids ...string) func([]ports.Recipient) ports.DeliveryApplication {
	return func(current []ports.Recipient) ports.DeliveryApplication {
		*seen = append(*seen, current)
		a := ports.DeliveryApplication{JobID: "ignored", MessageID: "ignored", Recipients: map[string]ports.MessageStatus{}}
		for _, id := range ids {
			a.Recipients[id] = ports.StatusDelivered
		}
		return a
	}
}

// TestApplyDeliveryReport: decide sees the message's recipients as the jobs applied before it left them
// (the second job of a message in one group sees the first's outcome), its ids are replaced by the call's,
// and a job applied before, or another organization's message, never reaches decide.
func TestApplyDeliveryReport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	other := newSendFixture(t, s)
	nm := f.newSend(t, "a@one.example", "b@two.example")
	id := f.mustInsert(t, nm)
	lone := f.newSend(t, "c@example.org")
	f.mustInsert(t, lone)
	foreign := other.newSend(t, "d@example.org")
	other.mustInsert(t, foreign)
	r1, r2 := nm.Message.Recipients[0].ID, nm.Message.Recipients[1].ID
	job1, job2, job3 := newV7(), newV7(), newV7()

	var seen1, seen2, seen3, seenForeign [][]ports.Recipient
	results := s.WriteReportGroup(ctx,
		postgres.Report{JobID: job1, OrganizationID: f.org.ID, MessageID: id, Decide: deliverDecision(&seen1, r1)},
		postgres.Report{JobID: job3, OrganizationID: f.org.ID, MessageID: lone.Message.ID, Decide: deliverDecision(&seen3, lone.Message.Recipients[0].ID)},
		postgres.Report{JobID: job2, OrganizationID: f.org.ID, MessageID: id, Decide: deliverDecision(&seen2, r2)},
		postgres.Report{JobID: newV7(), OrganizationID: f.org.ID, MessageID: foreign.Message.ID, Decide: deliverDecision(&seenForeign)},
	)
	for i, r := range results[:3] {
		if !r.Applied || r.Err != nil {
			t.Fatalf("report %d = %+v", i, r)
		}
	}
	requireCode(t, results[3].Err, ports.CodeNotFound)
	if len(seenForeign) != 0 {
		t.Fatal("decide was called for another organization's message")
	}
	if len(seen1) != 1 || len(seen1[0]) != 2 || seen1[0][0].Status != ports.StatusQueued || seen1[0][1].Address != "b@two.example" {
		t.Fatalf("first job saw %+v", seen1)
	}
	if len(seen2) != 1 || seen2[0][0].Status != ports.StatusDelivered || seen2[0][1].Status != ports.StatusQueued {
		t.Fatalf("second job of the message saw %+v; want the first job's outcome", seen2)
	}
	if len(seen3) != 1 || len(seen3[0]) != 1 {
		t.Fatalf("third job saw %+v", seen3)
	}
	for _, m := range []string{id, lone.Message.ID} {
		if got, _ := s.GetMessage(ctx, f.org.ID, m); got.Status != ports.StatusDelivered {
			t.Fatalf("message %s = %q, want delivered", m, got.Status)
		}
	}

	// Reported again, alone or grouped: decide is not called and nothing is applied.
	var again [][]ports.Recipient
	applied, err := s.ApplyDeliveryReport(ctx, job1, f.org.ID, id, deliverDecision(&again, r1))
	if err != nil || applied || len(again) != 0 {
		t.Fatalf("second report = %v, %v (decide called %d times)", applied, err, len(again))
	}
	for _, r := range s.WriteReportGroup(ctx,
		postgres.Report{JobID: job2, OrganizationID: f.org.ID, MessageID: id, Decide: deliverDecision(&again, r2)},
		postgres.Report{JobID: job3, OrganizationID: f.org.ID, MessageID: lone.Message.ID, Decide: deliverDecision(&again)}) {
		if r.Err != nil || r.Applied {
			t.Fatalf("grouped second report = %+v", r)
		}
	}
	if len(again) != 0 {
		t.Fatalf("decide called %d times for jobs applied before", len(again))
	}
	if n := countRows(t, s, `SELECT count(*) FROM applied_jobs WHERE job_id = ANY($1::uuid[])`, []string{job1, job2, job3}); n != 3 {
		t.Fatalf("applied jobs = %d", n)
	}
}

// TestApplyDeliveryReport_Concurrent: two jobs of one message reported at once, many times over; each
// decides from the other's outcome when it comes second, and the message ends delivered.
func TestApplyDeliveryReport_Concurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	var wg sync.WaitGroup
	var ids []string
	for range 20 {
		nm := f.newSend(t, "a@one.example", "b@two.example")
		id := f.mustInsert(t, nm)
		ids = append(ids, id)
		for _, r := range nm.Message.Recipients {
			job := newV7()
			for range 2 { // each job reported twice (a redelivery)
				wg.Go(func() {
					var seen [][]ports.Recipient
					if _, err := s.ApplyDeliveryReport(ctx, job, f.org.ID, id, deliverDecision(&seen, r.ID)); err != nil {
						t.Errorf("ApplyDeliveryReport: %v", err)
					}
				})
			}
		}
	}
	wg.Wait()
	for _, id := range ids {
		if m, _ := s.GetMessage(ctx, f.org.ID, id); m.Status != ports.StatusDelivered {
			t.Fatalf("message %s = %q, want delivered", id, m.Status)
		}
	}
}

// TestApplyDeliveryReport_DecidePanics: a decide that panics fails its own report only; the group's other
// reports are applied and the combiner keeps serving.
func TestApplyDeliveryReport_DecidePanics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	f := newSendFixture(t, s)
	good := f.newSend(t, "a@example.org")
	bad := f.newSend(t, "b@example.org")
	f.mustInsert(t, good)
	f.mustInsert(t, bad)
	var seen [][]ports.Recipient
	results := s.WriteReportGroup(ctx,
		postgres.Report{JobID: newV7(), OrganizationID: f.org.ID, MessageID: good.Message.ID, Decide: deliverDecision(&seen, good.Message.Recipients[0].ID)},
		postgres.Report{JobID: newV7(), OrganizationID: f.org.ID, MessageID: bad.Message.ID, Decide: func([]ports.Recipient) ports.DeliveryApplication { panic("bug") }},
	)
	if !results[0].Applied || results[0].Err != nil || results[1].Applied || results[1].Err == nil {
		t.Fatalf("results = %+v", results)
	}
	if applied, err := s.ApplyDeliveryReport(ctx, newV7(), f.org.ID, bad.Message.ID, deliverDecision(&seen, bad.Message.Recipients[0].ID)); err != nil || !applied {
		t.Fatalf("a later report = %v, %v", applied, err)
	}
}
