package porttest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// QueueHarness tells ExerciseQueue how to make queues of one adapter and how long that adapter may take.
type QueueHarness struct {
	// New returns a fresh queue that no other test shares (its own topic and group, table or schema), with
	// its cleanup registered on t, and a function opening further consumers of that same queue. The suite
	// publishes through the returned queue and receives through consumers it opens, the way the relay and
	// the MTA processes do.
	New func(t *testing.T) (ports.Queue, OpenConsumer)
	// OrderedPerDomain asserts that jobs of one Domain are received in the order they were published. Only
	// adapters that promise it set it (Kafka keys records by Domain, and a partition is ordered).
	OrderedPerDomain bool
	// Redelivery is the longest the adapter may take to hand out again a nacked job or one held by a
	// consumer that went away (PostgreSQL: the lease plus a poll; Kafka: a group rebalance), and to get a
	// newly opened consumer going. Default 30s.
	Redelivery time.Duration
	// Settle is how long the suite keeps watching for an acked job to come back before concluding that it
	// does not. Default 2s.
	Settle time.Duration
}

// OpenConsumer opens another consumer of the queue, as a second MTA process would, with its cleanup
// registered on t. Calling stop makes it go away the way a process that dies does: it neither acks nor
// nacks what it holds (Kafka: the client is closed so the group hands its partitions to the others;
// PostgreSQL: nothing, its leases run out). The suite calls stop at most once and uses the consumer no more
// afterwards; the cleanup registered on t must tolerate an earlier stop.
type OpenConsumer func(t *testing.T) (consumer ports.Queue, stop func())

// queueOp bounds single Publish, Ack and Nack calls.
const queueOp = 30 * time.Second

