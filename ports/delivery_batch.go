package ports

import "context"

// DeliveryBatcher takes a DeliveryService's calls for many jobs in one call; ports.Core carries it as
// DeliveryBatch beside Delivery. The MTA uses it when the service offers it: across the Connect hop one
// call per job each way would cost a round trip per message, while the MTA has many jobs loading and many
// outcomes to report at any moment. Each item gets
// the answer a single call would have given; err is for the call as a whole (the core unreachable), and
// then nothing was done for any item.
type DeliveryBatcher interface {
	// LoadOutbounds is LoadOutbound for each job: results[i] answers jobs[i].
	LoadOutbounds(ctx context.Context, jobs []DeliveryJob) (results []OutboundResult, err error)
	// ReportDeliveries is ReportDelivery for each report: errs[i] answers reports[i] (nil when applied).
	ReportDeliveries(ctx context.Context, reports []DeliveryReport) (errs []error, err error)
}

// OutboundResult is one job's answer in LoadOutbounds: its message, or the error LoadOutbound would have
// returned (not_found for a message that is gone, DeliveryHeld for a job put on hold, ...).
type OutboundResult struct {
	Message OutboundMessage
	Err     error
}
