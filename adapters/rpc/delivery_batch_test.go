package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/adapters/rpc"
	deliveryv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/delivery/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/delivery/v1/deliveryv1connect"
	"github.com/postmill/postmill/ports"
)

// batchDelivery is a DeliveryService whose jobs and reports fail when their id says so; batchingDelivery
// wraps it as a ports.DeliveryBatcher that counts its batch calls.
type batchDelivery struct {
	mu      sync.Mutex
	singles int
	batches int
	reports []string
}

func (f *batchDelivery) LoadOutbound(_ context.Context, job ports.DeliveryJob) (ports.OutboundMessage, error) {
	f.mu.Lock()
	f.singles++
	f.mu.Unlock()
	switch job.ID {
	case "gone":
		return ports.OutboundMessage{}, ports.NotFound("nothing to deliver for job %s", job.ID)
	case "held":
		return ports.OutboundMessage{}, &ports.Error{Code: ports.CodeFailedPrecondition, Reason: "delivery_held", Message: "delivery held: organization_paused"}
	case "broken":
		return ports.OutboundMessage{}, errors.New("a failure that is not a ports error")
	}
	return ports.OutboundMessage{Job: job, MessageID: "m-" + job.ID, DKIMPrivateKey: []byte("key of " + job.ID)}, nil
}

func (f *batchDelivery) ReportDelivery(_ context.Context, r ports.DeliveryReport) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.singles++
	if r.Job.ID == "refused" {
		return &ports.Error{Code: ports.CodeInvalidArgument, Message: "report refused"}
	}
	f.reports = append(f.reports, r.Job.ID)
	return nil
}

type batchingDelivery struct{ *batchDelivery }

func (f batchingDelivery) LoadOutbounds(ctx context.Context, jobs []ports.DeliveryJob) ([]ports.OutboundResult, error) {
	f.mu.Lock()
	f.batches++
	f.mu.Unlock()
	out := make([]ports.OutboundResult, len(jobs))
	for i, j := range jobs {
		out[i].Message, out[i].Err = f.LoadOutbound(ctx, j)
	}
	return out, nil
}

func (f batchingDelivery) ReportDeliveries(ctx context.Context, reports []ports.DeliveryReport) ([]error, error) {
	f.mu.Lock()
	f.batches++
	f.mu.Unlock()
	errs := make([]error, len(reports))
	for i, r := range reports {
		errs[i] = f.ReportDelivery(ctx, r)
	}
	return errs, nil
}