// ExerciseQueue runs the ports.Queue contract: every published job is received at least once with every
// field intact; an acked job is not handed out again; a nacked job is, and one nacked with a delay not
// before the delay, each delivery counting one more; a dead-lettered job is not handed out again; a job held by a consumer that goes
// away is handed to another; two consumers together lose none of 200 jobs; Receive returns between 1 and
// max deliveries, blocks while the queue is empty, wakes up when a job arrives, and returns an error with no
// deliveries once its context ends; and, when the harness says the adapter promises it, jobs of one domain
// arrive in publish order. Duplicates are allowed everywhere except after an Ack: delivery is at least once.
//
// Times in the jobs are whole microseconds, the precision PostgreSQL keeps; the suite compares them with
// time.Time.Equal, so the location may change on the way.
func ExerciseQueue(t *testing.T, h QueueHarness) {
	t.Helper()
	if h.Redelivery <= 0 {
		h.Redelivery = 30 * time.Second
	}
	if h.Settle <= 0 {
		h.Settle = 2 * time.Second
	}

	t.Run("FieldsIntact", func(t *testing.T) {
		t.Parallel()
		q, open := h.New(t)
		c, _ := open(t)
		jobs := []ports.DeliveryJob{
			job("example.com", 3),
			job("example.org", 1),
			job("xn--bcher-kva.example", 2),
			{ // a first attempt: no NotBefore
				ID: newID(), OrganizationID: newID(), MessageID: newID(), Domain: "example.net",
				RecipientIDs: []string{newID()}, Attempt: 1, FirstQueuedAt: micros(time.Now().Add(-time.Hour)),
			},
		}
		jobs[1].Attempt = 7
		mustPublish(t, q) // publishing nothing is fine
		mustPublish(t, q, jobs...)
		got := receiveAll(t, c, ids(jobs), h.Redelivery, ack)
		for _, want := range jobs {
			if d := diffJob(got[want.ID], want); d != "" {
				t.Errorf("job %s came back changed: %s", want.ID, d)
			}
		}
	})

	t.Run("AckedIsNotRedelivered", func(t *testing.T) {
		t.Parallel()
		q, open := h.New(t)
		a, stopA := open(t)
		jobs := jobsFor(5, "acked.example")
		mustPublish(t, q, jobs...)
		receiveAll(t, a, ids(jobs), h.Redelivery, ack)
		// The consumer that acked them does not see them again...
		expectNone(t, a, h.Settle, ids(jobs))
		// ...and neither does a consumer taking over after it went away. A sentinel published afterwards
		// proves the new consumer is really consuming before the suite watches it for Settle.
		stopA()
		b, _ := open(t)
		sentinel := job("sentinel.example", 1)
		mustPublish(t, q, sentinel)
		watchUntil(t, b, sentinel.ID, h.Redelivery, h.Settle, ids(jobs))
	})

	t.Run("NackedIsRedelivered", func(t *testing.T) {
		t.Parallel()
		q, open := h.New(t)
		c, _ := open(t)
		want := job("nacked.example", 2)
		mustPublish(t, q, want)
		first := receiveAll(t, c, ids([]ports.DeliveryJob{want}), h.Redelivery, nack)
		if d := diffJob(first[want.ID], want); d != "" {
			t.Fatalf("first delivery changed the job: %s", d)
		}
		again := receiveAll(t, c, ids([]ports.DeliveryJob{want}), h.Redelivery, ack)
		if d := diffJob(again[want.ID], want); d != "" {
			t.Fatalf("the redelivered job changed: %s", d)
		}
	})

	t.Run("NackAfterWaitsAndCounts", func(t *testing.T) {
		t.Parallel()
		q, open := h.New(t)
		c, _ := open(t)
		want := job("backoff.example", 1)
		mustPublish(t, q, want)
		first := receiveOne(t, c, want.ID, h.Redelivery)
		if n := first.Deliveries(); n != 1 {
			t.Fatalf("first delivery counts %d deliveries, want 1", n)
		}
		const delay = 1500 * time.Millisecond
		nackedAt := time.Now()
		opCtx, cancel := context.WithTimeout(context.Background(), queueOp)
		defer cancel()
		if err := first.NackAfter(opCtx, delay); err != nil {
			t.Fatalf("NackAfter: %v", err)
		}
		second := receiveOne(t, c, want.ID, h.Redelivery+delay)
		if waited := time.Since(nackedAt); waited < delay {
			t.Fatalf("handed out again after %s, before the %s delay", waited, delay)
		}
		if n := second.Deliveries(); n != 2 {
			t.Fatalf("second delivery counts %d deliveries, want 2", n)
		}
		if d := diffJob(second.Job(), want); d != "" {
			t.Fatalf("the redelivered job changed: %s", d)
		}
		if err := second.Nack(opCtx); err != nil {
			t.Fatalf("Nack: %v", err)
		}
		third := receiveOne(t, c, want.ID, h.Redelivery)
		if n := third.Deliveries(); n != 3 {
			t.Fatalf("third delivery counts %d deliveries, want 3", n)
		}
		mustAck(t, third)
	})

	t.Run("HandBackWaitsAndDoesNotCount", func(t *testing.T) {
		t.Parallel()
		q, open := h.New(t)
		c, _ := open(t)
		want := job("handback.example", 1)
		mustPublish(t, q, want)
		opCtx, cancel := context.WithTimeout(context.Background(), queueOp)
		defer cancel()
		first := receiveOne(t, c, want.ID, h.Redelivery)
		if err := first.Nack(opCtx); err != nil {
			t.Fatalf("Nack: %v", err)
		}
		second := receiveOne(t, c, want.ID, h.Redelivery)
		if n := second.Deliveries(); n != 2 {
			t.Fatalf("delivery after a nack counts %d deliveries, want 2", n)
		}
		const delay = 1500 * time.Millisecond
		handedAt := time.Now()
		if err := second.HandBack(opCtx, delay); err != nil {
			t.Fatalf("HandBack: %v", err)
		}
		third := receiveOne(t, c, want.ID, h.Redelivery+delay)
		if waited := time.Since(handedAt); waited < delay {
			t.Fatalf("handed out again after %s, before the %s delay", waited, delay)
		}
		if n := third.Deliveries(); n != 2 {
			t.Fatalf("delivery after a hand-back counts %d deliveries, want 2 (the hand-back is not a try)", n)
		}
		if d := diffJob(third.Job(), want); d != "" {
			t.Fatalf("the handed-back job changed: %s", d)
		}
		if err := third.HandBack(opCtx, 0); err != nil {
			t.Fatalf("HandBack without delay: %v", err)
		}
		fourth := receiveOne(t, c, want.ID, h.Redelivery)
		if n := fourth.Deliveries(); n != 2 {
			t.Fatalf("delivery after a second hand-back counts %d deliveries, want 2", n)
		}
		mustAck(t, fourth)
	})

	t.Run("DeadLetteredIsNotRedelivered", func(t *testing.T) {
		t.Parallel()
		q, open := h.New(t)
		c, _ := open(t)
		dead := job("dead.example", 1)
		mustPublish(t, q, dead)
		d := receiveOne(t, c, dead.ID, h.Redelivery)
		opCtx, cancel := context.WithTimeout(context.Background(), queueOp)
		defer cancel()
		if err := d.DeadLetter(opCtx, "report failed 10 times: internal"); err != nil {
			t.Fatalf("DeadLetter: %v", err)
		}
		sentinel := job("dead.example", 1)
		mustPublish(t, q, sentinel)
		watchUntil(t, c, sentinel.ID, h.Redelivery, h.Settle, ids([]ports.DeliveryJob{dead}))
	})

	t.Run("AbandonedIsRedeliveredToAnother", func(t *testing.T) {
		t.Parallel()
		q, open := h.New(t)
		a, stopA := open(t)
		jobs := jobsFor(3, "abandoned.example")
		mustPublish(t, q, jobs...)
		receiveAll(t, a, ids(jobs), h.Redelivery, keep)
		// A second process is running when the first one dies holding the jobs.
		b, _ := open(t)
		stopA()
		got := receiveAll(t, b, ids(jobs), h.Redelivery, ack)
		for _, want := range jobs {
			if d := diffJob(got[want.ID], want); d != "" {
				t.Errorf("job %s came back changed: %s", want.ID, d)
			}
		}
	})

	t.Run("TwoConsumersLoseNothing", func(t *testing.T) {
		t.Parallel()
		q, open := h.New(t)
		a, _ := open(t)
		b, _ := open(t)
		const n, domains = 200, 20
		var jobs []ports.DeliveryJob
		for i := range n {
			jobs = append(jobs, job(fmt.Sprintf("d%02d.example", i%domains), 1))
		}
		want := ids(jobs)

		ctx, cancel := context.WithTimeout(context.Background(), 2*h.Redelivery+time.Minute)
		defer cancel()
		var (
			mu       sync.Mutex
			seen     = map[string]int{}
			perCons  [2]int
			complete = make(chan struct{})
			wg       sync.WaitGroup
			errs     = make(chan error, 2)
		)
		for i, c := range []ports.Queue{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					ds, err := c.Receive(ctx, 16)
					if err != nil {
						if ctx.Err() == nil {
							errs <- fmt.Errorf("consumer %d: Receive: %w", i, err)
							cancel()
						}
						return
					}
					if len(ds) == 0 || len(ds) > 16 {
						errs <- fmt.Errorf("consumer %d: Receive(max 16) returned %d deliveries", i, len(ds))
						cancel()
						return
					}
					for _, d := range ds {
						if err := d.Ack(ctx); err != nil && ctx.Err() == nil {
							errs <- fmt.Errorf("consumer %d: Ack: %w", i, err)
							cancel()
							return
						}
						mu.Lock()
						seen[d.Job().ID]++
						perCons[i]++
						if countIn(seen, want) == n {
							select {
							case <-complete:
							default:
								close(complete)
							}
						}
						mu.Unlock()
					}
				}
			}()
		}
		// Publish in batches while both consumers are already running.
		for i := 0; i < n; i += 50 {
			mustPublish(t, q, jobs[i:i+50]...)
		}
		select {
		case <-complete:
		case <-ctx.Done():
		}
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		mu.Lock()
		defer mu.Unlock()
		var missing []string
		for id := range want {
			if seen[id] == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			t.Fatalf("%d of %d jobs were never received by either consumer (for example %s)", len(missing), n, missing[0])
		}
		dup := 0
		for _, c := range seen {
			dup += c - 1
		}
		t.Logf("received %d jobs: %d by the first consumer, %d by the second, %d duplicates", n, perCons[0], perCons[1], dup)
	})

	t.Run("ReceiveHonoursMaxAndBlocks", func(t *testing.T) {
		t.Parallel()
		q, open := h.New(t)
		c, _ := open(t)

		// Empty: Receive blocks until its context ends and then returns an error and no deliveries.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		ds, err := c.Receive(ctx, 5)
		ended := ctx.Err() != nil
		cancel()
		if len(ds) != 0 || err == nil || !ended {
			t.Fatalf("Receive on an empty queue = (%d deliveries, %v), context ended: %t; want no deliveries and an error after the context ends",
				len(ds), err, ended)
		}

		// Blocked: a job published while Receive waits wakes it up.
		woke := job("wake.example", 1)
		type result struct {
			ds  []ports.Delivery
			err error
		}
		res := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), h.Redelivery)
			defer cancel()
			ds, err := c.Receive(ctx, 5)
			res <- result{ds, err}
		}()
		time.Sleep(200 * time.Millisecond)
		mustPublish(t, q, woke)
		r := <-res
		if r.err != nil || len(r.ds) != 1 || r.ds[0].Job().ID != woke.ID {
			t.Fatalf("a Receive blocked on an empty queue did not return the job published meanwhile: (%d deliveries, %v)", len(r.ds), r.err)
		}
		mustAck(t, r.ds[0])

		// Max: never more than asked for, never zero without an error.
		jobs := jobsFor(10, "max.example")
		mustPublish(t, q, jobs...)
		want := ids(jobs)
		ctx, cancel = context.WithTimeout(context.Background(), h.Redelivery)
		defer cancel()
		seen := map[string]bool{}
		for len(seen) < len(want) {
			ds, err := c.Receive(ctx, 3)
			if err != nil {
				t.Fatalf("Receive(max 3) after %d of %d jobs: %v", len(seen), len(want), err)
			}
			if len(ds) < 1 || len(ds) > 3 {
				t.Fatalf("Receive(max 3) returned %d deliveries", len(ds))
			}
			for _, d := range ds {
				seen[d.Job().ID] = true
				mustAck(t, d)
			}
		}
		if len(seen) != len(want) || countIn(boolsToCounts(seen), want) != len(want) {
			t.Fatalf("received %d distinct jobs, %d of them published", len(seen), countIn(boolsToCounts(seen), want))
		}
	})

	if h.OrderedPerDomain {
		t.Run("OrderedPerDomain", func(t *testing.T) {
			t.Parallel()
			q, open := h.New(t)
			c, _ := open(t)
			domains := []string{"one.example", "two.example", "three.example"}
			var jobs []ports.DeliveryJob
			for i := range 60 {
				jobs = append(jobs, job(domains[i%len(domains)], 1))
			}
			// Several Publish calls, so order must hold across calls as well as within one.
			for i := 0; i < len(jobs); i += 15 {
				mustPublish(t, q, jobs[i:i+15]...)
			}
			order := map[string][]string{} // domain -> ids in first-seen order
			first := map[string]bool{}
			ctx, cancel := context.WithTimeout(context.Background(), h.Redelivery)
			defer cancel()
			for len(first) < len(jobs) {
				ds, err := c.Receive(ctx, 7)
				if err != nil {
					t.Fatalf("Receive after %d of %d jobs: %v", len(first), len(jobs), err)
				}
				for _, d := range ds {
					j := d.Job()
					if !first[j.ID] {
						first[j.ID] = true
						order[j.Domain] = append(order[j.Domain], j.ID)
					}
					mustAck(t, d)
				}
			}
			for _, dom := range domains {
				var want []string
				for _, j := range jobs {
					if j.Domain == dom {
						want = append(want, j.ID)
					}
				}
				if !slices.Equal(order[dom], want) {
					t.Errorf("jobs of %s arrived out of publish order:\n got %v\nwant %v", dom, order[dom], want)
				}
			}
		})
	}
}

