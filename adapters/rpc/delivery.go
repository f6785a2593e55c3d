package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	deliveryv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/delivery/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/delivery/v1/deliveryv1connect"
)

// postmill.delivery.v1.DeliveryService carries two fields of ports.Core: Delivery, and DeliveryBatch for
// LoadOutbounds and ReportDeliveries. The service is mounted when Delivery is set; without DeliveryBatch
// the batch procedures call Delivery once per item. The client fills both fields, so the MTA's batches
// cross the hop in one call each way. Only the MTA tier may call it: it answers DKIM private keys.
func init() {
	register(service{mount: mountDelivery, fill: fillDelivery}.
		calledBy(deliveryv1connect.DeliveryServiceName, TierMTA))
}

func mountDelivery(core ports.Core, env handlerEnv) (string, http.Handler, bool) {
	if core.Delivery == nil {
		return "", nil, false
	}
	path, h := deliveryv1connect.NewDeliveryServiceHandler(
		&deliveryServer{svc: core.Delivery, batch: core.DeliveryBatch, log: env.log}, env.opts...)
	return path, h, true
}

func fillDelivery(core *ports.Core, env clientEnv) {
	c := &deliveryClient{conn: deliveryv1connect.NewDeliveryServiceClient(env.httpClient, env.baseURL, env.opts...)}
	core.Delivery, core.DeliveryBatch = c, c
}

// deliveryServer serves postmill.delivery.v1.DeliveryService from a ports.DeliveryService and, when the
// core has one, its ports.DeliveryBatcher.
type deliveryServer struct {
	svc   ports.DeliveryService
	batch ports.DeliveryBatcher // nil: the batch procedures call svc once per item
	log   *slog.Logger
}

func (s *deliveryServer) LoadOutbound(ctx context.Context, req *connect.Request[deliveryv1.LoadOutboundRequest]) (*connect.Response[deliveryv1.LoadOutboundResponse], error) {
	m, err := s.svc.LoadOutbound(ctx, deliveryJobFromProto(req.Msg.GetJob()))
	return respond(ctx, s.log, req, err, func() *deliveryv1.LoadOutboundResponse {
		return &deliveryv1.LoadOutboundResponse{Message: outboundMessageToProto(m)}
	})
}

func (s *deliveryServer) ReportDelivery(ctx context.Context, req *connect.Request[deliveryv1.ReportDeliveryRequest]) (*connect.Response[deliveryv1.ReportDeliveryResponse], error) {
	err := s.svc.ReportDelivery(ctx, deliveryReportFromProto(req.Msg.GetReport()))
	return respond(ctx, s.log, req, err, empty[deliveryv1.ReportDeliveryResponse])
}

// LoadOutbounds serves the core's ports.DeliveryBatcher LoadOutbounds when it has one, and one
// LoadOutbound per job otherwise.
func (s *deliveryServer) LoadOutbounds(ctx context.Context, req *connect.Request[deliveryv1.LoadOutboundsRequest]) (*connect.Response[deliveryv1.LoadOutboundsResponse], error) {
	jobs := make([]ports.DeliveryJob, len(req.Msg.GetJobs()))
	for i, j := range req.Msg.GetJobs() {
		jobs[i] = deliveryJobFromProto(j)
	}
	var results []ports.OutboundResult
	var err error
	if s.batch != nil {
		results, err = s.batch.LoadOutbounds(ctx, jobs)
	} else {
		results = make([]ports.OutboundResult, len(jobs))
		for i, j := range jobs {
			results[i].Message, results[i].Err = s.svc.LoadOutbound(ctx, j)
		}
	}
	if err == nil && len(results) != len(jobs) {
		err = fmt.Errorf("rpc: LoadOutbounds answered %d of %d jobs", len(results), len(jobs))
	}
	return respond(ctx, s.log, req, err, func() *deliveryv1.LoadOutboundsResponse {
		out := &deliveryv1.LoadOutboundsResponse{Results: make([]*deliveryv1.OutboundResult, len(results))}
		for i, r := range results {
			if r.Err != nil {
				s.logItem(ctx, deliveryv1connect.DeliveryServiceLoadOutboundsProcedure, r.Err)
				out.Results[i] = &deliveryv1.OutboundResult{Error: batchItemErrorToProto(r.Err)}
				continue
			}
			out.Results[i] = &deliveryv1.OutboundResult{Message: outboundMessageToProto(r.Message)}
		}
		return out
	})
}

