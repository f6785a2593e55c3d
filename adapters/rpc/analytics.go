package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	analyticsv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/analytics/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/analytics/v1/analyticsv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.LogService { return &c.Logs },
		analyticsv1connect.NewLogServiceHandler, newLogServer,
		analyticsv1connect.NewLogServiceClient, newLogClient).
		calledBy(analyticsv1connect.LogServiceName, TierEdge))
	register(portService(func(c *ports.Core) *ports.AnalyticsService { return &c.Analytics },
		analyticsv1connect.NewAnalyticsServiceHandler, newAnalyticsServer,
		analyticsv1connect.NewAnalyticsServiceClient, newAnalyticsClient).
		calledBy(analyticsv1connect.AnalyticsServiceName, TierEdge))
}

// logServer serves postmill.analytics.v1.LogService from a ports.LogService.
type logServer struct {
	svc ports.LogService
	log *slog.Logger
}

func newLogServer(svc ports.LogService, log *slog.Logger) analyticsv1connect.LogServiceHandler {
	return &logServer{svc: svc, log: log}
}

func (s *logServer) ListLogs(ctx context.Context, req *connect.Request[analyticsv1.ListLogsRequest]) (*connect.Response[analyticsv1.ListLogsResponse], error) {
	m := req.Msg
	page, err := s.svc.ListLogs(ctx, m.GetOrganizationId(), logFilterFromProto(m.GetFilter()),
		ports.PageQuery{Limit: int(m.GetLimit()), Cursor: m.GetCursor()})
	return respond(ctx, s.log, req, err, func() *analyticsv1.ListLogsResponse {
		out := &analyticsv1.ListLogsResponse{NextCursor: page.NextCursor}
		for _, r := range page.Data {
			out.Items = append(out.Items, requestLogToProto(r))
		}
		return out
	})
}

func (s *logServer) GetLog(ctx context.Context, req *connect.Request[analyticsv1.GetLogRequest]) (*connect.Response[analyticsv1.GetLogResponse], error) {
	r, err := s.svc.GetLog(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *analyticsv1.GetLogResponse {
		return &analyticsv1.GetLogResponse{Log: requestLogToProto(r)}
	})
}

func (s *logServer) RecordRequests(ctx context.Context, req *connect.Request[analyticsv1.RecordRequestsRequest]) (*connect.Response[analyticsv1.RecordRequestsResponse], error) {
	var rows []ports.RequestLog
	if in := req.Msg.GetRows(); in != nil {
		rows = make([]ports.RequestLog, 0, len(in))
		for _, r := range in {
			rows = append(rows, requestLogFromProto(r))
		}
	}
	err := s.svc.RecordRequests(ctx, rows)
	return respond(ctx, s.log, req, err, func() *analyticsv1.RecordRequestsResponse {
		return &analyticsv1.RecordRequestsResponse{}
	})
}

// logClient implements ports.LogService over postmill.analytics.v1.LogService.
type logClient struct {
	conn analyticsv1connect.LogServiceClient
}

func newLogClient(conn analyticsv1connect.LogServiceClient) ports.LogService {
	return &logClient{conn: conn}
}

func (c *logClient) ListLogs(ctx context.Context, organizationID string, f ports.LogFilter, q ports.PageQuery) (ports.Page[ports.RequestLog], error) {
	return call(ctx, analyticsv1connect.LogServiceListLogsProcedure, c.conn.ListLogs, &analyticsv1.ListLogsRequest{
		OrganizationId: organizationID, Filter: logFilterToProto(f), Limit: int32(q.Limit), Cursor: q.Cursor,
	}, func(res *analyticsv1.ListLogsResponse) ports.Page[ports.RequestLog] {
		page := ports.Page[ports.RequestLog]{Data: make([]ports.RequestLog, 0, len(res.GetItems())), NextCursor: res.GetNextCursor()}
		for _, r := range res.GetItems() {
			page.Data = append(page.Data, requestLogFromProto(r))
		}
		return page
	})
}

func (c *logClient) GetLog(ctx context.Context, organizationID, id string) (ports.RequestLog, error) {
	return call(ctx, analyticsv1connect.LogServiceGetLogProcedure, c.conn.GetLog,
		&analyticsv1.GetLogRequest{OrganizationId: organizationID, Id: id},
		pick((*analyticsv1.GetLogResponse).GetLog, requestLogFromProto))
}

func (c *logClient) RecordRequests(ctx context.Context, rows []ports.RequestLog) error {
	msg := &analyticsv1.RecordRequestsRequest{}
	for _, r := range rows {
		msg.Rows = append(msg.Rows, requestLogToProto(r))
	}
	return exec(ctx, analyticsv1connect.LogServiceRecordRequestsProcedure, c.conn.RecordRequests, msg)
}

// analyticsServer serves postmill.analytics.v1.AnalyticsService from a ports.AnalyticsService.
type analyticsServer struct {
	svc ports.AnalyticsService
	log *slog.Logger
}

func newAnalyticsServer(svc ports.AnalyticsService, log *slog.Logger) analyticsv1connect.AnalyticsServiceHandler {
	return &analyticsServer{svc: svc, log: log}
}

