package postgres

import (
	"context"

	"github.com/postmill/postmill/ports"
)

// ApplyResult is one answer of WriteApplyGroup.
type ApplyResult struct {
	Applied bool
	Err     error
}

// WriteApplyGroup writes applications as one group, as ApplyDelivery does for concurrent calls, so that
// tests can build the groups whose outcomes must not depend on each other instead of hoping concurrency
// builds them.
func (s *Delivery) WriteApplyGroup(ctx context.Context, apps ...ports.DeliveryApplication) []ApplyResult {
	group := make([]*pendingApply, len(apps))
	for i, a := range apps {
		group[i] = &pendingApply{ctx: ctx, a: a, done: make(chan applyResult, 1)}
	}
	s.writeApplies(group)
	out := make([]ApplyResult, len(group))
	for i, p := range group {
		r := <-p.done
		out[i] = ApplyResult{Applied: r.applied, Err: r.err}
	}
	return out
}

// ReadResult is one answer of ReadOutboundGroup.
type ReadResult struct {
	Message ports.Message
	Domain  ports.Domain
	Err     error
}

// ReadOutboundGroup reads messages ([2]string{organization id, message id}) as one group, as OutboundData
// does for concurrent calls.
func (s *Delivery) ReadOutboundGroup(ctx context.Context, pairs ...[2]string) []ReadResult {
	group := make([]*pendingRead, len(pairs))
	for i, p := range pairs {
		group[i] = &pendingRead{ctx: ctx, orgID: p[0], messageID: p[1], done: make(chan readResult, 1)}
	}
	s.readOutbound(group)
	out := make([]ReadResult, len(group))
	for i, p := range group {
		r := <-p.done
		out[i] = ReadResult{Message: r.m, Domain: r.d, Err: r.err}
	}
	return out
}

// AckGroup acks deliveries received from q as one group, as Ack does for concurrent calls.
func (q *Queue) AckGroup(ctx context.Context, ds ...ports.Delivery) []error {
	group := make([]*pendingAck, len(ds))
	for i, d := range ds {
		qd := d.(*queueDelivery)
		group[i] = &pendingAck{ctx: ctx, id: qd.job.ID, token: qd.token, done: make(chan error, 1)}
	}
	q.writeAcks(group)
	out := make([]error, len(group))
	for i, p := range group {
		out[i] = <-p.done
	}
	return out
}

// Report is one ApplyDeliveryReport call of WriteReportGroup.
type Report struct {
	JobID, OrganizationID, MessageID string
	Decide                           func([]ports.Recipient) ports.DeliveryApplication
}

// WriteReportGroup writes ApplyDeliveryReport calls as one group.
func (s *Delivery) WriteReportGroup(ctx context.Context, reports ...Report) []ApplyResult {
	group := make([]*pendingApply, len(reports))
	for i, r := range reports {
		a := ports.DeliveryApplication{JobID: r.JobID, OrganizationID: r.OrganizationID, MessageID: r.MessageID}
		group[i] = &pendingApply{ctx: ctx, a: a, decide: r.Decide, done: make(chan applyResult, 1)}
	}
	s.writeApplies(group)
	out := make([]ApplyResult, len(group))
	for i, p := range group {
		r := <-p.done
		out[i] = ApplyResult{Applied: r.applied, Err: r.err}
	}
	return out
}