// ReportDeliveries serves the core's ports.DeliveryBatcher ReportDeliveries when it has one, and one
// ReportDelivery per report otherwise.
func (s *deliveryServer) ReportDeliveries(ctx context.Context, req *connect.Request[deliveryv1.ReportDeliveriesRequest]) (*connect.Response[deliveryv1.ReportDeliveriesResponse], error) {
	reports := make([]ports.DeliveryReport, len(req.Msg.GetReports()))
	for i, r := range req.Msg.GetReports() {
		reports[i] = deliveryReportFromProto(r)
	}
	var errs []error
	var err error
	if s.batch != nil {
		errs, err = s.batch.ReportDeliveries(ctx, reports)
	} else {
		errs = make([]error, len(reports))
		for i, r := range reports {
			errs[i] = s.svc.ReportDelivery(ctx, r)
		}
	}
	if err == nil && len(errs) != len(reports) {
		err = fmt.Errorf("rpc: ReportDeliveries answered %d of %d reports", len(errs), len(reports))
	}
	return respond(ctx, s.log, req, err, func() *deliveryv1.ReportDeliveriesResponse {
		out := &deliveryv1.ReportDeliveriesResponse{Results: make([]*deliveryv1.ReportResult, len(errs))}
		for i, e := range errs {
			if e != nil {
				s.logItem(ctx, deliveryv1connect.DeliveryServiceReportDeliveriesProcedure, e)
			}
			out.Results[i] = &deliveryv1.ReportResult{Error: batchItemErrorToProto(e)}
		}
		return out
	})
}

// logItem logs a batch item's failure that is not a ports error, as respond does for a failed call: the
// caller learns only "internal error".
func (s *deliveryServer) logItem(ctx context.Context, procedure string, err error) {
	if _, ok := ports.AsError(err); !ok {
		s.log.ErrorContext(ctx, "batch item failed", "procedure", procedure, "error", err)
	}
}

// deliveryClient implements ports.DeliveryService and ports.DeliveryBatcher over
// postmill.delivery.v1.DeliveryService.
type deliveryClient struct {
	conn deliveryv1connect.DeliveryServiceClient
}

var (
	_ ports.DeliveryService = (*deliveryClient)(nil)
	_ ports.DeliveryBatcher = (*deliveryClient)(nil)
)

// LoadOutbound answers with the DKIM private key in plaintext, as the in-process core's does.
func (c *deliveryClient) LoadOutbound(ctx context.Context, job ports.DeliveryJob) (ports.OutboundMessage, error) {
	return call(ctx, deliveryv1connect.DeliveryServiceLoadOutboundProcedure, c.conn.LoadOutbound,
		&deliveryv1.LoadOutboundRequest{Job: deliveryJobToProto(job)},
		pick((*deliveryv1.LoadOutboundResponse).GetMessage, outboundMessageFromProto))
}

func (c *deliveryClient) ReportDelivery(ctx context.Context, r ports.DeliveryReport) error {
	return exec(ctx, deliveryv1connect.DeliveryServiceReportDeliveryProcedure, c.conn.ReportDelivery,
		&deliveryv1.ReportDeliveryRequest{Report: deliveryReportToProto(r)})
}

// LoadOutbounds implements ports.DeliveryBatcher in one call.
func (c *deliveryClient) LoadOutbounds(ctx context.Context, jobs []ports.DeliveryJob) ([]ports.OutboundResult, error) {
	req := &deliveryv1.LoadOutboundsRequest{Jobs: make([]*deliveryv1.DeliveryJob, len(jobs))}
	for i, j := range jobs {
		req.Jobs[i] = deliveryJobToProto(j)
	}
	res, err := call(ctx, deliveryv1connect.DeliveryServiceLoadOutboundsProcedure, c.conn.LoadOutbounds, req,
		(*deliveryv1.LoadOutboundsResponse).GetResults)
	if err != nil {
		return nil, err
	}
	if len(res) != len(jobs) {
		return nil, &ports.Error{Code: ports.CodeInternal, Message: fmt.Sprintf("the core answered %d of %d jobs", len(res), len(jobs))}
	}
	out := make([]ports.OutboundResult, len(res))
	for i, r := range res {
		if r.GetError() != nil {
			out[i].Err = batchItemErrorFromProto(r.GetError())
			continue
		}
		out[i].Message = outboundMessageFromProto(r.GetMessage())
	}
	return out, nil
}

