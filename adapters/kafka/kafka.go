// Package kafka is the ports.Queue on Apache Kafka (or any broker speaking its protocol) through franz-go,
// for deployments whose delivery volume outgrows the PostgreSQL queue.
//
// Publish writes each job as one record to the delivery topic, keyed by the job's recipient domain, so that
// one domain's jobs share a partition and are received in publish order. The MTA processes read the topic
// as one consumer group; each partition is read by one of them at a time.
//
// Offsets are committed only after Ack, and never past a record that is not acked yet: the adapter tracks
// per partition which received records are acked and commits the end of the contiguous acked run. So a
// consumer that dies — or leaves the group with Close — hands every record it did not finish to the next
// owner of the partition. The price is at-least-once delivery: records acked after an earlier unfinished
// one of the same partition are delivered again after such a hand-over (the core applies a job's report
// once per job id, so that is harmless). Nack publishes the job again as a new record at the end of its
// partition and then counts as an ack, because a consumer group cannot re-read one record in place; the new
// record's headers count the deliveries and, after NackAfter, name the time before which consumers hold it
// back. DeadLetter moves the job to the dead-letter topic (Config.DeadLetterTopic) with the reason.
//
// Broadcast jobs (DeliveryJob.Bulk) go to a second topic, the bulk lane (Config.BulkTopic), read by a
// consumer group of its own (Config.Group + "-bulk"). Receive hands out transactional jobs first: it takes
// whatever the delivery topic has buffered before it looks at the bulk lane, so a transactional job waits
// behind at most the bulk jobs already received, never behind a broadcast's backlog.
package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	DefaultTopic      = "postmill.delivery"
	DefaultGroup      = "postmill-mta"
	DefaultPartitions = 12
	// DefaultFetchBytes bounds what one fetch of a delivery consumer buffers, over all its partitions
	// (franz-go's default is 50 MiB). A broadcast's backlog is then read a few thousand jobs at a time:
	// with the default, fetches of a 100,000-job bulk lane put the platform's peak RSS near 490 MiB
	// (docs/benchmarks.md).
	DefaultFetchBytes = 4 << 20
)

// Config locates the topic and names the consumer group.
type Config struct {
	Brokers []string // seed brokers, host:port
	Topic   string   // default DefaultTopic
	Group   string   // consumer group of the MTA tier; default DefaultGroup
	// BulkTopic is the bulk lane: broadcast jobs (DeliveryJob.Bulk), read after the transactional ones;
	// default Topic + ".bulk". Its consumer group is Group + "-bulk".
	BulkTopic string
	// DeadLetterTopic receives jobs the MTA gives up on (Delivery.DeadLetter); default Topic + ".dead".
	// It is created, with one partition, the first time a job is dead-lettered.
	DeadLetterTopic string
	// Partitions is used only when New creates the topic: the most MTA processes that can consume at once.
	// Default DefaultPartitions.
	Partitions int
	// Logger receives what the adapter cannot return to a caller (a record that is not a job). Default
	// slog.Default().
	Logger *slog.Logger
	// ClientOptions are appended to the franz-go options of every client (TLS, SASL, timeouts).
	ClientOptions []kgo.Opt
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafka: no brokers")
	}
	for _, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			return errors.New("kafka: empty broker address")
		}
	}
	if c.Partitions < 0 {
		return errors.New("kafka: partitions must not be negative")
	}
	// The topics as the queue will use them, defaults applied.
	d := c
	d.defaults()
	if d.BulkTopic == d.Topic || d.BulkTopic == d.DeadLetterTopic {
		return errors.New("kafka: the bulk topic must differ from the delivery and dead-letter topics")
	}
	return nil
}

