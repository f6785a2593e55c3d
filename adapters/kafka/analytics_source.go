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
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postmill/postmill/ports"
)

// Defaults of AnalyticsSourceConfig.
const (
	DefaultAnalyticsGroup = "postmill-analytics"
	// DefaultMaxEventRecord bounds one event record's value; a longer record is malformed. An event record
	// is a few hundred bytes (a provider response is at most one SMTP reply).
	DefaultMaxEventRecord = 64 << 10
	// DefaultAnalyticsFetchBytes bounds what one fetch may buffer, over all partitions.
	DefaultAnalyticsFetchBytes = 8 << 20
	// DefaultAnalyticsPollWait is how long ReadEvents waits for records before answering 0.
	DefaultAnalyticsPollWait = time.Second
)

// AnalyticsSourceConfig locates the events topic and names the analytics tier's consumer group.
type AnalyticsSourceConfig struct {
	Brokers []string // seed brokers, host:port
	Topic   string   // default DefaultEventsTopic
	Group   string   // default DefaultAnalyticsGroup
	// Partitions is used only when the topic is missing and created here; default DefaultPartitions.
	Partitions int
	// PollWait is how long ReadEvents waits for records when none are buffered; default
	// DefaultAnalyticsPollWait.
	PollWait time.Duration
	// MaxRecordBytes bounds one record's value (default DefaultMaxEventRecord); FetchBytes bounds one
	// fetch (default DefaultAnalyticsFetchBytes; a partition gets at most a quarter of it).
	MaxRecordBytes int
	FetchBytes     int32
	// Malformed, when set, is told how many records of a batch could not be read as events; they are
	// skipped and committed with the batch.
	Malformed func(n int)
	// Logger receives a line per malformed record (topic, partition, offset, reason; never the value).
	Logger *slog.Logger
	// ClientOptions are appended to the franz-go options of the client (TLS, SASL, timeouts).
	ClientOptions []kgo.Opt
}

// Validate reports a configuration that cannot work.
func (c AnalyticsSourceConfig) Validate() error {
	return Config{Brokers: c.Brokers, Partitions: c.Partitions}.Validate()
}

