package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
	"github.com/postmill/postmill/ports/porttest"
)

func TestAnalyticsContract(t *testing.T) {
	porttest.ExerciseAnalytics(t, porttest.AnalyticsHarness{
		New: func(t *testing.T) ports.AnalyticsStore { return pgtest.Store(t).Analytics() },
	})
}

// TestAnalyticsPartitions checks that Maintain creates daily partitions and moves rows of a day that had
// none out of the default partition.
func TestAnalyticsPartitions(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	a := st.Analytics()
	now := time.Now().UTC()
	org, id := newID(), newID()
	if err := a.InsertRequests(ctx, []ports.RequestLog{{ID: id, OrganizationID: org, OccurredAt: now,
		Method: "GET", Route: "/v1/domains", Path: "/v1/domains", Status: 200}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Maintain(ctx, now, ports.AnalyticsRetention{}); err != nil {
		t.Fatal(err)
	}
	var parts, inDefault int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'analytics_requests'::regclass`).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if parts != 6 { // the default partition, yesterday, today and three days ahead
		t.Errorf("%d partitions of analytics_requests, want 6", parts)
	}
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM analytics_requests_default`).Scan(&inDefault); err != nil {
		t.Fatal(err)
	}
	if inDefault != 0 {
		t.Errorf("%d rows left in the default partition, want 0", inDefault)
	}
	if _, err := a.GetRequest(ctx, org, id); err != nil {
		t.Errorf("the moved row: %v", err)
	}
}

// TestAnalyticsMeasure logs ingest rates and read times (POSTMILL_ANALYTICS_MEASURE=events,requests).
func TestAnalyticsMeasure(t *testing.T) {
	var events, requests int
	if _, err := fmt.Sscanf(os.Getenv("POSTMILL_ANALYTICS_MEASURE"), "%d,%d", &events, &requests); err != nil {
		t.Skip("set POSTMILL_ANALYTICS_MEASURE=events,requests to measure")
	}
	porttest.MeasureAnalytics(t, pgtest.Store(t).Analytics(), events, requests)
}
