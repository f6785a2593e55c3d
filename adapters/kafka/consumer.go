package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/postmill/postmill/ports"
)

// consumer is a Queue's group member. Its partitions map holds a tracker per partition currently assigned;
// a tracker is created on assignment and dropped (marked dead) on revocation or loss, so an Ack of a record
// from an earlier assignment never commits for a partition this member no longer owns.
//
// Rebalances are held off between PollRecords and the registration of the polled records
// (BlockRebalanceOnPoll, released by AllowRebalance at the end of receive): a record is therefore always
// registered with the tracker of the assignment it was fetched in, and no record escapes tracking.
//
// A record published by NackAfter with a not-before time still ahead is held back (held, sorted by time)
// and handed out by a later receive once due; its partition's commits wait for it meanwhile.
type consumer struct {
	cl        *kgo.Client
	producer  *kgo.Client
	admin     *kadm.Client
	topic     string
	deadTopic string
	log       *slog.Logger

	recv   chan struct{} // one receive at a time: poll, register and AllowRebalance belong together
	commit chan struct{} // one commit at a time, so a later commit never carries an older offset

	mu    sync.Mutex
	parts map[int32]*tracker
	held  []held // ascending due

	deadMu    sync.Mutex
	deadReady bool // the dead-letter topic exists
}

// bufferedHook calls its function for each record the client buffers after a fetch, ready to be polled
// (kgo.HookFetchRecordBuffered; it runs on the client's fetching goroutine, so the function must not block).
type bufferedHook func()

func (h bufferedHook) OnFetchRecordBuffered(*kgo.Record) { h() }

// revokeCommitTimeout bounds the commit made while giving partitions up.
const revokeCommitTimeout = 30 * time.Second

func newConsumer(cfg Config, producer *kgo.Client, buffered func()) (*consumer, error) {
	c := &consumer{
		producer:  producer,
		admin:     kadm.NewClient(producer),
		topic:     cfg.Topic,
		deadTopic: cfg.DeadLetterTopic,
		log:       cfg.Logger,
		recv:      make(chan struct{}, 1),
		commit:    make(chan struct{}, 1),
		parts:     map[int32]*tracker{},
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// A partition without a committed offset starts at its beginning (franz-go's default would rewind
		// only one minute, skipping older jobs).
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A fetch holds at most DefaultFetchBytes (a partition's share stays franz-go's 1 MiB); a response
		// of any size read from a broker at most four times that.
		kgo.FetchMaxBytes(DefaultFetchBytes),
		kgo.BrokerMaxReadBytes(4 * DefaultFetchBytes),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
	}, cfg.ClientOptions...)
	if buffered != nil {
		opts = append(opts, kgo.WithHooks(bufferedHook(buffered)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: consumer: %w", err)
	}
	c.cl = cl
	return c, nil
}

// receiveNow returns what is due or already buffered, at most max, without waiting for a fetch; none is
// not an error.
func (c *consumer) receiveNow(ctx context.Context, max int) ([]ports.Delivery, error) {
	select {
	case c.recv <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.recv }()
	if ds := c.takeDue(max, time.Now()); len(ds) > 0 {
		return ds, nil
	}
	//nolint:staticcheck // a nil context is franz-go's way to return only what is buffered, at once
	fetches := c.cl.PollRecords(nil, max)
	ds := c.register(fetches.Records())
	c.cl.AllowRebalance()
	if len(ds) == 0 && fetches.IsClientClosed() {
		return nil, errClosed
	}
	return ds, nil
}

func (c *consumer) receive(ctx context.Context, max int) ([]ports.Delivery, error) {
	select {
	case c.recv <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.recv }()
	for {
		if ds := c.takeDue(max, time.Now()); len(ds) > 0 {
			return ds, nil
		}
		// Wait for records no longer than until the first held one is due; holding as many as allowed,
		// only wait for that.
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if due, ok, full := c.nextDue(); ok {
			pctx, cancel = context.WithDeadline(ctx, due)
			if full {
				<-pctx.Done()
				cancel()
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				continue
			}
		}
		fetches := c.cl.PollRecords(pctx, max)
		ds := c.register(fetches.Records())
		c.cl.AllowRebalance()
		cancel()
		if len(ds) > 0 {
			return ds, nil
		}
		if fetches.IsClientClosed() {
			return nil, errClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fetches.EachError(func(topic string, partition int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				ferr = fmt.Errorf("kafka: fetch %s[%d]: %w", topic, partition, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		// Only undecodable or held records, or an empty poll: wait for more.
	}
}

// register turns polled records into deliveries tracked by their partition's tracker, holding back those
// whose not-before time is still ahead.
func (c *consumer) register(recs []*kgo.Record) []ports.Delivery {
	if len(recs) == 0 {
		return nil
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	ds := make([]ports.Delivery, 0, len(recs))
	for _, r := range recs {
		p := c.parts[r.Partition]
		if p == nil {
			// Not assigned to this member (cannot happen while rebalances wait for AllowRebalance): its
			// owner reads it from the committed offset.
			continue
		}
		e := p.add(r.Offset, r.LeaderEpoch)
		job, err := decode(r.Value)
		if err != nil {
			// A record that is not a job can never be delivered; acking it keeps it from blocking the
			// partition's commits forever.
			c.log.Error("kafka: skipping a record that is not a delivery job",
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "error", err)
			if e != nil {
				p.ack(e)
			}
			continue
		}
		before, due := redeliveryState(r, now)
		d := &delivery{c: c, p: p, e: e, job: job, key: r.Key, before: before}
		if due.After(now) {
			c.hold(d, due)
			continue
		}
		ds = append(ds, d)
	}
	return ds
}

// flush commits every tracker's acked run that is not committed yet, in one OffsetCommit request. Calls
// queue on c.commit, so concurrent Acks coalesce: whoever commits next carries every ack made meanwhile.
func (c *consumer) flush(ctx context.Context) error {
	select {
	case c.commit <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.commit }()
	return c.commitLocked(ctx, nil)
}

// commitLocked commits (holding c.commit) the acked runs of the partitions in only, or of all when only is
// nil, and records what the broker accepted.
func (c *consumer) commitLocked(ctx context.Context, only map[int32]bool) error {
	type pending struct {
		p  *tracker
		to kgo.EpochOffset
	}
	var todo []pending
	offsets := map[int32]kgo.EpochOffset{}
	c.mu.Lock()
	for id, p := range c.parts {
		if only != nil && !only[id] {
			continue
		}
		if to, ok := p.uncommitted(); ok {
			todo = append(todo, pending{p, to})
			offsets[id] = to
		}
	}
	c.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	var cerr error
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
						cerr = fmt.Errorf("partition %d: %w", p.Partition, err)
					}
				}
			}
		})
	if cerr != nil {
		return fmt.Errorf("kafka: commit: %w", cerr)
	}
	c.mu.Lock()
	for _, t := range todo {
		t.p.committedTo(t.to)
	}
	c.mu.Unlock()
	return nil
}

func (c *consumer) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range assigned[c.topic] {
		if c.parts[id] == nil {
			c.parts[id] = newTracker()
		}
	}
}

