package rpc_test

import (
	"context"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
)

// analyticsAnswers are what the fake core answers for the log and analytics services, kept beside
// fakeCore so that the analytics area adds a file rather than growing the fake.
type analyticsAnswers struct {
	page ports.Page[ports.RequestLog]
	log  ports.RequestLog
	sum  ports.AnalyticsSummary
}

var analyticsByFake sync.Map // *fakeCore -> *analyticsAnswers

func (f *fakeCore) analytics() *analyticsAnswers {
	a, _ := analyticsByFake.LoadOrStore(f, &analyticsAnswers{})
	return a.(*analyticsAnswers)
}

func (f *fakeCore) ListLogs(ctx context.Context, orgID string, fl ports.LogFilter, q ports.PageQuery) (ports.Page[ports.RequestLog], error) {
	return f.analytics().page, f.record(ctx, "ListLogs", orgID, fl, q)
}

func (f *fakeCore) GetLog(ctx context.Context, orgID, id string) (ports.RequestLog, error) {
	return f.analytics().log, f.record(ctx, "GetLog", orgID, id)
}

func (f *fakeCore) RecordRequests(ctx context.Context, rows []ports.RequestLog) error {
	return f.record(ctx, "RecordRequests", rows)
}

func (f *fakeCore) Summarize(ctx context.Context, orgID string, q ports.AnalyticsQuery) (ports.AnalyticsSummary, error) {
	return f.analytics().sum, f.record(ctx, "Summarize", orgID, q)
}

func analyticsRoundTrips() []roundTrip {
	full := ports.RequestLog{
		ID: "l1", OrganizationID: "org1", OccurredAt: t1, Method: "POST", Route: "/v1/emails", Path: "/v1/emails",
		Status: 202, Latency: 1500 * time.Microsecond, APIKeyID: "k1", UserID: "", UserAgent: "curl/8",
		ClientIP: "192.0.2.0", RequestID: "r1", RequestBody: `{"password":"[redacted]"}`, ResponseBody: `{"id":"m1"}`,
	}
	filter := ports.LogFilter{From: t0, To: t1, Method: "POST", Status: 202, StatusClass: 2, Route: "/v1/emails", APIKeyID: "k1", Search: "emails"}
	sum := ports.AnalyticsSummary{
		Buckets: []ports.AnalyticsBucket{{Start: t0, AnalyticsCounts: ports.AnalyticsCounts{Sent: 3, Delivered: 2}}, {Start: t1}},
		Totals:  ports.AnalyticsCounts{Sent: 3, Delivered: 2, Bounced: 1, Complained: 1, Opened: 5, Clicked: 4, Failed: 1, Delayed: 2},
	}
	query := ports.AnalyticsQuery{From: t0, To: t1, Bucket: time.Hour, Domain: "example.com", Tag: "campaign:x"}
	return []roundTrip{
		{
			name: "ListLogs", answer: func(f *fakeCore) {
				f.analytics().page = ports.Page[ports.RequestLog]{Data: []ports.RequestLog{full, {ID: "l2"}}, NextCursor: "c2"}
			},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Logs.ListLogs(ctx, "org1", filter, ports.PageQuery{Limit: 25, Cursor: "c1"})
			},
			want:   ports.Page[ports.RequestLog]{Data: []ports.RequestLog{full, {ID: "l2"}}, NextCursor: "c2"},
			method: "ListLogs", args: []any{"org1", filter, ports.PageQuery{Limit: 25, Cursor: "c1"}},
		},
		{
			name: "ListLogs/empty", answer: func(f *fakeCore) {
				f.analytics().page = ports.Page[ports.RequestLog]{Data: []ports.RequestLog{}}
			},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Logs.ListLogs(ctx, "org1", ports.LogFilter{}, ports.PageQuery{})
			},
			want:   ports.Page[ports.RequestLog]{Data: []ports.RequestLog{}},
			method: "ListLogs", args: []any{"org1", ports.LogFilter{}, ports.PageQuery{}},
		},
		{
			name: "GetLog", answer: func(f *fakeCore) { f.analytics().log = full },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Logs.GetLog(ctx, "org1", "l1")
			},
			want: full, method: "GetLog", args: []any{"org1", "l1"},
		},
		{
			name: "RecordRequests", answer: func(*fakeCore) {},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return nil, c.Logs.RecordRequests(ctx, []ports.RequestLog{full, {ID: "l2"}})
			},
			want: nil, method: "RecordRequests", args: []any{[]ports.RequestLog{full, {ID: "l2"}}},
		},
		{
			name: "Summarize", answer: func(f *fakeCore) { f.analytics().sum = sum },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Analytics.Summarize(ctx, "org1", query)
			},
			want: sum, method: "Summarize", args: []any{"org1", query},
		},
		{
			name: "Summarize/empty", answer: func(f *fakeCore) { f.analytics().sum = ports.AnalyticsSummary{Buckets: []ports.AnalyticsBucket{}} },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Analytics.Summarize(ctx, "org1", ports.AnalyticsQuery{})
			},
			want: ports.AnalyticsSummary{Buckets: []ports.AnalyticsBucket{}}, method: "Summarize", args: []any{"org1", ports.AnalyticsQuery{}},
		},
	}
}
