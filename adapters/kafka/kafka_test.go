package kafka_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postmill/postmill/adapters/kafka"
	"github.com/postmill/postmill/ports"
	"github.com/postmill/postmill/ports/porttest"
)

// EnvBrokers names a real Kafka cluster (comma-separated host:port) to run the contract against as well.
const EnvBrokers = "POSTMILL_TEST_KAFKA_BROKERS"

// newCluster starts an in-process Kafka cluster (franz-go's kfake) on loopback ports.
func newCluster(tb testing.TB) []string {
	tb.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		tb.Fatalf("kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return c.ListenAddrs()
}

func suffix(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// config names a topic and group no other test uses.
func config(tb testing.TB, brokers []string, partitions int) kafka.Config {
	tb.Helper()
	s := suffix(tb)
	return kafka.Config{
		Brokers:    brokers,
		Topic:      "postmill.delivery.test." + s,
		Group:      "postmill-mta-test-" + s,
		Partitions: partitions,
	}
}

func mustNew(tb testing.TB, cfg kafka.Config) *kafka.Queue {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := kafka.New(ctx, cfg)
	if err != nil {
		tb.Fatalf("kafka.New: %v", err)
	}
	tb.Cleanup(q.Close)
	return q
}

// harness gives every New its own topic and group on the brokers brokers returns; real brokers get the
// topic deleted afterwards.
func harness(brokers func(t *testing.T) []string, deleteTopic bool) porttest.QueueHarness {
	return porttest.QueueHarness{
		New: func(t *testing.T) (ports.Queue, porttest.OpenConsumer) {
			cfg := config(t, brokers(t), 6)
			q := mustNew(t, cfg)
			if deleteTopic {
				t.Cleanup(func() { deleteTopicOf(t, cfg) })
			}
			return q, func(t *testing.T) (ports.Queue, func()) {
				c := mustNew(t, cfg)
				return c, c.Close
			}
		},
		OrderedPerDomain: true,
		Redelivery:       45 * time.Second, // a group rebalance, heartbeats every 3s
	}
}

func TestQueueContract(t *testing.T) {
	t.Parallel()
	porttest.ExerciseQueue(t, harness(func(t *testing.T) []string { return newCluster(t) }, false))
}

func TestQueueContractRealBroker(t *testing.T) {
	t.Parallel()
	env := os.Getenv(EnvBrokers)
	if env == "" {
		t.Skip(EnvBrokers + " is not set: the contract ran against kfake only")
	}
	brokers := strings.Split(env, ",")
	porttest.ExerciseQueue(t, harness(func(*testing.T) []string { return brokers }, true))
}

func deleteTopicOf(tb testing.TB, cfg kafka.Config) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		tb.Errorf("delete topic %s: %v", cfg.Topic, err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []string{cfg.Topic, cfg.Topic + ".bulk"} {
		if _, err := kadm.NewClient(cl).DeleteTopic(ctx, topic); err != nil {
			tb.Errorf("delete topic %s: %v", topic, err)
		}
	}
}

func job(domain string) ports.DeliveryJob {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return ports.DeliveryJob{
		ID: "job-" + domain + "-" + hexOf(8), OrganizationID: "org", MessageID: "msg", Domain: domain,
		RecipientIDs: []string{"r1"}, Attempt: 1, FirstQueuedAt: now,
	}
}

func hexOf(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func publish(tb testing.TB, q *kafka.Queue, jobs ...ports.DeliveryJob) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.Publish(ctx, jobs); err != nil {
		tb.Fatalf("Publish: %v", err)
	}
}

// receiveN receives until n deliveries arrived.
func receiveN(tb testing.TB, q *kafka.Queue, n int) []ports.Delivery {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var out []ports.Delivery
	for len(out) < n {
		ds, err := q.Receive(ctx, n-len(out))
		if err != nil {
			tb.Fatalf("received %d of %d, then: %v", len(out), n, err)
		}
		out = append(out, ds...)
	}
	return out
}

// committed returns the group's committed offset of partition 0, or -1.
func committed(tb testing.TB, cfg kafka.Config) int64 {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offsets, err := kadm.NewClient(cl).FetchOffsets(ctx, cfg.Group)
	if err != nil {
		tb.Fatalf("fetch offsets: %v", err)
	}
	if o, ok := offsets.Lookup(cfg.Topic, 0); ok {
		return o.At
	}
	return -1
}

// TestCommitsOnlyTheContiguousAckedRun: acking the second and third record of a partition commits nothing
// while the first is outstanding, so a consumer taking over gets the first again; acking the first then
// commits all three.
func TestCommitsOnlyTheContiguousAckedRun(t *testing.T) {
	t.Parallel()
	cfg := config(t, newCluster(t), 1)
	pub := mustNew(t, cfg)
	jobs := []ports.DeliveryJob{job("a.example"), job("b.example"), job("c.example")}
	publish(t, pub, jobs...)

	a := mustNew(t, cfg)
	ds := receiveN(t, a, 3)
	for i, d := range ds {
		if d.Job().ID != jobs[i].ID {
			t.Fatalf("delivery %d is %s, want %s (one partition keeps publish order)", i, d.Job().ID, jobs[i].ID)
		}
	}
	ctx := context.Background()
	for _, d := range []ports.Delivery{ds[2], ds[1]} {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := committed(t, cfg); got != -1 {
		t.Fatalf("committed offset %d after acking records 1 and 2 but not 0; want none", got)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, cfg); got != 3 {
		t.Fatalf("committed offset %d after acking all three; want 3", got)
	}
}

func TestOutOfOrderAcksDoNotLoseTheUnacked(t *testing.T) {
	t.Parallel()
	cfg := config(t, newCluster(t), 1)
	pub := mustNew(t, cfg)
	jobs := []ports.DeliveryJob{job("a.example"), job("b.example"), job("c.example")}
	publish(t, pub, jobs...)

	a := mustNew(t, cfg)
	ds := receiveN(t, a, 3)
	ctx := context.Background()
	if err := ds[2].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ds[1].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	a.Close() // leaves the group holding record 0

	b := mustNew(t, cfg)
	got := receiveN(t, b, 1)
	if got[0].Job().ID != jobs[0].ID {
		t.Fatalf("the consumer taking over first received %s, want the unacked %s", got[0].Job().ID, jobs[0].ID)
	}
}

// TestRecordsAreKeyedByDomain reads the topic without the adapter: each record's key is the job's domain,
// its value the JSON job, and one domain's records share a partition.
func TestRecordsAreKeyedByDomain(t *testing.T) {
	t.Parallel()
	cfg := config(t, newCluster(t), 8)
	q := mustNew(t, cfg)
	var jobs []ports.DeliveryJob
	for i := range 40 {
		jobs = append(jobs, job([]string{"gmail.com", "example.org", "outlook.com", "yahoo.co.jp"}[i%4]))
	}
	publish(t, q, jobs...)

	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	partitionOf := map[string]int32{}
	for n := 0; n < len(jobs); {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", n, len(jobs), err)
		}
		for _, r := range fs.Records() {
			n++
			var v map[string]any
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("record value is not JSON: %v", err)
			}
			if v["domain"] != string(r.Key) {
				t.Fatalf("record key %q, value domain %v", r.Key, v["domain"])
			}
			for _, field := range []string{"id", "organizationId", "messageId", "recipientIds", "attempt", "firstQueuedAt"} {
				if _, ok := v[field]; !ok {
					t.Fatalf("record value lacks %q: %s", field, r.Value)
				}
			}
			if p, seen := partitionOf[string(r.Key)]; seen && p != r.Partition {
				t.Fatalf("domain %s in partitions %d and %d", r.Key, p, r.Partition)
			}
			partitionOf[string(r.Key)] = r.Partition
		}
	}
}

func TestNewCreatesTheTopicOnce(t *testing.T) {
	t.Parallel()
	cfg := config(t, newCluster(t), 5)
	mustNew(t, cfg)
	mustNew(t, cfg) // exists now: fine

	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, cfg.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := topics[cfg.Topic]; !ok || d.Err != nil || len(d.Partitions) != 5 {
		t.Fatalf("topic %s: %+v, want 5 partitions", cfg.Topic, d)
	}
}

func TestReceiveAndClose(t *testing.T) {
	t.Parallel()
	cfg := config(t, newCluster(t), 1)
	q := mustNew(t, cfg)
	publish(t, q, job("a.example"), job("b.example"))
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if ds, err := q.Receive(ctx, 0); err != nil || len(ds) != 1 {
		t.Fatalf("Receive(max 0) = (%d deliveries, %v), want one", len(ds), err)
	}
	q.Close()
	q.Close()
	if _, err := q.Receive(context.Background(), 1); err == nil {
		t.Fatal("Receive after Close succeeded")
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	b := []string{"127.0.0.1:9092"}
	for _, cfg := range []kafka.Config{{}, {Brokers: []string{" "}}, {Brokers: b, Partitions: -1},
		{Brokers: b, Topic: "jobs", BulkTopic: "jobs"}, {Brokers: b, BulkTopic: kafka.DefaultTopic},
		{Brokers: b, Topic: "jobs", BulkTopic: "dead", DeadLetterTopic: "dead"},
		{Brokers: b, Topic: "jobs", BulkTopic: "jobs.dead"}} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", cfg)
		}
	}
	if err := (kafka.Config{Brokers: b}).Validate(); err != nil {
		t.Errorf("Validate with a broker: %v", err)
	}
	if err := (kafka.Config{Brokers: b, Topic: "jobs", BulkTopic: "jobs.broadcasts"}).Validate(); err != nil {
		t.Errorf("Validate with a bulk topic of its own: %v", err)
	}
}