// disposition is what receiveAll does with each delivery.
type disposition int

const (
	ack disposition = iota
	nack
	keep // neither: the consumer will go away holding it
)

// receiveAll receives from c until every id of want was seen, applying what to the first delivery of each
// wanted job (and acking duplicates and strangers, so they do not come back), and returns the first
// delivered job per id.
func receiveAll(tb testing.TB, c ports.Queue, want map[string]bool, within time.Duration, what disposition) map[string]ports.DeliveryJob {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	got := map[string]ports.DeliveryJob{}
	for len(got) < len(want) {
		ds, err := c.Receive(ctx, 10)
		if err != nil {
			tb.Fatalf("received %d of %d jobs within %s, then Receive: %v", len(got), len(want), within, err)
		}
		if len(ds) == 0 || len(ds) > 10 {
			tb.Fatalf("Receive(max 10) returned %d deliveries without an error", len(ds))
		}
		for _, d := range ds {
			j := d.Job()
			_, dup := got[j.ID]
			if !want[j.ID] || dup {
				if what != keep {
					mustAck(tb, d)
				}
				continue
			}
			got[j.ID] = j
			switch what {
			case ack:
				mustAck(tb, d)
			case nack:
				opCtx, cancel := context.WithTimeout(context.Background(), queueOp)
				err := d.Nack(opCtx)
				cancel()
				if err != nil {
					tb.Fatalf("Nack(%s): %v", j.ID, err)
				}
			}
		}
	}
	return got
}

