package edge_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// recordingLogs is fakeLogs that hands every recorded batch to a channel.
type recordingLogs struct {
	fakeLogs
	got chan []ports.RequestLog
}

func (r recordingLogs) RecordRequests(_ context.Context, rows []ports.RequestLog) error {
	r.got <- rows
	return nil
}

// TestRequestLogSwitch checks POSTMILL_REQUEST_LOG's edge side: by default an authenticated /v1 request
// is recorded (with the key that made it); with RequestLogOff nothing is captured or shipped, and the
// shipper's metrics do not exist, while GET /v1/logs still answers.
func TestRequestLogSwitch(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		rec := recordingLogs{got: make(chan []ports.RequestLog, 16)}
		core := newFakeCore().core()
		core.Logs, core.Analytics = rec, rec
		reg := prometheus.NewRegistry()
		s, err := edge.New(edge.Config{Registerer: reg, RequestLogOff: off,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, core)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s.Handler())
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/emails/0190a3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b", nil)
		req.Header.Set("Authorization", "Bearer "+starKey)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()

		var rows []ports.RequestLog
		select {
		case rows = <-rec.got:
		case <-time.After(3 * time.Second): // the shipper flushes a batch within a second
		}
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		shipperMetrics := false
		for _, f := range families {
			shipperMetrics = shipperMetrics || f.GetName() == "postmill_request_logs_dropped_total"
		}
		if off {
			if len(rows) != 0 || shipperMetrics {
				t.Errorf("request log off: recorded %d rows, shipper metrics %v", len(rows), shipperMetrics)
			}
		} else if len(rows) != 1 || rows[0].Path != "/v1/emails/0190a3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b" || !shipperMetrics {
			t.Errorf("request log on: recorded %+v, shipper metrics %v", rows, shipperMetrics)
		}
		req, _ = http.NewRequest(http.MethodGet, srv.URL+"/v1/logs", nil)
		req.Header.Set("Authorization", "Bearer "+starKey)
		if res, err := srv.Client().Do(req); err != nil || res.StatusCode == http.StatusNotFound {
			t.Errorf("off=%v: GET /v1/logs: %v %v", off, err, res)
		} else {
			res.Body.Close()
		}
		srv.Close()
	}
}