// TestDeadLetterTopic reads the dead-letter topic without the adapter: the dead job is there as the same
// JSON value, keyed by its domain, with the reason (control bytes escaped) and its delivery count in
// headers; the delivery topic does not hand it out again.
func TestDeadLetterTopic(t *testing.T) {
	t.Parallel()
	cfg := config(t, newCluster(t), 1)
	q := mustNew(t, cfg)
	dead := job("dead.example")
	publish(t, q, dead)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	first := receiveN(t, q, 1)[0]
	if err := first.NackAfter(ctx, 0); err != nil {
		t.Fatal(err)
	}
	second := receiveN(t, q, 1)[0]
	if second.Job().ID != dead.ID || second.Deliveries() != 2 {
		t.Fatalf("received %s counting %d, want %s counting 2", second.Job().ID, second.Deliveries(), dead.ID)
	}
	if err := second.DeadLetter(ctx, "report failed: 250 ok\x00\r\nX-Injected: 1"); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(cfg.Topic+".dead"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for len(recs) == 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record on the dead-letter topic: %v", err)
		}
		recs = fs.Records()
	}
	r := recs[0]
	var v map[string]any
	if err := json.Unmarshal(r.Value, &v); err != nil || v["id"] != dead.ID || string(r.Key) != dead.Domain {
		t.Fatalf("dead record key %q value %s (%v)", r.Key, r.Value, err)
	}
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	if got := headers["postmill-dead-reason"]; got != `report failed: 250 ok\x00\x0d\x0aX-Injected: 1` {
		t.Errorf("reason header %q", got)
	}
	if headers["postmill-deliveries"] != "2" || headers["postmill-dead-at"] == "" {
		t.Errorf("headers %v", headers)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	if ds, err := q.Receive(sctx, 10); err == nil {
		t.Fatalf("the delivery topic handed out %d more deliveries after the dead letter", len(ds))
	}
}