// TestDeliveryBatchesOverConnect: LoadOutbounds and ReportDeliveries cross the hop in one call each way
// and answer every item as the single calls would, errors included (code, reason and message), whether
// the core has a DeliveryBatch or the server calls Delivery once per item.
func TestDeliveryBatchesOverConnect(t *testing.T) {
	t.Parallel()
	for _, batching := range []bool{true, false} {
		fake := &batchDelivery{}
		core := ports.Core{Delivery: fake}
		if batching {
			core.DeliveryBatch = batchingDelivery{fake}
		}
		c := rpc.NewClient(mustServe(t, core, testToken).URL, testToken, nil).Core()
		b := c.DeliveryBatch
		if b == nil {
			t.Fatal("the Connect client does not batch")
		}
		ctx := context.Background()
		jobs := []ports.DeliveryJob{{ID: "a"}, {ID: "gone"}, {ID: "held"}, {ID: "broken"}, {ID: "b"}}
		results, err := b.LoadOutbounds(ctx, jobs)
		if err != nil || len(results) != len(jobs) {
			t.Fatalf("LoadOutbounds = %d results, %v", len(results), err)
		}
		if r := results[0]; r.Err != nil || r.Message.MessageID != "m-a" || string(r.Message.DKIMPrivateKey) != "key of a" {
			t.Errorf("first result %+v, %v", r.Message, r.Err)
		}
		if r := results[4]; r.Err != nil || r.Message.Job.ID != "b" {
			t.Errorf("last result %+v, %v", r.Message, r.Err)
		}
		if ports.ErrorCode(results[1].Err) != ports.CodeNotFound {
			t.Errorf("gone: %v, want not_found", results[1].Err)
		}
		if e, ok := ports.AsError(results[2].Err); !ok || e.Code != ports.CodeFailedPrecondition || e.Reason != "delivery_held" ||
			e.Message != "delivery held: organization_paused" {
			t.Errorf("held: %#v, want failed_precondition with its reason", results[2].Err)
		}
		if ports.ErrorCode(results[3].Err) != ports.CodeInternal {
			t.Errorf("broken: %v, want internal", results[3].Err)
		}

		reports := []ports.DeliveryReport{{Job: jobs[0]}, {Job: ports.DeliveryJob{ID: "refused"}}, {Job: jobs[4]}}
		errs, err := b.ReportDeliveries(ctx, reports)
		if err != nil || len(errs) != len(reports) || errs[0] != nil || errs[2] != nil ||
			ports.ErrorCode(errs[1]) != ports.CodeInvalidArgument {
			t.Fatalf("ReportDeliveries = %v, %v", errs, err)
		}
		fake.mu.Lock()
		if batching && fake.batches != 2 || !batching && fake.batches != 0 || fake.singles != len(jobs)+len(reports) {
			t.Errorf("batching %v: %d batch calls and %d single calls", batching, fake.batches, fake.singles)
		}
		if len(fake.reports) != 2 || fake.reports[0] != "a" || fake.reports[1] != "b" {
			t.Errorf("reports applied %v, want a and b in order", fake.reports)
		}
		fake.mu.Unlock()
	}
}

// TestDeliveryBatchesTravelUncompressed: the client does not ask for compressed responses, so the core
// does not gzip a batch of outbound messages that the MTA would inflate again; the body is the plain
// protobuf message. A client that asks for gzip still gets it.
func TestDeliveryBatchesTravelUncompressed(t *testing.T) {
	t.Parallel()
	fake := &batchDelivery{}
	handler := rpc.NewHandler(ports.Core{Delivery: fake, DeliveryBatch: batchingDelivery{fake}}, rpc.ServerConfig{
		Credentials: []string{testToken},
		Logger:      slog.New(slog.DiscardHandler),
	})
	var mu sync.Mutex
	var encodings []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.ServeHTTP(w, r)
		mu.Lock()
		encodings = append(encodings, w.Header().Get("Content-Encoding"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)

	jobs := make([]ports.DeliveryJob, 200) // a body of several kilobytes, well worth compressing
	for i := range jobs {
		jobs[i] = ports.DeliveryJob{ID: fmt.Sprintf("job-%04d", i), Domain: "example.com"}
	}
	results, err := rpc.NewClient(srv.URL, testToken, nil).Core().DeliveryBatch.LoadOutbounds(context.Background(), jobs)
	if err != nil || len(results) != len(jobs) || results[199].Message.MessageID != "m-job-0199" {
		t.Fatalf("LoadOutbounds = %d results, %v", len(results), err)
	}
	mu.Lock()
	got := slices.Clone(encodings)
	mu.Unlock()
	if len(got) != 1 || got[0] != "" {
		t.Fatalf("response Content-Encoding %q, want one uncompressed response", got)
	}

	// The server still compresses for a client that asks.
	gz := deliveryv1connect.NewDeliveryServiceClient(srv.Client(), srv.URL)
	req := connect.NewRequest(&deliveryv1.LoadOutboundsRequest{Jobs: []*deliveryv1.DeliveryJob{{Id: "a"}}})
	req.Header().Set("Authorization", "Bearer "+testToken)
	if _, err := gz.LoadOutbounds(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(encodings) != 2 || encodings[1] != "gzip" {
		t.Fatalf("response Content-Encoding %q for a client accepting gzip, want gzip", encodings)
	}
}