func (c *Config) defaults() {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = c.Topic + ".dead"
	}
	if c.BulkTopic == "" {
		c.BulkTopic = c.Topic + ".bulk"
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Queue publishes and receives delivery jobs. A Queue only joins the consumer group at its first Receive,
// so a process that only publishes (the relay) never holds partitions it does not read. Close it to leave
// the group promptly.
type Queue struct {
	cfg      Config
	producer *kgo.Client
	recv     chan struct{} // one two-lane Receive at a time
	txQueued chan struct{} // ports.TransactionalSignal

	mu       sync.Mutex
	consumer *consumer // the delivery topic: transactional jobs
	bulk     *consumer // the bulk lane: broadcast jobs
	closed   bool
}

var _ ports.Queue = (*Queue)(nil)

// New connects to the brokers and creates the topics (the delivery topic and the bulk lane, each with
// Config.Partitions partitions and the broker's default replication) unless they exist.
func New(ctx context.Context, cfg Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	producer, err := newProducer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Queue{cfg: cfg, producer: producer, recv: make(chan struct{}, 1), txQueued: make(chan struct{}, 1)}, nil
}

// newProducer connects a client that produces to cfg.Topic with acknowledgement from every in-sync replica,
// creating the topic first unless it exists.
func newProducer(ctx context.Context, cfg Config) (*kgo.Client, error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}, cfg.ClientOptions...)
	producer, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: client: %w", err)
	}
	for _, topic := range []string{cfg.Topic, cfg.BulkTopic} {
		if topic == "" {
			continue
		}
		if err := ensureTopic(ctx, kadm.NewClient(producer), topic, cfg.Partitions); err != nil {
			producer.Close()
			return nil, err
		}
	}
	return producer, nil
}

// ensureTopic creates the topic when it is missing; a topic created meanwhile by another process is fine.
// Listing first means a deployment whose credentials may not create topics works once the topic exists.
func ensureTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("kafka: list topic %s: %w", topic, err)
	}
	if d, ok := details[topic]; ok && d.Err == nil {
		return nil
	}
	resp, err := adm.CreateTopic(ctx, int32(partitions), -1, nil, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: create topic %s: %w", topic, err)
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: create topic %s: %w %s", topic, resp.Err, resp.ErrMessage)
	}
	return nil
}

// Publish writes one record per job, keyed by Domain, and returns once the brokers acknowledged all of
// them (all in-sync replicas). The producer is idempotent, so a retried batch neither duplicates nor
// reorders records of a partition.
func (q *Queue) Publish(ctx context.Context, jobs []ports.DeliveryJob) error {
	if len(jobs) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, len(jobs))
	transactional := false
	for i, j := range jobs {
		r, err := record(j)
		if err != nil {
			return err
		}
		if j.Bulk {
			r.Topic = q.cfg.BulkTopic
		} else {
			transactional = true
		}
		recs[i] = r
	}
	if err := q.producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("kafka: publish %d jobs: %w", len(jobs), err)
	}
	if transactional {
		q.signalTransactional()
	}
	return nil
}

var _ ports.TransactionalSignal = (*Queue)(nil)

// TransactionalQueued implements ports.TransactionalSignal: a value follows the brokers' acknowledgement
// of transactional jobs this Queue published and, once this Queue consumes (its first Receive joined the
// group), the arrival of transactional jobs any process published: each record of the delivery topic its
// consumer buffers after a fetch signals. The bulk lane never does.
func (q *Queue) TransactionalQueued() <-chan struct{} { return q.txQueued }

// signalTransactional leaves a value in txQueued unless one is still unread, which already stands for
// the new jobs. It never blocks (it runs on the consumer client's fetching goroutine too).
func (q *Queue) signalTransactional() {
	select {
	case q.txQueued <- struct{}{}:
	default:
	}
}