// TestTransactionalBeforeBulk: broadcast jobs wait in the bulk lane while transactional jobs published after
// them are handed out first; the bulk lane is read when the delivery topic has nothing, and a bulk job
// handed back stays in its lane.
func TestTransactionalBeforeBulk(t *testing.T) {
	t.Parallel()
	cfg := config(t, newCluster(t), 1)
	q := mustNew(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bulkJob := func() ports.DeliveryJob {
		j := job("example.com")
		j.Bulk = true
		return j
	}
	// Both lanes joined and assigned before the measure.
	publish(t, q, job("example.com"), bulkJob())
	for _, d := range receiveN(t, q, 2) {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var backlog []ports.DeliveryJob
	for range 40 {
		backlog = append(backlog, bulkJob())
	}
	publish(t, q, backlog...)
	first := receiveN(t, q, 1)[0]
	if !first.Job().Bulk {
		t.Fatalf("got %+v; want a bulk job, the only kind waiting", first.Job())
	}
	tx := map[string]bool{}
	var txJobs []ports.DeliveryJob
	for range 3 {
		j := job("example.com")
		tx[j.ID] = true
		txJobs = append(txJobs, j)
	}
	publish(t, q, txJobs...)
	// The consumers fetch in the background; give the delivery topic's fetch time to arrive. On a loaded
	// machine it may come later: the transactional jobs must then still come before the bulk lane's 39
	// waiting jobs are all handed out (on one topic they would come after all of them).
	time.Sleep(500 * time.Millisecond)
	var order []bool // true: a transactional job
	for len(order) < 3+39 {
		ds, err := q.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			order = append(order, tx[d.Job().ID])
			if tx[d.Job().ID] == d.Job().Bulk {
				t.Errorf("job %s: bulk %v", d.Job().ID, d.Job().Bulk)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := countTrue(order); n == 3 {
			break
		}
	}
	if n := countTrue(order); n != 3 || len(order) >= 3+39 {
		t.Fatalf("the transactional jobs came at %v of %d received; want all 3 before the bulk lane's 39 waiting jobs", positions(order), len(order))
	}
	t.Logf("the transactional jobs came at %v (0-based) after a backlog of 39 bulk jobs", positions(order))
	// A bulk job handed back comes again, still a bulk job, with the ones still waiting.
	if err := first.HandBack(ctx, 0); err != nil {
		t.Fatal(err)
	}
	rest := receiveN(t, q, 39-(len(order)-3)+1)
	seen := map[string]bool{}
	for _, d := range rest {
		if !d.Job().Bulk || tx[d.Job().ID] {
			t.Errorf("got %+v; want only bulk jobs now", d.Job())
		}
		seen[d.Job().ID] = true
	}
	if !seen[first.Job().ID] {
		t.Error("the handed-back bulk job did not come again")
	}
}

func countTrue(bs []bool) (n int) {
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func positions(bs []bool) (out []int) {
	for i, b := range bs {
		if b {
			out = append(out, i)
		}
	}
	return out
}

// Publish tells a consumer of this process when transactional jobs were acknowledged by the brokers (the
// MTA then leases at once instead of waiting for a batch of free slots), and not for bulk jobs alone.
func TestPublishSignalsTransactionalJobs(t *testing.T) {
	t.Parallel()
	q := mustNew(t, config(t, newCluster(t), 1))
	signalled := func() bool {
		select {
		case <-q.TransactionalQueued():
			return true
		default:
			return false
		}
	}
	bulk := job("example.com")
	bulk.Bulk = true
	publish(t, q, bulk)
	if signalled() {
		t.Fatal("signalled after publishing a bulk job")
	}
	publish(t, q, job("example.com"), job("example.org"))
	if !signalled() {
		t.Fatal("no signal after publishing transactional jobs")
	}
	if signalled() {
		t.Fatal("two values for one publication")
	}
}

// A consumer signals the transactional jobs other processes publish (the split shape: the MTA's process
// does not publish), once it joined the group, and not the bulk lane's.
func TestConsumerSignalsTransactionalJobsOfOtherProcesses(t *testing.T) {
	t.Parallel()
	cfg := config(t, newCluster(t), 1)
	publisher, consumer := mustNew(t, cfg), mustNew(t, cfg)
	signalled := func() bool {
		select {
		case <-consumer.TransactionalQueued():
			return true
		default:
			return false
		}
	}
	// The first Receive joins the group; with nothing queued it returns when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, _ = consumer.Receive(ctx, 1)
	cancel()

	bulk := job("example.com")
	bulk.Bulk = true
	publish(t, publisher, bulk)
	got := receiveN(t, consumer, 1)
	if !got[0].Job().Bulk {
		t.Fatalf("received %+v, want the bulk job", got[0].Job())
	}
	ack(t, got)
	if signalled() {
		t.Fatal("signalled for a bulk job")
	}

	publish(t, publisher, job("example.org"))
	deadline := time.Now().Add(30 * time.Second)
	for !signalled() {
		if time.Now().After(deadline) {
			t.Fatal("no signal within 30 s of another process publishing a transactional job")
		}
		time.Sleep(10 * time.Millisecond)
	}
	got = receiveN(t, consumer, 1)
	if got[0].Job().Bulk || got[0].Job().Domain != "example.org" {
		t.Fatalf("received %+v, want the transactional job", got[0].Job())
	}
	ack(t, got)
}

func ack(tb testing.TB, ds []ports.Delivery) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			tb.Fatalf("Ack: %v", err)
		}
	}
}