// receiveOne receives from c until the job id arrives and returns that delivery, acking any other.
func receiveOne(tb testing.TB, c ports.Queue, id string, within time.Duration) ports.Delivery {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var found ports.Delivery
	for found == nil {
		ds, err := c.Receive(ctx, 10)
		if err != nil {
			tb.Fatalf("job %s did not arrive within %s: %v", id, within, err)
		}
		for _, d := range ds {
			if d.Job().ID == id && found == nil {
				found = d
				continue
			}
			mustAck(tb, d)
		}
	}
	return found
}

// expectNone watches c for the given duration and fails if any job of ids comes out.
func expectNone(tb testing.TB, c ports.Queue, d time.Duration, forbidden map[string]bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		ds, err := c.Receive(ctx, 10)
		for _, dl := range ds {
			if forbidden[dl.Job().ID] {
				tb.Fatalf("job %s was delivered again after it was acked", dl.Job().ID)
			}
			mustAck(tb, dl)
		}
		if err != nil {
			if ctx.Err() == nil {
				tb.Fatalf("Receive: %v", err)
			}
			return
		}
	}
}

// watchUntil receives from c until sentinel arrives (within first) and then for settle more, failing if
// any job of forbidden comes out meanwhile.
func watchUntil(tb testing.TB, c ports.Queue, sentinel string, first, settle time.Duration, forbidden map[string]bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), first)
	defer cancel()
	for found := false; !found; {
		ds, err := c.Receive(ctx, 10)
		if err != nil {
			tb.Fatalf("the sentinel job did not arrive within %s: %v", first, err)
		}
		for _, d := range ds {
			if forbidden[d.Job().ID] {
				tb.Fatalf("job %s was delivered again after it was acked", d.Job().ID)
			}
			found = found || d.Job().ID == sentinel
			mustAck(tb, d)
		}
	}
	expectNone(tb, c, settle, forbidden)
}