func (s *analyticsServer) Summarize(ctx context.Context, req *connect.Request[analyticsv1.SummarizeRequest]) (*connect.Response[analyticsv1.SummarizeResponse], error) {
	m := req.Msg
	sum, err := s.svc.Summarize(ctx, m.GetOrganizationId(), ports.AnalyticsQuery{
		From: timeFromProto(m.GetFrom()), To: timeFromProto(m.GetTo()), Bucket: durationFromProto(m.GetBucket()),
		Domain: m.GetDomain(), Tag: m.GetTag(),
	})
	return respond(ctx, s.log, req, err, func() *analyticsv1.SummarizeResponse {
		out := &analyticsv1.SummarizeResponse{Totals: countsToProto(sum.Totals)}
		for _, b := range sum.Buckets {
			out.Buckets = append(out.Buckets, &analyticsv1.Bucket{Start: timeToProto(b.Start), Counts: countsToProto(b.AnalyticsCounts)})
		}
		return out
	})
}

// analyticsClient implements ports.AnalyticsService over postmill.analytics.v1.AnalyticsService.
type analyticsClient struct {
	conn analyticsv1connect.AnalyticsServiceClient
}

func newAnalyticsClient(conn analyticsv1connect.AnalyticsServiceClient) ports.AnalyticsService {
	return &analyticsClient{conn: conn}
}

func (c *analyticsClient) Summarize(ctx context.Context, organizationID string, q ports.AnalyticsQuery) (ports.AnalyticsSummary, error) {
	return call(ctx, analyticsv1connect.AnalyticsServiceSummarizeProcedure, c.conn.Summarize, &analyticsv1.SummarizeRequest{
		OrganizationId: organizationID, From: timeToProto(q.From), To: timeToProto(q.To),
		Bucket: durationToProto(q.Bucket), Domain: q.Domain, Tag: q.Tag,
	}, func(res *analyticsv1.SummarizeResponse) ports.AnalyticsSummary {
		sum := ports.AnalyticsSummary{Buckets: make([]ports.AnalyticsBucket, 0, len(res.GetBuckets())), Totals: countsFromProto(res.GetTotals())}
		for _, b := range res.GetBuckets() {
			sum.Buckets = append(sum.Buckets, ports.AnalyticsBucket{Start: timeFromProto(b.GetStart()), AnalyticsCounts: countsFromProto(b.GetCounts())})
		}
		return sum
	})
}

func requestLogToProto(r ports.RequestLog) *analyticsv1.RequestLog {
	return &analyticsv1.RequestLog{
		Id: r.ID, OrganizationId: r.OrganizationID, OccurredAt: timeToProto(r.OccurredAt), Method: r.Method,
		Route: r.Route, Path: r.Path, Status: int32(r.Status), Latency: durationToProto(r.Latency),
		ApiKeyId: r.APIKeyID, UserId: r.UserID, UserAgent: r.UserAgent, ClientIp: r.ClientIP,
		RequestId: r.RequestID, RequestBody: r.RequestBody, ResponseBody: r.ResponseBody,
	}
}

func requestLogFromProto(r *analyticsv1.RequestLog) ports.RequestLog {
	return ports.RequestLog{
		ID: r.GetId(), OrganizationID: r.GetOrganizationId(), OccurredAt: timeFromProto(r.GetOccurredAt()),
		Method: r.GetMethod(), Route: r.GetRoute(), Path: r.GetPath(), Status: int(r.GetStatus()),
		Latency: durationFromProto(r.GetLatency()), APIKeyID: r.GetApiKeyId(), UserID: r.GetUserId(),
		UserAgent: r.GetUserAgent(), ClientIP: r.GetClientIp(), RequestID: r.GetRequestId(),
		RequestBody: r.GetRequestBody(), ResponseBody: r.GetResponseBody(),
	}
}

func logFilterToProto(f ports.LogFilter) *analyticsv1.LogFilter {
	return &analyticsv1.LogFilter{
		From: timeToProto(f.From), To: timeToProto(f.To), Method: f.Method, Status: int32(f.Status),
		StatusClass: int32(f.StatusClass), Route: f.Route, ApiKeyId: f.APIKeyID, Search: f.Search,
	}
}

func logFilterFromProto(f *analyticsv1.LogFilter) ports.LogFilter {
	return ports.LogFilter{
		From: timeFromProto(f.GetFrom()), To: timeFromProto(f.GetTo()), Method: f.GetMethod(), Status: int(f.GetStatus()),
		StatusClass: int(f.GetStatusClass()), Route: f.GetRoute(), APIKeyID: f.GetApiKeyId(), Search: f.GetSearch(),
	}
}

func countsToProto(c ports.AnalyticsCounts) *analyticsv1.Counts {
	return &analyticsv1.Counts{Sent: c.Sent, Delivered: c.Delivered, Bounced: c.Bounced, Complained: c.Complained,
		Opened: c.Opened, Clicked: c.Clicked, Failed: c.Failed, Delayed: c.Delayed}
}

func countsFromProto(c *analyticsv1.Counts) ports.AnalyticsCounts {
	return ports.AnalyticsCounts{Sent: c.GetSent(), Delivered: c.GetDelivered(), Bounced: c.GetBounced(),
		Complained: c.GetComplained(), Opened: c.GetOpened(), Clicked: c.GetClicked(), Failed: c.GetFailed(),
		Delayed: c.GetDelayed()}
}
