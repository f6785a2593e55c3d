package kafka

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postmill/postmill/ports"
)

// Record headers that carry a job's redelivery state from one delivery to the next. A consumer group
// cannot hide one record for a while or count how often it was read, so a nacked job is published again
// as a new record that says so.
const (
	// headerDeliveries is how many times the job was handed out before this record (decimal).
	headerDeliveries = "postmill-deliveries"
	// headerNotBefore is when the job may be handed out again (Unix milliseconds), after NackAfter.
	headerNotBefore = "postmill-not-before"
	// headerDeadReason and headerDeadAt describe a record on the dead-letter topic.
	headerDeadReason = "postmill-dead-reason"
	headerDeadAt     = "postmill-dead-at"
)

// Bounds of held and dead-lettered records.
const (
	// maxHeld bounds the records a consumer holds back until their not-before time. At the bound it stops
	// fetching until the earliest is due, so a burst of nacks cannot grow memory without end.
	maxHeld = 10000
	// maxHold is the longest a record is held back whatever its header says: the MTA's backoff stays well
	// below it, and a corrupt or hostile header cannot park a record (and the partition's commits behind
	// it) for days.
	maxHold = time.Hour
	// maxDeadReason bounds the reason header of a dead-lettered record.
	maxDeadReason = 2000
)

// held is a received record waiting for its not-before time. Its tracker entry stays unacked meanwhile, so
// the partition's commits stop before it and a consumer that dies holding it hands it to the next owner
// (which holds it back too: the header travels with the record).
type held struct {
	d   *delivery
	due time.Time
}

// redeliveryState reads a record's headers: how often the job was handed out before it, and when it may
// be handed out (zero for at once). Unreadable values count as absent.
func redeliveryState(r *kgo.Record, now time.Time) (before int, due time.Time) {
	for _, h := range r.Headers {
		switch h.Key {
		case headerDeliveries:
			if n, err := strconv.Atoi(string(h.Value)); err == nil && n > 0 && n < 1<<20 {
				before = n
			}
		case headerNotBefore:
			if ms, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				due = time.UnixMilli(ms)
			}
		}
	}
	if due.After(now.Add(maxHold)) {
		due = now.Add(maxHold)
	}
	return before, due
}

// hold keeps d until due. Called with c.mu held.
func (c *consumer) hold(d *delivery, due time.Time) {
	i, _ := slices.BinarySearchFunc(c.held, due, func(h held, t time.Time) int { return h.due.Compare(t) })
	c.held = slices.Insert(c.held, i, held{d: d, due: due})
}

// takeDue returns up to max held deliveries whose time has come, dropping those whose partition went to
// another member (its new owner reads them again).
func (c *consumer) takeDue(max int, now time.Time) []ports.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ports.Delivery
	n := 0
	for n < len(c.held) && !c.held[n].due.After(now) && len(out) < max {
		if d := c.held[n].d; !d.p.dead {
			out = append(out, d)
		}
		n++
	}
	clear(c.held[:n])
	c.held = c.held[n:]
	return out
}

// nextDue returns the earliest held record's time and whether the consumer holds as many as it may.
func (c *consumer) nextDue() (due time.Time, ok, full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) == 0 {
		return time.Time{}, false, false
	}
	return c.held[0].due, true, len(c.held) >= maxHeld
}

// dropHeld forgets held records of partitions that are gone. Called with c.mu held.
func (c *consumer) dropHeld() {
	c.held = slices.DeleteFunc(c.held, func(h held) bool { return h.d.p.dead })
}

// Deliveries implements ports.Delivery: one more than the deliveries recorded in the record's header.
// Nacks are counted; a redelivery after a consumer died is not (the record itself comes back unchanged).
func (d *delivery) Deliveries() int { return d.before + 1 }

// Nack is NackAfter with no delay.
func (d *delivery) Nack(ctx context.Context) error { return d.NackAfter(ctx, 0) }

