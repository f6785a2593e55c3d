package edge

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagLogs is the OpenAPI tag of the request log and analytics routes (SPEC §4.2).
const tagLogs = "Logs and analytics"

type listLogsInput struct {
	Limit    int    `query:"limit" minimum:"1" maximum:"100" default:"25" doc:"Page size"`
	Cursor   string `query:"cursor" maxLength:"1024" doc:"nextCursor of the previous page"`
	From     string `query:"from" maxLength:"64" doc:"Only requests at or after this time (RFC 3339)" example:"2026-11-26T00:00:00Z"`
	To       string `query:"to" maxLength:"64" doc:"Only requests before this time (RFC 3339)" example:"2026-11-27T00:00:00Z"`
	Method   string `query:"method" enum:"GET,POST,PUT,PATCH,DELETE" doc:"Only requests with this method"`
	Status   string `query:"status" maxLength:"3" doc:"An exact status (404) or a class (4xx)" example:"4xx"`
	Route    string `query:"route" maxLength:"256" doc:"Only requests to this route template" example:"/v1/emails/{id}"`
	APIKeyID string `query:"apiKeyId" maxLength:"64" doc:"Only requests made with this API key"`
	Search   string `query:"q" maxLength:"256" doc:"Only requests whose path contains this text (case-insensitive)" example:"/v1/emails"`
}

type logItem struct {
	ID        string    `json:"id" format:"uuid" doc:"What GET /v1/logs/{id} takes"`
	Method    string    `json:"method" doc:"HTTP method" example:"POST"`
	Route     string    `json:"route" doc:"The route template the request matched" example:"/v1/emails"`
	Path      string    `json:"path" doc:"The path as requested" example:"/v1/emails"`
	Status    int       `json:"status" doc:"HTTP status of the response" example:"202"`
	LatencyMs float64   `json:"latencyMs" doc:"Time to serve the request, in milliseconds" example:"12.5"`
	APIKeyID  *string   `json:"apiKeyId" doc:"The API key that made the request; null for a dashboard session"`
	UserID    *string   `json:"userId" doc:"The signed-in user that made the request; null for an API key"`
	UserAgent string    `json:"userAgent" doc:"The client's User-Agent header" example:"curl/8.5.0"`
	ClientIP  string    `json:"clientIp" doc:"The client address truncated to its /24 (IPv4) or /48 (IPv6)" example:"192.0.2.0"`
	RequestID string    `json:"requestId" doc:"The X-Request-Id the response carried"`
	CreatedAt time.Time `json:"createdAt" doc:"When the request arrived"`
}

type logDetail struct {
	logItem
	RequestBody  string `json:"requestBody" doc:"The request body with secrets replaced by [redacted], at most 16 KiB; a placeholder for bodies that are not JSON or are longer"`
	ResponseBody string `json:"responseBody" doc:"The response body with secrets replaced by [redacted], at most 16 KiB; a placeholder for bodies that are not JSON or are longer"`
}

type logPageResponse struct {
	Data       []logItem `json:"data" nullable:"false" doc:"Newest first"`
	NextCursor *string   `json:"nextCursor" doc:"Pass as cursor for the next page; null on the last page"`
}

type getLogInput struct {
	ID string `path:"id" maxLength:"64" doc:"The log's id"`
}

func (s *Server) registerLogRoutes() {
	if s.core.Logs == nil {
		return
	}
	if !s.cfg.RequestLogOff {
		s.startLogShipper()
	}
	register(s, huma.Operation{
		OperationID: "list-logs", Method: http.MethodGet, Path: "/v1/logs",
		Tags: []string{tagLogs}, Summary: "List API requests",
		Description: "The organization's API requests, newest first, a page at a time: {data: [{id, method, " +
			"route, path, status, latencyMs, apiKeyId, userId, userAgent, clientIp, requestId, createdAt}], " +
			"nextCursor}. Requests are kept 30 days by default and appear within seconds.",
	}, access{kind: authSession}, s.listLogs, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "get-log", Method: http.MethodGet, Path: "/v1/logs/{id}",
		Tags: []string{tagLogs}, Summary: "Get an API request",
		Description: "One request with its redacted request and response bodies.",
	}, access{kind: authSession}, s.getLog, http.StatusNotFound)
}

func (s *Server) listLogs(ctx context.Context, in *listLogsInput) (*body[logPageResponse], error) {
	f := ports.LogFilter{Method: in.Method, Route: in.Route, APIKeyID: in.APIKeyID, Search: in.Search}
	var bad []ports.FieldViolation
	for _, t := range []struct {
		path, v string
		into    *time.Time
	}{{"from", in.From, &f.From}, {"to", in.To, &f.To}} {
		if t.v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, t.v)
		if err != nil {
			bad = append(bad, ports.FieldViolation{Path: t.path, Message: "must be an RFC 3339 time"})
			continue
		}
		*t.into = at
	}
	if in.Status != "" {
		st := strings.ToLower(in.Status)
		if len(st) == 3 && st[1:] == "xx" && st[0] >= '1' && st[0] <= '5' {
			f.StatusClass = int(st[0] - '0')
		} else if n, err := strconv.Atoi(st); err == nil && n >= 100 && n <= 599 {
			f.Status = n
		} else {
			bad = append(bad, ports.FieldViolation{Path: "status", Message: "must be a status (100-599) or a class (1xx-5xx)"})
		}
	}
	if len(bad) > 0 {
		return nil, ports.ValidationError(bad...)
	}
	page, err := s.core.Logs.ListLogs(ctx, principalFrom(ctx).OrganizationID, f,
		ports.PageQuery{Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, err
	}
	out := logPageResponse{Data: make([]logItem, 0, len(page.Data))}
	for _, r := range page.Data {
		out.Data = append(out.Data, logItemOf(r))
	}
	if page.NextCursor != "" {
		out.NextCursor = &page.NextCursor
	}
	return &body[logPageResponse]{out}, nil
}

func (s *Server) getLog(ctx context.Context, in *getLogInput) (*body[logDetail], error) {
	r, err := s.core.Logs.GetLog(ctx, principalFrom(ctx).OrganizationID, in.ID)
	if err != nil {
		return nil, err
	}
	return &body[logDetail]{logDetail{logItem: logItemOf(r), RequestBody: r.RequestBody, ResponseBody: r.ResponseBody}}, nil
}

func logItemOf(r ports.RequestLog) logItem {
	orNull := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return logItem{
		ID: r.ID, Method: r.Method, Route: r.Route, Path: r.Path, Status: r.Status,
		LatencyMs: float64(r.Latency.Microseconds()) / 1000, APIKeyID: orNull(r.APIKeyID), UserID: orNull(r.UserID),
		UserAgent: r.UserAgent, ClientIP: r.ClientIP, RequestID: r.RequestID, CreatedAt: r.OccurredAt.UTC(),
	}
}