// ReportDeliveries implements ports.DeliveryBatcher in one call.
func (c *deliveryClient) ReportDeliveries(ctx context.Context, reports []ports.DeliveryReport) ([]error, error) {
	req := &deliveryv1.ReportDeliveriesRequest{Reports: make([]*deliveryv1.DeliveryReport, len(reports))}
	for i, r := range reports {
		req.Reports[i] = deliveryReportToProto(r)
	}
	res, err := call(ctx, deliveryv1connect.DeliveryServiceReportDeliveriesProcedure, c.conn.ReportDeliveries, req,
		(*deliveryv1.ReportDeliveriesResponse).GetResults)
	if err != nil {
		return nil, err
	}
	if len(res) != len(reports) {
		return nil, &ports.Error{Code: ports.CodeInternal, Message: fmt.Sprintf("the core answered %d of %d reports", len(res), len(reports))}
	}
	errs := make([]error, len(res))
	for i, r := range res {
		errs[i] = batchItemErrorFromProto(r.GetError())
	}
	return errs, nil
}

// The delivery schema carries what the domain and email schemas leave behind, Domain.DKIMPrivateKey and
// StoredAttachment.Key, because the MTA signs and attaches.

func deliveryJobToProto(j ports.DeliveryJob) *deliveryv1.DeliveryJob {
	return &deliveryv1.DeliveryJob{
		Id:             j.ID,
		OrganizationId: j.OrganizationID,
		MessageId:      j.MessageID,
		Domain:         j.Domain,
		RecipientIds:   stringListToProto(j.RecipientIDs),
		Attempt:        int64(j.Attempt),
		FirstQueuedAt:  timeToProto(j.FirstQueuedAt),
		NotBefore:      timeToProto(j.NotBefore),
		Bulk:           j.Bulk,
	}
}

func deliveryJobFromProto(j *deliveryv1.DeliveryJob) ports.DeliveryJob {
	return ports.DeliveryJob{
		ID:             j.GetId(),
		OrganizationID: j.GetOrganizationId(),
		MessageID:      j.GetMessageId(),
		Domain:         j.GetDomain(),
		RecipientIDs:   stringListFromProto(j.GetRecipientIds()),
		Attempt:        int(j.GetAttempt()),
		FirstQueuedAt:  timeFromProto(j.GetFirstQueuedAt()),
		NotBefore:      timeFromProto(j.GetNotBefore()),
		Bulk:           j.GetBulk(),
	}
}

// outboundAttachmentsToProto keeps Key: the MTA reads the bytes from the blob store under it.
func outboundAttachmentsToProto(atts []ports.StoredAttachment) *deliveryv1.OutboundAttachmentList {
	if atts == nil {
		return nil
	}
	l := &deliveryv1.OutboundAttachmentList{Items: make([]*deliveryv1.OutboundAttachment, 0, len(atts))}
	for _, a := range atts {
		l.Items = append(l.Items, &deliveryv1.OutboundAttachment{
			Id:          a.ID,
			Filename:    a.Filename,
			ContentType: a.ContentType,
			Size:        a.Size,
			Inline:      a.Inline,
			ContentId:   a.ContentID,
			Key:         a.Key,
		})
	}
	return l
}

func outboundAttachmentsFromProto(l *deliveryv1.OutboundAttachmentList) []ports.StoredAttachment {
	if l == nil {
		return nil
	}
	atts := make([]ports.StoredAttachment, 0, len(l.GetItems()))
	for _, a := range l.GetItems() {
		atts = append(atts, ports.StoredAttachment{
			ID:          a.GetId(),
			Filename:    a.GetFilename(),
			ContentType: a.GetContentType(),
			Size:        a.GetSize(),
			Inline:      a.GetInline(),
			ContentID:   a.GetContentId(),
			Key:         a.GetKey(),
		})
	}
	return atts
}

