package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// monitor watches a run from outside the platform: once a second the sends accepted so far, the jobs
// waiting in the outbox (not yet relayed), in the queue (relayed, not yet leased) and leased, and the
// arrivals at the sink; with sampling, every 100 ms what PostgreSQL's busy backends are waiting on
// (pg_stat_activity) and which lock requests are not granted (pg_locks).
type monitor struct {
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	start    atomic.Int64
	sink     *sink
	accepted *atomic.Int64

	mu      sync.Mutex
	rows    []monitorRow
	waits   map[string]int
	locks   map[string]int
	samples int
	busy    int
}

type monitorRow struct {
	at                     time.Duration
	accepted, arrived      int64
	outbox, queued, leased int64
}

func startMonitor(ctx context.Context, url string, s *sink, accepted *atomic.Int64, sample bool) *monitor {
	m := &monitor{sink: s, accepted: accepted, waits: map[string]int{}, locks: map[string]int{}}
	m.ctx, m.cancel = context.WithCancel(ctx)
	m.wg.Go(func() { m.backlog(url) })
	if sample {
		m.wg.Go(func() { m.sampleWaits(url) })
	}
	return m
}

// startSampler is a monitor that only samples PostgreSQL's busy backends (sampleWaits), for benchmarks
// with no backlog of their own to print.
func startSampler(ctx context.Context, url string) *monitor {
	m := &monitor{waits: map[string]int{}, locks: map[string]int{}}
	m.ctx, m.cancel = context.WithCancel(ctx)
	m.wg.Go(func() { m.sampleWaits(url) })
	return m
}

func (m *monitor) startClock(t time.Time) { m.start.Store(t.UnixNano()) }

func (m *monitor) stop() {
	m.cancel()
	m.wg.Wait()
}

func (m *monitor) backlog(url string) {
	conn, err := connect(m.ctx, url)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		st := m.start.Load()
		if st == 0 {
			continue
		}
		r := monitorRow{at: time.Since(time.Unix(0, st)), accepted: m.accepted.Load(), arrived: m.sink.count.Load()}
		err := conn.QueryRow(m.ctx, `SELECT (SELECT count(*) FROM delivery_outbox),
			(SELECT count(*) FILTER (WHERE lease_token IS NULL) FROM delivery_queue),
			(SELECT count(*) FILTER (WHERE lease_token IS NOT NULL) FROM delivery_queue)`).Scan(&r.outbox, &r.queued, &r.leased)
		if err != nil {
			continue
		}
		m.mu.Lock()
		m.rows = append(m.rows, r)
		m.mu.Unlock()
	}
}

func (m *monitor) sampleWaits(url string) {
	conn, err := connect(m.ctx, url)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		if m.start.Load() == 0 {
			continue
		}
		waits := map[string]int{}
		busy := 0
		rows, err := conn.Query(m.ctx, `SELECT COALESCE(wait_event_type, 'CPU'), COALESCE(wait_event, 'running'),
			regexp_replace(left(query, 70), '\s+', ' ', 'g')
			FROM pg_stat_activity
			WHERE datname = current_database() AND application_name <> $1 AND state = 'active'`, benchApplication)
		if err != nil {
			continue
		}
		for rows.Next() {
			var typ, ev, q string
			if rows.Scan(&typ, &ev, &q) == nil {
				busy++
				waits[typ+"/"+ev+"  "+q]++
			}
		}
		rows.Close()
		locks := map[string]int{}
		rows, err = conn.Query(m.ctx, `SELECT l.locktype || ' ' || l.mode || ' on ' || COALESCE(c.relname, l.relation::text, '-')
			FROM pg_locks l LEFT JOIN pg_class c ON c.oid = l.relation WHERE NOT l.granted`)
		if err == nil {
			for rows.Next() {
				var k string
				if rows.Scan(&k) == nil {
					locks[k]++
				}
			}
			rows.Close()
		}
		m.mu.Lock()
		m.samples++
		m.busy += busy
		for k, v := range waits {
			m.waits[k] += v
		}
		for k, v := range locks {
			m.locks[k] += v
		}
		m.mu.Unlock()
	}
}

func (m *monitor) print() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.rows) > 0 {
		fmt.Println("  backlog each second: s accepted arrived | outbox queued leased")
		for _, r := range m.rows {
			fmt.Printf("    %3.0f %6d %6d | %6d %6d %6d\n", r.at.Seconds(), r.accepted, r.arrived, r.outbox, r.queued, r.leased)
		}
	}
	m.printWaitsLocked()
}

// printWaits prints what sampleWaits saw.
func (m *monitor) printWaits() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.printWaitsLocked()
}

func (m *monitor) printWaitsLocked() {
	if m.samples == 0 {
		return
	}
	fmt.Printf("  PostgreSQL: %d samples, %.1f active backends on average; most frequent (wait, query), per sample:\n",
		m.samples, float64(m.busy)/float64(m.samples))
	for _, kv := range top(m.waits, 15) {
		fmt.Printf("    %5.2f  %s\n", float64(kv.v)/float64(m.samples), kv.k)
	}
	if len(m.locks) > 0 {
		fmt.Println("  lock requests waiting, per sample:")
		for _, kv := range top(m.locks, 8) {
			fmt.Printf("    %5.2f  %s\n", float64(kv.v)/float64(m.samples), kv.k)
		}
	}
}

type kv struct {
	k string
	v int
}

func top(m map[string]int, n int) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{strings.TrimSpace(k), v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].v > out[j].v || out[i].v == out[j].v && out[i].k < out[j].k })
	if len(out) > n {
		out = out[:n]
	}
	return out
}