// revoked commits what was acked in the partitions going away — so their next owner starts right after
// it — and then forgets them.
func (c *consumer) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ids := revoked[c.topic]
	if len(ids) == 0 {
		return
	}
	only := map[int32]bool{}
	for _, id := range ids {
		only[id] = true
	}
	// The client's context ends only when the client is closed; the commit on leaving must still run, but
	// an unreachable broker must not hold Close forever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revokeCommitTimeout)
	defer cancel()
	c.commit <- struct{}{}
	if err := c.commitLocked(ctx, only); err != nil {
		c.log.Warn("kafka: commit on revoke failed; the next owner redelivers from the last commit",
			"topic", c.topic, "partitions", ids, "error", err)
	}
	c.forget(ids)
	<-c.commit
}

// lost forgets partitions taken away without a chance to commit (session expired, fenced).
func (c *consumer) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.forget(lost[c.topic])
}

func (c *consumer) forget(ids []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if p := c.parts[id]; p != nil {
			p.dead = true
			delete(c.parts, id)
		}
	}
	c.dropHeld()
}

func (c *consumer) close() {
	// Close leaves the group, which runs revoked (the final commit); rebalances must not wait for a poll.
	c.cl.CloseAllowingRebalance()
}

// delivery is one received job.
type delivery struct {
	c   *consumer
	p   *tracker
	e   *entry // nil for a record delivered twice in one assignment: its first delivery settles it
	job ports.DeliveryJob
	key []byte
	// before is how many times the job was handed out before this record (its headerDeliveries).
	before int

	mu      sync.Mutex
	settled settlement
}

type settlement int

const (
	unsettled settlement = iota
	acked
	nacked
)

// Job returns the delivered job.
func (d *delivery) Job() ports.DeliveryJob { return d.job }

// Ack marks the record done and commits the partition's acked run. It returns once that commit is
// accepted — or without committing this record when an earlier record of the partition is still
// outstanding (it is committed with that one's Ack) or when the partition went to another member meanwhile
// (the new owner delivers it again). Ack after Nack only retries the commit; a failed commit is retried by
// calling Ack again.
func (d *delivery) Ack(ctx context.Context) error {
	d.mu.Lock()
	if d.settled == unsettled {
		d.settled = acked
		d.c.markAcked(d.p, d.e)
	}
	d.mu.Unlock()
	return d.c.flush(ctx)
}

func (c *consumer) markAcked(p *tracker, e *entry) {
	if e == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p.ack(e)
}
