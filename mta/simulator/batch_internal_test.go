package simulator

import (
	"context"
	"testing"

	"github.com/postmill/postmill/ports"
)

// batchingInner is a DeliveryService taking batches that counts its calls.
type batchingInner struct{ singles, batches int }

func (f *batchingInner) LoadOutbound(_ context.Context, j ports.DeliveryJob) (ports.OutboundMessage, error) {
	f.singles++
	return ports.OutboundMessage{Job: j}, nil
}

func (f *batchingInner) ReportDelivery(context.Context, ports.DeliveryReport) error {
	f.singles++
	return nil
}

func (f *batchingInner) LoadOutbounds(_ context.Context, jobs []ports.DeliveryJob) ([]ports.OutboundResult, error) {
	f.batches++
	out := make([]ports.OutboundResult, len(jobs))
	for i, j := range jobs {
		out[i].Message.Job = j
	}
	return out, nil
}

func (f *batchingInner) ReportDeliveries(_ context.Context, reports []ports.DeliveryReport) ([]error, error) {
	f.batches++
	return make([]error, len(reports)), nil
}

// TestWrappedDeliveryKeepsBatches: the simulator's wrapper of the MTA's DeliveryService passes batches on
// as batches, so the MTA still loads and reports many jobs per call across the Connect hop.
func TestWrappedDeliveryKeepsBatches(t *testing.T) {
	t.Parallel()
	inner := &batchingInner{}
	if _, b := (&Server{}).Delivery(inner, nil); b != nil {
		t.Fatal("a DeliveryService given without its batcher was wrapped as one")
	}
	_, b := (&Server{}).Delivery(inner, inner)
	if b == nil {
		t.Fatal("the wrapped DeliveryService takes no batches")
	}
	ctx := context.Background()
	res, err := b.LoadOutbounds(ctx, []ports.DeliveryJob{{ID: "a", Domain: "x.example"}, {ID: "b", Domain: "x.example"}})
	if err != nil || len(res) != 2 || res[1].Message.Job.ID != "b" {
		t.Fatalf("LoadOutbounds = %+v, %v", res, err)
	}
	if errs, err := b.ReportDeliveries(ctx, []ports.DeliveryReport{{}, {}}); err != nil || len(errs) != 2 {
		t.Fatalf("ReportDeliveries = %v, %v", errs, err)
	}
	if inner.batches != 2 || inner.singles != 0 {
		t.Fatalf("inner saw %d batch calls and %d single calls; want 2 and 0", inner.batches, inner.singles)
	}
}
