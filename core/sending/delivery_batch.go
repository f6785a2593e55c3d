package sending

import (
	"context"
	"sync"

	"github.com/postmill/postmill/ports"
)

var _ ports.DeliveryBatcher = (*Service)(nil)

// maxBatchJobs bounds the jobs or reports of one LoadOutbounds or ReportDeliveries call.
const maxBatchJobs = 1000

// LoadOutbounds implements ports.DeliveryBatcher: LoadOutbound for every job at once. The calls run
// concurrently, so the store reads their messages in shared round trips (its reads are grouped), and each
// job gets exactly LoadOutbound's answer, a job put on hold included.
func (s *Service) LoadOutbounds(ctx context.Context, jobs []ports.DeliveryJob) ([]ports.OutboundResult, error) {
	if len(jobs) > maxBatchJobs {
		return nil, ports.Errorf(ports.CodeInvalidArgument, "at most %d jobs per call", maxBatchJobs)
	}
	out := make([]ports.OutboundResult, len(jobs))
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Go(func() {
			out[i].Message, out[i].Err = s.LoadOutbound(ctx, job)
		})
	}
	wg.Wait()
	return out, nil
}

// ReportDeliveries implements ports.DeliveryBatcher: ReportDelivery for every report at once. The store
// applies concurrent reports in shared transactions, each still once per job id and answered on its own.
func (s *Service) ReportDeliveries(ctx context.Context, reports []ports.DeliveryReport) ([]error, error) {
	if len(reports) > maxBatchJobs {
		return nil, ports.Errorf(ports.CodeInvalidArgument, "at most %d reports per call", maxBatchJobs)
	}
	errs := make([]error, len(reports))
	var wg sync.WaitGroup
	for i, r := range reports {
		wg.Go(func() { errs[i] = s.ReportDelivery(ctx, r) })
	}
	wg.Wait()
	return errs, nil
}
