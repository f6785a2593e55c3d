package simulator

import (
	"context"
	"sync"

	"github.com/postmill/postmill/ports"
)

var _ ports.DeliveryBatcher = (*delivery)(nil)

// LoadOutbounds implements ports.DeliveryBatcher, so that wrapping the MTA's DeliveryService keeps its
// batches (one call for many jobs across the Connect hop). It notes the simulator's jobs as LoadOutbound
// does. An inner service that takes no batches is called once per job, concurrently.
func (d *delivery) LoadOutbounds(ctx context.Context, jobs []ports.DeliveryJob) ([]ports.OutboundResult, error) {
	b := d.batch
	if b == nil {
		out := make([]ports.OutboundResult, len(jobs))
		var wg sync.WaitGroup
		for i, j := range jobs {
			wg.Go(func() { out[i].Message, out[i].Err = d.LoadOutbound(ctx, j) })
		}
		wg.Wait()
		return out, nil
	}
	out, err := b.LoadOutbounds(ctx, jobs)
	if err != nil {
		return nil, err
	}
	for i, r := range out {
		if r.Err == nil && i < len(jobs) && isSimulated(jobs[i].Domain) {
			d.s.gate.loaded(jobs[i].ID, r.Message.ReturnPath)
		}
	}
	return out, nil
}

// ReportDeliveries implements ports.DeliveryBatcher; it notes the simulator's recorded jobs as
// ReportDelivery does.
func (d *delivery) ReportDeliveries(ctx context.Context, reports []ports.DeliveryReport) ([]error, error) {
	b := d.batch
	if b == nil {
		errs := make([]error, len(reports))
		var wg sync.WaitGroup
		for i, r := range reports {
			wg.Go(func() { errs[i] = d.ReportDelivery(ctx, r) })
		}
		wg.Wait()
		return errs, nil
	}
	errs, err := b.ReportDeliveries(ctx, reports)
	if err != nil {
		return nil, err
	}
	for i, e := range errs {
		if e == nil && i < len(reports) && isSimulated(reports[i].Job.Domain) {
			d.s.gate.recorded(reports[i].Job.ID)
		}
	}
	return errs, nil
}