func (c *AnalyticsSourceConfig) defaults() {
	if c.Topic == "" {
		c.Topic = DefaultEventsTopic
	}
	if c.Group == "" {
		c.Group = DefaultAnalyticsGroup
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.PollWait <= 0 {
		c.PollWait = DefaultAnalyticsPollWait
	}
	if c.MaxRecordBytes <= 0 {
		c.MaxRecordBytes = DefaultMaxEventRecord
	}
	if c.FetchBytes <= 0 {
		c.FetchBytes = DefaultAnalyticsFetchBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// AnalyticsSource reads message events from the events topic (what EventStream publishes) as one consumer
// group, for the analytics pipeline (ports.AnalyticsEventSource).
//
// Delivery is at least once. ReadEvents polls up to max records, hands the message events among them to
// handle, and commits the batch's offsets only after handle returned nil. Rebalances are held off from the
// poll to the commit (BlockRebalanceOnPoll), so a batch is never committed for a partition another member
// took meanwhile. When handle (or the commit) fails, the partitions are rewound to the batch's first
// offsets and the same records come again; a process that dies before committing leaves them to the next
// owner of the partitions. The store deduplicates on the event id, so a batch handed twice counts once.
//
// A record that is not an event (not JSON, too long, an id that is not a UUID, no type or time) is logged,
// counted through Malformed and committed with its batch: it is never read again. Events other than
// message events (domain.*, contact.*) are committed without being handed out, as the PostgreSQL outbox
// does. The Domain and Tags of the events handed out are empty: the topic does not carry them.
type AnalyticsSource struct {
	cfg AnalyticsSourceConfig
	cl  *kgo.Client

	read sync.Mutex // one ReadEvents at a time: poll, handle, commit and AllowRebalance belong together

	mu     sync.Mutex
	oldest map[int32]time.Time // per partition, the time of the oldest event known to wait
	behind map[int32]int64     // per partition, records after the last one read, at that read
}

var _ ports.AnalyticsEventSource = (*AnalyticsSource)(nil)

// NewAnalyticsSource connects to the brokers, creates the topic unless it exists, and joins the group. A
// partition without a committed offset is read from its beginning, so events published before the
// analytics tier first ran are counted.
func NewAnalyticsSource(ctx context.Context, cfg AnalyticsSourceConfig) (*AnalyticsSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	s := &AnalyticsSource{cfg: cfg, oldest: map[int32]time.Time{}, behind: map[int32]int64{}}
	partitionBytes := max(cfg.FetchBytes/4, int32(cfg.MaxRecordBytes))
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(cfg.FetchBytes),
		kgo.FetchMaxPartitionBytes(partitionBytes),
		kgo.BrokerMaxReadBytes(2 * cfg.FetchBytes),
		kgo.OnPartitionsRevoked(s.forget),
		kgo.OnPartitionsLost(s.forget),
	}, cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: analytics consumer: %w", err)
	}
	if err := ensureTopic(ctx, kadm.NewClient(cl), cfg.Topic, cfg.Partitions); err != nil {
		cl.Close()
		return nil, err
	}
	s.cl = cl
	return s, nil
}

// forget drops the lag figures of partitions this member no longer owns: their next owner reports them.
func (s *AnalyticsSource) forget(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range lost[s.cfg.Topic] {
		delete(s.oldest, p)
		delete(s.behind, p)
	}
}

// ReadEvents implements ports.AnalyticsEventSource: it waits up to PollWait for records, hands the message
// events among at most max of them to handle, and commits them all once handle returned nil. It returns
// how many records it took (message events, other events and malformed records), 0 when none came.
func (s *AnalyticsSource) ReadEvents(ctx context.Context, max int, handle func(context.Context, []ports.AnalyticsEvent) error) (int, error) {
	if max < 1 {
		max = 1
	}
	s.read.Lock()
	defer s.read.Unlock()

	pctx, cancel := context.WithTimeout(ctx, s.cfg.PollWait)
	fetches := s.cl.PollRecords(pctx, max)
	cancel()
	defer s.cl.AllowRebalance()
	if fetches.IsClientClosed() {
		return 0, errAnalyticsClosed
	}
	var fetchErr error
	fetches.EachError(func(topic string, p int32, err error) {
		if fetchErr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			fetchErr = fmt.Errorf("kafka: fetch %s/%d: %w", topic, p, err)
		}
	})
	records := fetches.Records()
	if len(records) == 0 {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return 0, fetchErr
	}

	// The first record of each partition in the batch is the oldest of that partition not yet committed:
	// every earlier one was committed by an earlier batch (or the partitions were rewound to it).
	first := map[int32]*kgo.Record{}
	last := map[int32]*kgo.Record{}
	for _, r := range records {
		if f, ok := first[r.Partition]; !ok || r.Offset < f.Offset {
			first[r.Partition] = r
		}
		if l, ok := last[r.Partition]; !ok || r.Offset > l.Offset {
			last[r.Partition] = r
		}
	}
	hw := map[int32]int64{}
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.Topic == s.cfg.Topic && p.HighWatermark > hw[p.Partition] {
			hw[p.Partition] = p.HighWatermark
		}
	})
	s.mu.Lock()
	for p, r := range first {
		s.oldest[p] = r.Timestamp
	}
	s.mu.Unlock()

	batch := make([]ports.AnalyticsEvent, 0, len(records))
	malformed := 0
	for _, r := range records {
		ev, ok, err := s.decode(r)
		switch {
		case err != nil:
			malformed++
			s.cfg.Logger.Warn("analytics: skipping a malformed event record", slog.String("topic", r.Topic),
				slog.Int("partition", int(r.Partition)), slog.Int64("offset", r.Offset), slog.String("reason", err.Error()))
		case ok:
			batch = append(batch, ev)
		}
	}
	if len(batch) > 0 {
		if err := handle(ctx, batch); err != nil {
			s.rewind(first)
			return 0, err
		}
	}
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer ccancel()
	if err := s.cl.CommitRecords(cctx, records...); err != nil {
		s.rewind(first)
		return 0, fmt.Errorf("kafka: commit %d event records: %w", len(records), err)
	}
	if malformed > 0 && s.cfg.Malformed != nil {
		s.cfg.Malformed(malformed)
	}

	// Lag after the commit: a partition read to its high watermark has nothing waiting; one with more
	// records after the batch has its next record waiting, which was published no earlier than the batch's
	// last one (a lower bound of its age).
	s.mu.Lock()
	for p, l := range last {
		rest := hw[p] - (l.Offset + 1)
		if rest <= 0 {
			delete(s.oldest, p)
			s.behind[p] = 0
			continue
		}
		s.oldest[p] = l.Timestamp
		s.behind[p] = rest
	}
	s.mu.Unlock()
	return len(records), nil
}

