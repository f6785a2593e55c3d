package porttest

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// AnalyticsHarness tells ExerciseAnalytics how to make stores of one adapter.
type AnalyticsHarness struct {
	// New returns a store no other test shares, its cleanup registered on t.
	New func(t *testing.T) ports.AnalyticsStore
	// Settle makes rows inserted so far visible to reads (ClickHouse: merges and materialized views are
	// asynchronous); nil when reads see inserts at once.
	Settle func(t *testing.T, s ports.AnalyticsStore)
}

// uuidV7 returns a UUIDv7 for at, so ids sort like their times.
func uuidV7(at time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	ms := uint64(at.UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ExerciseAnalytics runs the ports.AnalyticsStore contract: requests come back with every field intact,
// newest first, paged without loss or repetition, filtered by time, method, status and status class,
// route, API key and path text; a request of another organization is neither listed nor found; a request
// or event inserted twice counts once; the summary counts every event type in the right hourly or daily
// bucket, per domain and per tag, for its own organization only, with empty buckets present; Maintain
// prepares partitions, keeps recent rows and drops rows older than the retention.
func ExerciseAnalytics(t *testing.T, h AnalyticsHarness) {
	t.Helper()
	settle := func(s ports.AnalyticsStore) {
		if h.Settle != nil {
			h.Settle(t, s)
		}
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Hour).Add(-30 * time.Minute)

	t.Run("Requests", func(t *testing.T) {
		s := h.New(t)
		if err := s.Maintain(ctx, time.Now(), ports.DefaultAnalyticsRetention); err != nil {
			t.Fatalf("Maintain: %v", err)
		}
		org, other := uuidV7(now), uuidV7(now)
		var rows []ports.RequestLog
		for i := range 30 {
			at := now.Add(time.Duration(i) * time.Minute)
			r := ports.RequestLog{
				ID: uuidV7(at), OrganizationID: org, OccurredAt: at, Method: "GET", Route: "/v1/emails/{id}",
				Path: fmt.Sprintf("/v1/emails/m%02d", i), Status: 200, Latency: time.Duration(i+1) * time.Millisecond,
				APIKeyID: "key-a", UserAgent: "curl/8", ClientIP: "192.0.2.0", RequestID: fmt.Sprintf("req-%d", i),
				RequestBody: `{"to":"a@example.com"}`, ResponseBody: `{"id":"x"}`,
			}
			if i%3 == 0 {
				r.Method, r.Route, r.Path, r.Status, r.APIKeyID = "POST", "/v1/emails", "/v1/emails", 422, "key-b"
			}
			if i == 7 {
				r.Status = 503
			}
			rows = append(rows, r)
		}
		foreign := rows[5]
		foreign.ID, foreign.OrganizationID = uuidV7(now), other
		if err := s.InsertRequests(ctx, append(rows, foreign)); err != nil {
			t.Fatalf("InsertRequests: %v", err)
		}
		if err := s.InsertRequests(ctx, rows[:10]); err != nil {
			t.Fatalf("InsertRequests again: %v", err)
		}
		settle(s)

		got, err := s.GetRequest(ctx, org, rows[4].ID)
		if err != nil {
			t.Fatalf("GetRequest: %v", err)
		}
		want := rows[4]
		if !got.OccurredAt.Equal(want.OccurredAt) {
			t.Errorf("OccurredAt = %v, want %v", got.OccurredAt, want.OccurredAt)
		}
		got.OccurredAt = want.OccurredAt
		if got != want {
			t.Errorf("GetRequest = %+v\nwant %+v", got, want)
		}
		if _, err := s.GetRequest(ctx, other, rows[4].ID); ports.ErrorCode(err) != ports.CodeNotFound {
			t.Errorf("GetRequest from another organization: %v, want not found", err)
		}
		if _, err := s.GetRequest(ctx, org, foreign.ID); ports.ErrorCode(err) != ports.CodeNotFound {
			t.Errorf("GetRequest of another organization's request: %v, want not found", err)
		}

		// Paging newest first through everything, 7 at a time.
		var seen []string
		cursor := ""
		for {
			p, err := s.ListRequests(ctx, org, ports.LogFilter{}, ports.PageQuery{Limit: 7, Cursor: cursor})
			if err != nil {
				t.Fatalf("ListRequests: %v", err)
			}
			for _, r := range p.Data {
				seen = append(seen, r.ID)
			}
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		if len(seen) != len(rows) {
			t.Fatalf("listed %d requests, want %d (no duplicates, nothing of the other organization)", len(seen), len(rows))
		}
		for i, id := range seen {
			if id != rows[len(rows)-1-i].ID {
				t.Fatalf("row %d is %s, want %s: newest first", i, id, rows[len(rows)-1-i].ID)
			}
		}

		count := func(f ports.LogFilter) int {
			t.Helper()
			p, err := s.ListRequests(ctx, org, f, ports.PageQuery{Limit: 100})
			if err != nil {
				t.Fatalf("ListRequests(%+v): %v", f, err)
			}
			return len(p.Data)
		}
		for _, c := range []struct {
			name string
			f    ports.LogFilter
			want int
		}{
			{"method", ports.LogFilter{Method: "POST"}, 10},
			{"status", ports.LogFilter{Status: 503}, 1},
			{"status class 4", ports.LogFilter{StatusClass: 4}, 10},
			{"status class 2", ports.LogFilter{StatusClass: 2}, 19},
			{"route", ports.LogFilter{Route: "/v1/emails/{id}"}, 20},
			{"api key", ports.LogFilter{APIKeyID: "key-b"}, 10},
			{"search", ports.LogFilter{Search: "m1"}, 7}, // m10-m19 minus the POSTs 12, 15, 18
			{"search is literal", ports.LogFilter{Search: "m_1"}, 0},
			{"from", ports.LogFilter{From: now.Add(20 * time.Minute)}, 10},
			{"to", ports.LogFilter{To: now.Add(5 * time.Minute)}, 5},
		} {
			if got := count(c.f); got != c.want {
				t.Errorf("filter %s: %d rows, want %d", c.name, got, c.want)
			}
		}
		if p, err := s.ListRequests(ctx, other, ports.LogFilter{}, ports.PageQuery{Limit: 100}); err != nil || len(p.Data) != 1 || p.Data[0].ID != foreign.ID {
			t.Errorf("the other organization lists %+v, %v; want its one request", p.Data, err)
		}
		if _, err := s.ListRequests(ctx, org, ports.LogFilter{}, ports.PageQuery{Limit: 5, Cursor: "not a cursor"}); ports.ErrorCode(err) != ports.CodeInvalidArgument {
			t.Errorf("a bad cursor: %v, want a validation error", err)
		}
	})

	t.Run("Events", func(t *testing.T) {
		s := h.New(t)
		if err := s.Maintain(ctx, time.Now(), ports.DefaultAnalyticsRetention); err != nil {
			t.Fatalf("Maintain: %v", err)
		}
		org, other := uuidV7(now), uuidV7(now)
		types := []string{ports.EventEmailSent, ports.EventEmailDelivered, ports.EventEmailBounced,
			ports.EventEmailComplained, ports.EventEmailOpened, ports.EventEmailClicked, ports.EventEmailFailed,
			ports.EventEmailDeliveryDelayed, ports.EventEmailQueued}
		var evs []ports.AnalyticsEvent
		// Hour 0 (now-2h): every type once on a.example; hour 1: three sends on b.example tagged
		// campaign:x; hour 2: one send untagged with no domain.
		base := now.Add(-2 * time.Hour)
		for _, ty := range types {
			evs = append(evs, ports.AnalyticsEvent{ID: uuidV7(base), OrganizationID: org, Type: ty,
				MessageID: uuidV7(base), Domain: "a.example", OccurredAt: base})
		}
		for range 3 {
			at := base.Add(time.Hour)
			evs = append(evs, ports.AnalyticsEvent{ID: uuidV7(at), OrganizationID: org, Type: ports.EventEmailSent,
				MessageID: uuidV7(at), Domain: "b.example", Tags: []string{"campaign:x", "kind:news"}, OccurredAt: at})
		}
		evs = append(evs, ports.AnalyticsEvent{ID: uuidV7(now), OrganizationID: org, Type: ports.EventEmailSent,
			MessageID: uuidV7(now), OccurredAt: now})
		evs = append(evs, ports.AnalyticsEvent{ID: uuidV7(now), OrganizationID: other, Type: ports.EventEmailSent,
			MessageID: uuidV7(now), Domain: "a.example", OccurredAt: now})
		if err := s.InsertEvents(ctx, evs); err != nil {
			t.Fatalf("InsertEvents: %v", err)
		}
		// A re-delivered batch, overlapping the first, counts once; so does a duplicate within one batch.
		if err := s.InsertEvents(ctx, append(evs[:4:4], evs[0])); err != nil {
			t.Fatalf("InsertEvents again: %v", err)
		}
		settle(s)

		hourly := ports.AnalyticsQuery{From: now.Add(-23 * time.Hour), To: now.Add(30 * time.Minute), Bucket: time.Hour}
		sum, err := s.Summarize(ctx, org, hourly)
		if err != nil {
			t.Fatalf("Summarize: %v", err)
		}
		if len(sum.Buckets) != 24 {
			t.Fatalf("%d hourly buckets, want 24", len(sum.Buckets))
		}
		wantTotals := ports.AnalyticsCounts{Sent: 5, Delivered: 1, Bounced: 1, Complained: 1, Opened: 1, Clicked: 1, Failed: 1, Delayed: 1}
		if sum.Totals != wantTotals {
			t.Errorf("totals %+v, want %+v", sum.Totals, wantTotals)
		}
		byStart := map[time.Time]ports.AnalyticsCounts{}
		for i, b := range sum.Buckets {
			if i > 0 && !b.Start.Equal(sum.Buckets[i-1].Start.Add(time.Hour)) {
				t.Fatalf("bucket %d starts at %v, not an hour after the previous", i, b.Start)
			}
			byStart[b.Start.UTC()] = b.AnalyticsCounts
		}
		h0 := base.Truncate(time.Hour)
		if c := byStart[h0]; c.Sent != 1 || c.Delivered != 1 || c.Delayed != 1 {
			t.Errorf("bucket %v = %+v, want one of each", h0, c)
		}
		if c := byStart[h0.Add(time.Hour)]; c.Sent != 3 {
			t.Errorf("bucket %v sent %d, want 3", h0.Add(time.Hour), c.Sent)
		}

		check := func(name, domain, tag string, wantSent int64) {
			t.Helper()
			q := hourly
			q.Domain, q.Tag = domain, tag
			got, err := s.Summarize(ctx, org, q)
			if err != nil {
				t.Fatalf("Summarize %s: %v", name, err)
			}
			if got.Totals.Sent != wantSent {
				t.Errorf("%s: sent %d, want %d", name, got.Totals.Sent, wantSent)
			}
		}
		check("domain a.example", "a.example", "", 1)
		check("domain b.example", "b.example", "", 3)
		check("tag campaign:x", "", "campaign:x", 3)
		check("tag kind:news", "", "kind:news", 3)
		check("unknown tag", "", "campaign:y", 0)

		daily := ports.AnalyticsQuery{From: now.Add(-29 * 24 * time.Hour), To: now.Add(time.Hour), Bucket: 24 * time.Hour}
		d, err := s.Summarize(ctx, org, daily)
		if err != nil {
			t.Fatalf("Summarize daily: %v", err)
		}
		if n := len(d.Buckets); n < 30 || n > 31 {
			t.Errorf("%d daily buckets over 30 days, want 30 or 31", n)
		}
		for _, b := range d.Buckets {
			if !b.Start.Equal(b.Start.Truncate(24 * time.Hour)) {
				t.Errorf("daily bucket starts at %v, not at midnight UTC", b.Start)
			}
		}
		if d.Totals != wantTotals {
			t.Errorf("daily totals %+v, want %+v", d.Totals, wantTotals)
		}
		o, err := s.Summarize(ctx, other, hourly)
		if err != nil || o.Totals != (ports.AnalyticsCounts{Sent: 1}) {
			t.Errorf("other organization's totals %+v, %v; want one send", o.Totals, err)
		}
	})

	t.Run("Retention", func(t *testing.T) {
		s := h.New(t)
		real := time.Now().UTC()
		org := uuidV7(real)
		old, recent := real.Add(-40*24*time.Hour), real.Add(-time.Hour)
		req := func(at time.Time) ports.RequestLog {
			return ports.RequestLog{ID: uuidV7(at), OrganizationID: org, OccurredAt: at, Method: "GET",
				Route: "/v1/domains", Path: "/v1/domains", Status: 200}
		}
		if err := s.InsertRequests(ctx, []ports.RequestLog{req(old), req(recent)}); err != nil {
			t.Fatalf("InsertRequests: %v", err)
		}
		ev := func(at time.Time) ports.AnalyticsEvent {
			return ports.AnalyticsEvent{ID: uuidV7(at), OrganizationID: org, Type: ports.EventEmailSent,
				MessageID: uuidV7(at), OccurredAt: at}
		}
		if err := s.InsertEvents(ctx, []ports.AnalyticsEvent{ev(old), ev(recent)}); err != nil {
			t.Fatalf("InsertEvents: %v", err)
		}
		// Twice: the second run finds everything made.
		for range 2 {
			if err := s.Maintain(ctx, real, ports.AnalyticsRetention{}); err != nil {
				t.Fatalf("Maintain: %v", err)
			}
		}
		settle(s)
		p, err := s.ListRequests(ctx, org, ports.LogFilter{}, ports.PageQuery{Limit: 10})
		if err != nil || len(p.Data) != 1 || !p.Data[0].OccurredAt.Equal(recent.Truncate(time.Microsecond)) {
			t.Errorf("after 30 days' retention the requests are %+v, %v; want only the recent one", p.Data, err)
		}
		sum, err := s.Summarize(ctx, org, ports.AnalyticsQuery{From: real.Add(-89 * 24 * time.Hour), To: real, Bucket: 24 * time.Hour})
		if err != nil || sum.Totals.Sent != 2 {
			t.Errorf("events 40 days old are kept for 90 days: sent %d, %v; want 2", sum.Totals.Sent, err)
		}
		if err := s.Maintain(ctx, real, ports.AnalyticsRetention{Events: 10 * 24 * time.Hour}); err != nil {
			t.Fatalf("Maintain: %v", err)
		}
		settle(s)
		sum, err = s.Summarize(ctx, org, ports.AnalyticsQuery{From: real.Add(-89 * 24 * time.Hour), To: real, Bucket: 24 * time.Hour})
		if err != nil || sum.Totals.Sent != 1 {
			t.Errorf("after 10 days' event retention: sent %d, %v; want 1", sum.Totals.Sent, err)
		}
	})
}

// MeasureAnalytics inserts events events and requests requests of one organization, spread over the last
// 30 days, in batches of 5,000, and logs the insert rates and the time of a 30-day summary and of the first
// page of the request log. It asserts only that everything was counted; the figures are for
// docs/benchmarks.md.
func MeasureAnalytics(t *testing.T, s ports.AnalyticsStore, events, requests int) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	if err := s.Maintain(ctx, now, ports.DefaultAnalyticsRetention); err != nil {
		t.Fatal(err)
	}
	org := uuidV7(now)
	span := 30 * 24 * time.Hour
	types := []string{ports.EventEmailSent, ports.EventEmailDelivered, ports.EventEmailOpened, ports.EventEmailClicked}
	start := time.Now()
	for i := 0; i < events; i += 5000 {
		batch := make([]ports.AnalyticsEvent, 0, 5000)
		for j := i; j < min(i+5000, events); j++ {
			at := now.Add(-span / time.Duration(events+1) * time.Duration(j))
			batch = append(batch, ports.AnalyticsEvent{ID: uuidV7(at), OrganizationID: org, Type: types[j%len(types)],
				MessageID: uuidV7(at), Domain: fmt.Sprintf("d%d.example", j%5), Tags: []string{fmt.Sprintf("campaign:c%d", j%10)}, OccurredAt: at})
		}
		if err := s.InsertEvents(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	evDur := time.Since(start)
	start = time.Now()
	for i := 0; i < requests; i += 5000 {
		batch := make([]ports.RequestLog, 0, 5000)
		for j := i; j < min(i+5000, requests); j++ {
			at := now.Add(-span / time.Duration(requests+1) * time.Duration(j))
			batch = append(batch, ports.RequestLog{ID: uuidV7(at), OrganizationID: org, OccurredAt: at, Method: "POST",
				Route: "/v1/emails", Path: "/v1/emails", Status: 202, Latency: time.Millisecond, APIKeyID: "k",
				RequestBody: `{"from":"a@example.com","to":["b@example.com"],"subject":"hello","text":"hi"}`, ResponseBody: `{"id":"x"}`})
		}
		if err := s.InsertRequests(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	reqDur := time.Since(start)
	start = time.Now()
	sum, err := s.Summarize(ctx, org, ports.AnalyticsQuery{From: now.Add(-span + 24*time.Hour), To: now, Bucket: 24 * time.Hour})
	sumDur := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	page, err := s.ListRequests(ctx, org, ports.LogFilter{}, ports.PageQuery{Limit: 25})
	pageDur := time.Since(start)
	if err != nil || len(page.Data) != min(25, requests) {
		t.Fatalf("first page: %d rows, %v", len(page.Data), err)
	}
	got := sum.Totals.Sent + sum.Totals.Delivered + sum.Totals.Opened + sum.Totals.Clicked
	t.Logf("%d events in %v (%.0f/s); %d requests in %v (%.0f/s); 30-day summary %v (%d counted); first log page %v",
		events, evDur.Round(time.Millisecond), float64(events)/evDur.Seconds(), requests, reqDur.Round(time.Millisecond),
		float64(requests)/reqDur.Seconds(), sumDur.Round(time.Microsecond), got, pageDur.Round(time.Microsecond))
}