// Receive returns between 1 and max deliveries (a max below 1 counts as 1), blocking until some are
// available or ctx ends (then it returns ctx's error). The first call joins the consumer groups; a group
// starts a partition without a committed offset at its beginning, so jobs published before any MTA ran
// are not skipped. Concurrent calls are served one after the other.
//
// Transactional jobs come first: what the delivery topic has due or buffered is returned before the bulk
// lane is looked at. When neither has anything, Receive waits on each in turn, transactionalWait on the
// delivery topic and bulkWait on the lane, until one has.
func (q *Queue) Receive(ctx context.Context, max int) ([]ports.Delivery, error) {
	if max < 1 {
		max = 1
	}
	tx, bulk, err := q.consumerClients()
	if err != nil {
		return nil, err
	}
	if bulk == nil {
		return tx.receive(ctx, max)
	}
	select {
	case q.recv <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-q.recv }()
	for {
		for _, c := range []*consumer{tx, bulk} {
			if ds, err := c.receiveNow(ctx, max); err != nil || len(ds) > 0 {
				return ds, err
			}
		}
		for _, lane := range []struct {
			c    *consumer
			wait time.Duration
		}{{tx, transactionalWait}, {bulk, bulkWait}} {
			wctx, cancel := context.WithTimeout(ctx, lane.wait)
			ds, err := lane.c.receive(wctx, max)
			cancel()
			if len(ds) > 0 {
				return ds, nil
			}
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return nil, err
			}
		}
	}
}

// How long an idle Receive waits on each lane before it looks at the other: a bulk job's wait is short,
// so a transactional job published meanwhile waits at most that long.
const (
	transactionalWait = 100 * time.Millisecond
	bulkWait          = 10 * time.Millisecond
)

func (q *Queue) consumerClients() (tx, bulk *consumer, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, nil, errClosed
	}
	if q.consumer == nil {
		// Every transactional record the consumer buffers signals too, so the MTA hears of jobs other
		// processes published (the split shape) as it hears of its own process's.
		c, err := newConsumer(q.cfg, q.producer, q.signalTransactional)
		if err != nil {
			return nil, nil, err
		}
		q.consumer = c
	}
	if q.bulk == nil && q.cfg.BulkTopic != "" {
		lane := q.cfg
		lane.Topic, lane.Group = q.cfg.BulkTopic, q.cfg.Group+"-bulk"
		c, err := newConsumer(lane, q.producer, nil)
		if err != nil {
			return nil, nil, err
		}
		q.bulk = c
	}
	return q.consumer, q.bulk, nil
}

// Close leaves the consumer group — committing what was acked, so that the partitions' next owners start
// right after it and redeliver everything else — and closes the clients. Later calls do nothing.
func (q *Queue) Close() {
	q.mu.Lock()
	c, bulk := q.consumer, q.bulk
	already := q.closed
	q.closed = true
	q.mu.Unlock()
	if already {
		return
	}
	for _, c := range []*consumer{c, bulk} {
		if c != nil {
			c.close()
		}
	}
	q.producer.Close()
}

var errClosed = errors.New("kafka: queue closed")

// wireJob is the record value: JSON with stable names, independent of the Go field names of ports.
type wireJob struct {
	ID             string    `json:"id"`
	OrganizationID string    `json:"organizationId"`
	MessageID      string    `json:"messageId"`
	Domain         string    `json:"domain"`
	RecipientIDs   []string  `json:"recipientIds"`
	Attempt        int       `json:"attempt"`
	FirstQueuedAt  time.Time `json:"firstQueuedAt"`
	NotBefore      time.Time `json:"notBefore,omitzero"`
	// Bulk marks a broadcast job: it is published to the bulk lane (Config.BulkTopic).
	Bulk bool `json:"bulk,omitempty"`
}

func record(j ports.DeliveryJob) (*kgo.Record, error) {
	value, err := json.Marshal(wireJob(j))
	if err != nil {
		return nil, fmt.Errorf("kafka: encode job %s: %w", j.ID, err)
	}
	return &kgo.Record{Key: []byte(j.Domain), Value: value}, nil
}

func decode(value []byte) (ports.DeliveryJob, error) {
	var w wireJob
	if err := json.Unmarshal(value, &w); err != nil {
		return ports.DeliveryJob{}, err
	}
	if w.ID == "" {
		return ports.DeliveryJob{}, errors.New("no job id")
	}
	return ports.DeliveryJob(w), nil
}