// NackAfter publishes the job again as a new record (same key, so it stays with its domain's partition,
// behind the records already there) counting this delivery and, for a positive delay, naming the time
// before which no consumer hands it out; then it acks this record. If publishing fails nothing is acked
// and NackAfter may be called again. Errors: failed_precondition (already acked).
func (d *delivery) NackAfter(ctx context.Context, delay time.Duration) error {
	return d.again(ctx, delay, d.Deliveries(), "nack")
}

// HandBack implements ports.Delivery: NackAfter whose new record carries the delivery count this one
// arrived with, so a job handed back is not counted as tried.
func (d *delivery) HandBack(ctx context.Context, delay time.Duration) error {
	return d.again(ctx, delay, d.before, "hand back")
}

// again publishes the job again with deliveries recorded in its header and, for a positive delay, the
// time before which no consumer hands it out; then it acks this record.
func (d *delivery) again(ctx context.Context, delay time.Duration, deliveries int, what string) error {
	r, err := record(d.job)
	if err != nil {
		return err
	}
	r.Topic = d.c.topic
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: headerDeliveries, Value: []byte(strconv.Itoa(deliveries))})
	if delay > 0 {
		due := time.Now().Add(delay)
		ms := due.UnixMilli()
		if time.UnixMilli(ms).Before(due) {
			ms++ // never earlier than asked
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headerNotBefore, Value: []byte(strconv.FormatInt(ms, 10))})
	}
	return d.republish(ctx, r, what)
}

// DeadLetter implements ports.Delivery: the job is published to the dead-letter topic (Config.
// DeadLetterTopic, created on first use) with the reason, the delivery count and the time in headers and
// the job in the usual form as value, so an operator can read it and publish it back to the delivery
// topic unchanged; then this record is acked. Errors: failed_precondition (already acked).
func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	if err := d.c.ensureDeadTopic(ctx); err != nil {
		return err
	}
	r, err := record(d.job)
	if err != nil {
		return err
	}
	r.Topic = d.c.deadTopic
	r.Headers = []kgo.RecordHeader{
		{Key: headerDeadReason, Value: []byte(headerText(reason, maxDeadReason))},
		{Key: headerDeliveries, Value: []byte(strconv.Itoa(d.Deliveries()))},
		{Key: headerDeadAt, Value: []byte(time.Now().UTC().Format(time.RFC3339))},
	}
	return d.republish(ctx, r, "dead-letter")
}

// republish produces r and then settles d as done, once: a second call after success only retries the
// commit.
func (d *delivery) republish(ctx context.Context, r *kgo.Record, what string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.settled {
	case acked:
		return ports.Errorf(ports.CodeFailedPrecondition, "job %s was already acked", d.job.ID)
	case unsettled:
		if err := d.c.producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("kafka: %s %s: publish to %s: %w", what, d.job.ID, r.Topic, err)
		}
		d.settled = nacked
		d.c.markAcked(d.p, d.e)
	}
	return d.c.flush(ctx)
}

// ensureDeadTopic creates the dead-letter topic (one partition: dead letters are rare and read by hand)
// the first time a job is dead-lettered.
func (c *consumer) ensureDeadTopic(ctx context.Context) error {
	c.deadMu.Lock()
	defer c.deadMu.Unlock()
	if c.deadReady {
		return nil
	}
	if err := ensureTopic(ctx, c.admin, c.deadTopic, 1); err != nil {
		return err
	}
	c.deadReady = true
	return nil
}

// headerText makes s valid UTF-8 without control bytes (each written \xNN), cut to at most max bytes on a
// rune boundary: the reason comes from the consumer's error, which may quote a remote server.
func headerText(s string, max int) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if r < 0x20 || r == 0x7f {
			fmt.Fprintf(&b, `\x%02x`, r)
			continue
		}
		b.WriteRune(r)
	}
	s = b.String()
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