// rewind moves the partitions back to the batch's first records, so the next poll reads them again. It
// runs while rebalances are held off, so the partitions are still this member's.
func (s *AnalyticsSource) rewind(first map[int32]*kgo.Record) {
	offsets := make(map[int32]kgo.EpochOffset, len(first))
	for p, r := range first {
		offsets[p] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
	}
	s.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: offsets})
}

// decode reads one record: ok is false (with no error) for an event that is not a message event.
func (s *AnalyticsSource) decode(r *kgo.Record) (ports.AnalyticsEvent, bool, error) {
	if len(r.Value) > s.cfg.MaxRecordBytes {
		return ports.AnalyticsEvent{}, false, fmt.Errorf("value of %d bytes, more than %d", len(r.Value), s.cfg.MaxRecordBytes)
	}
	var e eventRecord
	if err := json.Unmarshal(r.Value, &e); err != nil {
		return ports.AnalyticsEvent{}, false, fmt.Errorf("not an event: %v", err)
	}
	switch {
	case !isUUID(e.ID):
		return ports.AnalyticsEvent{}, false, errors.New("id is not a UUID")
	case !isUUID(e.OrganizationID):
		return ports.AnalyticsEvent{}, false, errors.New("organization_id is not a UUID")
	case e.Type == "":
		return ports.AnalyticsEvent{}, false, errors.New("no type")
	case e.OccurredAt.IsZero():
		return ports.AnalyticsEvent{}, false, errors.New("no occurred_at")
	case e.MessageID != "" && !isUUID(e.MessageID):
		return ports.AnalyticsEvent{}, false, errors.New("message_id is not a UUID")
	}
	if !strings.HasPrefix(e.Type, "email.") || e.MessageID == "" {
		return ports.AnalyticsEvent{}, false, nil
	}
	return ports.AnalyticsEvent{ID: strings.ToLower(e.ID), OrganizationID: strings.ToLower(e.OrganizationID),
		Type: e.Type, MessageID: strings.ToLower(e.MessageID), OccurredAt: e.OccurredAt.UTC()}, true, nil
}

// isUUID reports whether s is a UUID in its 36-character text form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// Lag implements ports.AnalyticsEventSource from record timestamps (the time the core published each
// event): per partition this member reads, the age of the first record not yet committed when the last
// batch was read or failed, or, when the last batch was committed and more records waited behind it, the
// age of that batch's last record (the next one is no older, so this is a lower bound). A partition read
// to its high watermark counts 0. Partitions this member has not read yet count 0 until it reads them.
func (s *AnalyticsSource) Lag(_ context.Context, now time.Time) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lag time.Duration
	for _, t := range s.oldest {
		lag = max(lag, now.Sub(t))
	}
	return lag, nil
}

// Behind is how many records wait after the last one read, over the partitions this member reads, from
// the high watermarks of the last fetch of each partition.
func (s *AnalyticsSource) Behind() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, b := range s.behind {
		n += b
	}
	return n
}

// Close leaves the group (committing nothing more) and closes the client.
func (s *AnalyticsSource) Close() { s.cl.Close() }

var errAnalyticsClosed = errors.New("kafka: analytics source closed")
