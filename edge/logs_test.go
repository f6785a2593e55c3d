package edge_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// fakeLogs answers the request log and analytics routes with nothing.
type fakeLogs struct{}

func (fakeLogs) ListLogs(context.Context, string, ports.LogFilter, ports.PageQuery) (ports.Page[ports.RequestLog], error) {
	return ports.Page[ports.RequestLog]{}, nil
}
func (fakeLogs) GetLog(context.Context, string, string) (ports.RequestLog, error) {
	return ports.RequestLog{}, ports.NotFound("Log not found")
}
func (fakeLogs) RecordRequests(context.Context, []ports.RequestLog) error { return nil }
func (fakeLogs) Summarize(context.Context, string, ports.AnalyticsQuery) (ports.AnalyticsSummary, error) {
	return ports.AnalyticsSummary{}, nil
}

// TestOpenAPIDocumentsLogsAndAnalytics checks that GET /v1/logs, /v1/logs/{id} and /v1/analytics are in
// the OpenAPI document as session routes, with every parameter and every property of their shapes
// described.
func TestOpenAPIDocumentsLogsAndAnalytics(t *testing.T) {
	t.Parallel()
	core := newFakeCore().core()
	core.Logs, core.Analytics = fakeLogs{}, fakeLogs{}
	s, err := edge.New(edge.Config{}, core)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	doc := mustOpenAPI(t, &testBundle{srv: srv})
	for _, path := range []string{"/v1/logs", "/v1/logs/{id}", "/v1/analytics"} {
		op, ok := doc.Paths[path]["get"]
		if !ok {
			t.Errorf("GET %s is not documented", path)
			continue
		}
		for _, p := range op.Parameters {
			if strings.TrimSpace(p.Description) == "" {
				t.Errorf("GET %s parameter %s has no description", path, p.Name)
			}
		}
	}
	for _, name := range []string{"LogPageResponse", "LogItem", "LogDetail", "AnalyticsResponse", "AnalyticsBucket", "AnalyticsRates"} {
		sc, ok := doc.Components.Schemas[name]
		if !ok || len(sc.Properties) == 0 {
			t.Errorf("schema %s is missing", name)
			continue
		}
		for prop, p := range sc.Properties {
			if strings.TrimSpace(p.Description) == "" {
				t.Errorf("%s.%s has no description", name, prop)
			}
		}
	}
	if t.Failed() {
		var names []string
		for n := range doc.Components.Schemas {
			names = append(names, n)
		}
		fmt.Println(names)
	}
}