// outboundMessageToProto carries the DKIM private key: see delivery.proto for why this hop may.
func outboundMessageToProto(m ports.OutboundMessage) *deliveryv1.OutboundMessage {
	return &deliveryv1.OutboundMessage{
		Job:             deliveryJobToProto(m.Job),
		MessageId:       m.MessageID,
		OrganizationId:  m.OrganizationID,
		From:            m.From,
		ReplyTo:         m.ReplyTo,
		Subject:         m.Subject,
		Html:            m.HTML,
		Text:            m.Text,
		Headers:         stringMapToProto(m.Headers),
		To:              stringListToProto(m.To),
		Cc:              stringListToProto(m.Cc),
		Recipients:      recipientsToProto(m.Recipients),
		Attachments:     outboundAttachmentsToProto(m.Attachments),
		CreatedAt:       timeToProto(m.CreatedAt),
		DkimDomain:      m.DKIMDomain,
		DkimSelector:    m.DKIMSelector,
		DkimPrivateKey:  m.DKIMPrivateKey,
		ReturnPath:      m.ReturnPath,
		MessageIdHeader: m.MessageIDHeader,
	}
}

func outboundMessageFromProto(m *deliveryv1.OutboundMessage) ports.OutboundMessage {
	return ports.OutboundMessage{
		Job:             deliveryJobFromProto(m.GetJob()),
		MessageID:       m.GetMessageId(),
		OrganizationID:  m.GetOrganizationId(),
		From:            m.GetFrom(),
		ReplyTo:         m.GetReplyTo(),
		Subject:         m.GetSubject(),
		HTML:            m.GetHtml(),
		Text:            m.GetText(),
		Headers:         stringMapFromProto(m.GetHeaders()),
		To:              stringListFromProto(m.GetTo()),
		Cc:              stringListFromProto(m.GetCc()),
		Recipients:      recipientsFromProto(m.GetRecipients()),
		Attachments:     outboundAttachmentsFromProto(m.GetAttachments()),
		CreatedAt:       timeFromProto(m.GetCreatedAt()),
		DKIMDomain:      m.GetDkimDomain(),
		DKIMSelector:    m.GetDkimSelector(),
		DKIMPrivateKey:  m.GetDkimPrivateKey(),
		ReturnPath:      m.GetReturnPath(),
		MessageIDHeader: m.GetMessageIdHeader(),
	}
}

func recipientOutcomesToProto(outcomes []ports.RecipientOutcome) *deliveryv1.RecipientOutcomeList {
	if outcomes == nil {
		return nil
	}
	l := &deliveryv1.RecipientOutcomeList{Items: make([]*deliveryv1.RecipientOutcome, 0, len(outcomes))}
	for _, o := range outcomes {
		l.Items = append(l.Items, &deliveryv1.RecipientOutcome{RecipientId: o.RecipientID, Kind: string(o.Kind), Response: o.Response})
	}
	return l
}

func recipientOutcomesFromProto(l *deliveryv1.RecipientOutcomeList) []ports.RecipientOutcome {
	if l == nil {
		return nil
	}
	outcomes := make([]ports.RecipientOutcome, 0, len(l.GetItems()))
	for _, o := range l.GetItems() {
		outcomes = append(outcomes, ports.RecipientOutcome{
			RecipientID: o.GetRecipientId(),
			Kind:        ports.DeliveryOutcomeKind(o.GetKind()),
			Response:    o.GetResponse(),
		})
	}
	return outcomes
}

func deliveryReportToProto(r ports.DeliveryReport) *deliveryv1.DeliveryReport {
	return &deliveryv1.DeliveryReport{
		Job:        deliveryJobToProto(r.Job),
		Handed:     r.Handed,
		Recipients: recipientOutcomesToProto(r.Recipients),
		At:         timeToProto(r.At),
	}
}

func deliveryReportFromProto(r *deliveryv1.DeliveryReport) ports.DeliveryReport {
	return ports.DeliveryReport{
		Job:        deliveryJobFromProto(r.GetJob()),
		Handed:     r.GetHanded(),
		Recipients: recipientOutcomesFromProto(r.GetRecipients()),
		At:         timeFromProto(r.GetAt()),
	}
}