func mustPublish(tb testing.TB, q ports.Queue, jobs ...ports.DeliveryJob) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), queueOp)
	defer cancel()
	if err := q.Publish(ctx, jobs); err != nil {
		tb.Fatalf("Publish(%d jobs): %v", len(jobs), err)
	}
}

func mustAck(tb testing.TB, d ports.Delivery) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), queueOp)
	defer cancel()
	if err := d.Ack(ctx); err != nil {
		tb.Fatalf("Ack(%s): %v", d.Job().ID, err)
	}
}

// job returns a job to domain with n recipients and every field set.
func job(domain string, n int) ports.DeliveryJob {
	now := time.Now()
	j := ports.DeliveryJob{
		ID:             newID(),
		OrganizationID: newID(),
		MessageID:      newID(),
		Domain:         domain,
		Attempt:        2,
		FirstQueuedAt:  micros(now.Add(-90 * time.Minute)),
		NotBefore:      micros(now.Add(-time.Second)),
	}
	for range n {
		j.RecipientIDs = append(j.RecipientIDs, newID())
	}
	return j
}

func jobsFor(n int, domain string) []ports.DeliveryJob {
	jobs := make([]ports.DeliveryJob, n)
	for i := range jobs {
		jobs[i] = job(domain, 1+i%3)
	}
	return jobs
}

// micros truncates to the microsecond and drops the monotonic reading, as a stored time comes back.
func micros(t time.Time) time.Time { return t.Truncate(time.Microsecond).Round(0) }

func ids(jobs []ports.DeliveryJob) map[string]bool {
	m := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		m[j.ID] = true
	}
	return m
}

func countIn(seen map[string]int, want map[string]bool) int {
	n := 0
	for id := range want {
		if seen[id] > 0 {
			n++
		}
	}
	return n
}

func boolsToCounts(m map[string]bool) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		if v {
			out[k] = 1
		}
	}
	return out
}

// diffJob describes how got differs from want, or returns "".
func diffJob(got, want ports.DeliveryJob) string {
	var diffs []string
	field := func(name string, g, w any) {
		diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", name, g, w))
	}
	if got.ID != want.ID {
		field("ID", got.ID, want.ID)
	}
	if got.OrganizationID != want.OrganizationID {
		field("OrganizationID", got.OrganizationID, want.OrganizationID)
	}
	if got.MessageID != want.MessageID {
		field("MessageID", got.MessageID, want.MessageID)
	}
	if got.Domain != want.Domain {
		field("Domain", got.Domain, want.Domain)
	}
	if !slices.Equal(got.RecipientIDs, want.RecipientIDs) {
		field("RecipientIDs", got.RecipientIDs, want.RecipientIDs)
	}
	if got.Attempt != want.Attempt {
		field("Attempt", got.Attempt, want.Attempt)
	}
	if !got.FirstQueuedAt.Equal(want.FirstQueuedAt) {
		field("FirstQueuedAt", got.FirstQueuedAt, want.FirstQueuedAt)
	}
	if !got.NotBefore.Equal(want.NotBefore) {
		field("NotBefore", got.NotBefore, want.NotBefore)
	}
	return strings.Join(diffs, "; ")
}
