package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	emailv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1/emailv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.EmailService { return &c.Emails },
		emailv1connect.NewEmailServiceHandler, newEmailServer,
		emailv1connect.NewEmailServiceClient, newEmailClient).
		calledBy(emailv1connect.EmailServiceName, TierEdge))
}

// emailServer serves postmill.email.v1.EmailService from a ports.EmailService.
type emailServer struct {
	svc ports.EmailService
	log *slog.Logger
}

func newEmailServer(svc ports.EmailService, log *slog.Logger) emailv1connect.EmailServiceHandler {
	return &emailServer{svc: svc, log: log}
}

func (s *emailServer) Send(ctx context.Context, req *connect.Request[emailv1.SendRequest]) (*connect.Response[emailv1.SendResponse], error) {
	in, err := sendEmailFromProto(req.Msg.GetEmail())
	if err != nil {
		return nil, fail(ctx, s.log, req.Spec(), err)
	}
	res, err := s.svc.Send(ctx, req.Msg.GetOrganizationId(), in)
	return respond(ctx, s.log, req, err, func() *emailv1.SendResponse {
		return &emailv1.SendResponse{Result: sendResultToProto(res)}
	})
}

func (s *emailServer) SendBatch(ctx context.Context, req *connect.Request[emailv1.SendBatchRequest]) (*connect.Response[emailv1.SendBatchResponse], error) {
	in, err := sendEmailsFromProto(req.Msg.GetEmails())
	if err != nil {
		return nil, fail(ctx, s.log, req.Spec(), err)
	}
	results, err := s.svc.SendBatch(ctx, req.Msg.GetOrganizationId(), in)
	if err != nil {
		return nil, fail(ctx, s.log, req.Spec(), err)
	}
	for _, r := range results {
		// An item's error reaches the caller only as "internal error" unless it is a *ports.Error; log
		// what the caller will not see, as fail does for a whole call.
		if r.Err != nil && ports.ErrorCode(r.Err) == ports.CodeInternal {
			s.log.ErrorContext(ctx, "rpc: internal error", "procedure", req.Spec().Procedure, "index", r.Index, "err", r.Err)
		}
	}
	return connect.NewResponse(&emailv1.SendBatchResponse{Results: batchResultsToProto(results)}), nil
}

func (s *emailServer) GetEmail(ctx context.Context, req *connect.Request[emailv1.GetEmailRequest]) (*connect.Response[emailv1.GetEmailResponse], error) {
	m, err := s.svc.GetEmail(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *emailv1.GetEmailResponse {
		return &emailv1.GetEmailResponse{Message: messageToProto(m)}
	})
}

func (s *emailServer) CancelEmail(ctx context.Context, req *connect.Request[emailv1.CancelEmailRequest]) (*connect.Response[emailv1.CancelEmailResponse], error) {
	m, err := s.svc.CancelEmail(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *emailv1.CancelEmailResponse {
		return &emailv1.CancelEmailResponse{Message: messageToProto(m)}
	})
}

func (s *emailServer) ListEmails(ctx context.Context, req *connect.Request[emailv1.ListEmailsRequest]) (*connect.Response[emailv1.ListEmailsResponse], error) {
	m := req.Msg
	page, err := s.svc.ListEmails(ctx, m.GetOrganizationId(), ports.ListEmailsQuery{
		Limit:  int(m.GetLimit()),
		Cursor: m.GetCursor(),
		Status: ports.MessageStatus(m.GetStatus()),
	})
	return respond(ctx, s.log, req, err, func() *emailv1.ListEmailsResponse {
		return &emailv1.ListEmailsResponse{Data: messagesToProto(page.Data), NextCursor: page.NextCursor}
	})
}

// emailClient implements ports.EmailService over postmill.email.v1.EmailService.
type emailClient struct {
	conn emailv1connect.EmailServiceClient
}

func newEmailClient(conn emailv1connect.EmailServiceClient) ports.EmailService {
	return &emailClient{conn: conn}
}

func (c *emailClient) Send(ctx context.Context, orgID string, req ports.SendRequest) (ports.SendResult, error) {
	email, err := sendEmailToProto(req)
	if err != nil {
		return ports.SendResult{}, encodeError(emailv1connect.EmailServiceSendProcedure, err)
	}
	return call(ctx, emailv1connect.EmailServiceSendProcedure, c.conn.Send,
		&emailv1.SendRequest{OrganizationId: orgID, Email: email},
		pick((*emailv1.SendResponse).GetResult, sendResultFromProto))
}

// SendBatch returns each item's error as the *ports.Error a single Send would have returned.
func (c *emailClient) SendBatch(ctx context.Context, orgID string, reqs []ports.SendRequest) ([]ports.BatchItemResult, error) {
	emails, err := sendEmailsToProto(reqs)
	if err != nil {
		return nil, encodeError(emailv1connect.EmailServiceSendBatchProcedure, err)
	}
	return call(ctx, emailv1connect.EmailServiceSendBatchProcedure, c.conn.SendBatch,
		&emailv1.SendBatchRequest{OrganizationId: orgID, Emails: emails},
		pick((*emailv1.SendBatchResponse).GetResults, batchResultsFromProto))
}

func (c *emailClient) GetEmail(ctx context.Context, orgID, id string) (ports.Message, error) {
	return call(ctx, emailv1connect.EmailServiceGetEmailProcedure, c.conn.GetEmail,
		&emailv1.GetEmailRequest{OrganizationId: orgID, Id: id},
		pick((*emailv1.GetEmailResponse).GetMessage, messageFromProto))
}

func (c *emailClient) CancelEmail(ctx context.Context, orgID, id string) (ports.Message, error) {
	return call(ctx, emailv1connect.EmailServiceCancelEmailProcedure, c.conn.CancelEmail,
		&emailv1.CancelEmailRequest{OrganizationId: orgID, Id: id},
		pick((*emailv1.CancelEmailResponse).GetMessage, messageFromProto))
}

func (c *emailClient) ListEmails(ctx context.Context, orgID string, q ports.ListEmailsQuery) (ports.EmailPage, error) {
	return call(ctx, emailv1connect.EmailServiceListEmailsProcedure, c.conn.ListEmails, &emailv1.ListEmailsRequest{
		OrganizationId: orgID,
		Limit:          int64(q.Limit),
		Cursor:         q.Cursor,
		Status:         string(q.Status),
	}, func(m *emailv1.ListEmailsResponse) ports.EmailPage {
		return ports.EmailPage{Data: messagesFromProto(m.GetData()), NextCursor: m.GetNextCursor()}
	})
}

// StoredAttachment.Key has no field in the email schema and is dropped on the way out; the delivery
// schema carries it, because the MTA attaches.

func templateRefToProto(t *ports.TemplateRef) (*emailv1.TemplateRef, error) {
	if t == nil {
		return nil, nil
	}
	vars, err := jsonObjectToProto(t.Variables)
	if err != nil {
		return nil, fmt.Errorf("template variables: %w", err)
	}
	return &emailv1.TemplateRef{Id: t.ID, VariablesJson: vars}, nil
}

func templateRefFromProto(t *emailv1.TemplateRef) (*ports.TemplateRef, error) {
	if t == nil {
		return nil, nil
	}
	vars, err := jsonObjectFromProto(t.GetVariablesJson())
	if err != nil {
		return nil, fmt.Errorf("template variables: %w", err)
	}
	return &ports.TemplateRef{ID: t.GetId(), Variables: vars}, nil
}

func attachmentsToProto(atts []ports.Attachment) *emailv1.AttachmentList {
	if atts == nil {
		return nil
	}
	l := &emailv1.AttachmentList{Items: make([]*emailv1.Attachment, 0, len(atts))}
	for _, a := range atts {
		l.Items = append(l.Items, &emailv1.Attachment{
			Filename:    a.Filename,
			ContentType: a.ContentType,
			Content:     a.Content,
			Inline:      a.Inline,
			ContentId:   a.ContentID,
		})
	}
	return l
}

func attachmentsFromProto(l *emailv1.AttachmentList) []ports.Attachment {
	if l == nil {
		return nil
	}
	atts := make([]ports.Attachment, 0, len(l.GetItems()))
	for _, a := range l.GetItems() {
		atts = append(atts, ports.Attachment{
			Filename:    a.GetFilename(),
			ContentType: a.GetContentType(),
			Content:     a.GetContent(),
			Inline:      a.GetInline(),
			ContentID:   a.GetContentId(),
		})
	}
	return atts
}

// sendEmailToProto fails only when template variables cannot be encoded as JSON, which ports promises
// they can.
func sendEmailToProto(r ports.SendRequest) (*emailv1.SendEmail, error) {
	tmpl, err := templateRefToProto(r.Template)
	if err != nil {
		return nil, err
	}
	return &emailv1.SendEmail{
		From:           r.From,
		To:             stringListToProto(r.To),
		Cc:             stringListToProto(r.Cc),
		Bcc:            stringListToProto(r.Bcc),
		Subject:        r.Subject,
		Html:           r.HTML,
		Text:           r.Text,
		ReplyTo:        r.ReplyTo,
		Template:       tmpl,
		Attachments:    attachmentsToProto(r.Attachments),
		Headers:        stringMapToProto(r.Headers),
		Tags:           stringMapToProto(r.Tags),
		Metadata:       r.Metadata,
		Sandbox:        r.Sandbox,
		ScheduledAt:    timePtrToProto(r.ScheduledAt),
		IdempotencyKey: r.IdempotencyKey,
	}, nil
}

func sendEmailFromProto(r *emailv1.SendEmail) (ports.SendRequest, error) {
	tmpl, err := templateRefFromProto(r.GetTemplate())
	if err != nil {
		return ports.SendRequest{}, err
	}
	return ports.SendRequest{
		From:           r.GetFrom(),
		To:             stringListFromProto(r.GetTo()),
		Cc:             stringListFromProto(r.GetCc()),
		Bcc:            stringListFromProto(r.GetBcc()),
		Subject:        r.GetSubject(),
		HTML:           r.GetHtml(),
		Text:           r.GetText(),
		ReplyTo:        r.GetReplyTo(),
		Template:       tmpl,
		Attachments:    attachmentsFromProto(r.GetAttachments()),
		Headers:        stringMapFromProto(r.GetHeaders()),
		Tags:           stringMapFromProto(r.GetTags()),
		Metadata:       json.RawMessage(r.GetMetadata()),
		Sandbox:        r.GetSandbox(),
		ScheduledAt:    timePtrFromProto(r.GetScheduledAt()),
		IdempotencyKey: r.GetIdempotencyKey(),
	}, nil
}

func sendEmailsToProto(reqs []ports.SendRequest) (*emailv1.SendEmailList, error) {
	if reqs == nil {
		return nil, nil
	}
	l := &emailv1.SendEmailList{Items: make([]*emailv1.SendEmail, 0, len(reqs))}
	for i, r := range reqs {
		m, err := sendEmailToProto(r)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		l.Items = append(l.Items, m)
	}
	return l, nil
}

func sendEmailsFromProto(l *emailv1.SendEmailList) ([]ports.SendRequest, error) {
	if l == nil {
		return nil, nil
	}
	reqs := make([]ports.SendRequest, 0, len(l.GetItems()))
	for i, m := range l.GetItems() {
		r, err := sendEmailFromProto(m)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

func sendResultToProto(r ports.SendResult) *emailv1.SendResult {
	return &emailv1.SendResult{Id: r.ID, Status: string(r.Status), Deduped: r.Deduped}
}

func sendResultFromProto(r *emailv1.SendResult) ports.SendResult {
	return ports.SendResult{ID: r.GetId(), Status: ports.MessageStatus(r.GetStatus()), Deduped: r.GetDeduped()}
}

func batchResultsToProto(results []ports.BatchItemResult) *emailv1.BatchItemResultList {
	if results == nil {
		return nil
	}
	l := &emailv1.BatchItemResultList{Items: make([]*emailv1.BatchItemResult, 0, len(results))}
	for _, r := range results {
		l.Items = append(l.Items, &emailv1.BatchItemResult{
			Index:  int64(r.Index),
			Result: sendResultToProto(r.Result),
			Error:  batchItemErrorToProto(r.Err),
		})
	}
	return l
}

func batchResultsFromProto(l *emailv1.BatchItemResultList) []ports.BatchItemResult {
	if l == nil {
		return nil
	}
	results := make([]ports.BatchItemResult, 0, len(l.GetItems()))
	for _, r := range l.GetItems() {
		results = append(results, ports.BatchItemResult{
			Index:  int(r.GetIndex()),
			Result: sendResultFromProto(r.GetResult()),
			Err:    batchItemErrorFromProto(r.GetError()),
		})
	}
	return results
}

func recipientToProto(r ports.Recipient) *emailv1.Recipient {
	return &emailv1.Recipient{Id: r.ID, Type: r.Type, Address: r.Address, Name: r.Name, Status: string(r.Status)}
}

func recipientFromProto(r *emailv1.Recipient) ports.Recipient {
	return ports.Recipient{ID: r.GetId(), Type: r.GetType(), Address: r.GetAddress(), Name: r.GetName(), Status: ports.MessageStatus(r.GetStatus())}
}

func recipientsToProto(recipients []ports.Recipient) *emailv1.RecipientList {
	if recipients == nil {
		return nil
	}
	return &emailv1.RecipientList{Items: mapItems(recipients, recipientToProto)}
}

func recipientsFromProto(l *emailv1.RecipientList) []ports.Recipient {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), recipientFromProto)
}

// storedAttachmentsToProto leaves Key behind: the email schema has no field for it.
func storedAttachmentsToProto(atts []ports.StoredAttachment) *emailv1.StoredAttachmentList {
	if atts == nil {
		return nil
	}
	l := &emailv1.StoredAttachmentList{Items: make([]*emailv1.StoredAttachment, 0, len(atts))}
	for _, a := range atts {
		l.Items = append(l.Items, &emailv1.StoredAttachment{
			Id:          a.ID,
			Filename:    a.Filename,
			ContentType: a.ContentType,
			Size:        a.Size,
			Inline:      a.Inline,
			ContentId:   a.ContentID,
		})
	}
	return l
}

func storedAttachmentsFromProto(l *emailv1.StoredAttachmentList) []ports.StoredAttachment {
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
		})
	}
	return atts
}

func eventToProto(e ports.Event) *emailv1.Event {
	return &emailv1.Event{
		Id:               e.ID,
		OrganizationId:   e.OrganizationID,
		Type:             e.Type,
		MessageId:        e.MessageID,
		RecipientId:      e.RecipientID,
		DomainId:         e.DomainID,
		ProviderResponse: e.ProviderResponse,
		OccurredAt:       timeToProto(e.OccurredAt),
		Url:              e.URL,
		LinkId:           e.LinkID,
		BounceClass:      e.BounceClass,
	}
}

func eventFromProto(e *emailv1.Event) ports.Event {
	return ports.Event{
		ID:               e.GetId(),
		OrganizationID:   e.GetOrganizationId(),
		Type:             e.GetType(),
		MessageID:        e.GetMessageId(),
		RecipientID:      e.GetRecipientId(),
		DomainID:         e.GetDomainId(),
		ProviderResponse: e.ProviderResponse,
		OccurredAt:       timeFromProto(e.GetOccurredAt()),
		URL:              e.GetUrl(),
		LinkID:           e.GetLinkId(),
		BounceClass:      e.GetBounceClass(),
	}
}

func eventsToProto(events []ports.Event) *emailv1.EventList {
	if events == nil {
		return nil
	}
	return &emailv1.EventList{Items: mapItems(events, eventToProto)}
}

func eventsFromProto(l *emailv1.EventList) []ports.Event {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), eventFromProto)
}

func messageToProto(m ports.Message) *emailv1.Message {
	return &emailv1.Message{
		Id:             m.ID,
		OrganizationId: m.OrganizationID,
		DomainId:       m.DomainID,
		Status:         string(m.Status),
		From:           m.From,
		Subject:        m.Subject,
		Html:           m.HTML,
		Text:           m.Text,
		ReplyTo:        m.ReplyTo,
		Headers:        stringMapToProto(m.Headers),
		Tags:           stringMapToProto(m.Tags),
		Metadata:       m.Metadata,
		Sandbox:        m.Sandbox,
		ScheduledAt:    timePtrToProto(m.ScheduledAt),
		IdempotencyKey: m.IdempotencyKey,
		CreatedAt:      timeToProto(m.CreatedAt),
		Recipients:     recipientsToProto(m.Recipients),
		Attachments:    storedAttachmentsToProto(m.Attachments),
		Events:         eventsToProto(m.Events),
	}
}

func messageFromProto(m *emailv1.Message) ports.Message {
	return ports.Message{
		ID:             m.GetId(),
		OrganizationID: m.GetOrganizationId(),
		DomainID:       m.GetDomainId(),
		Status:         ports.MessageStatus(m.GetStatus()),
		From:           m.GetFrom(),
		Subject:        m.GetSubject(),
		HTML:           m.GetHtml(),
		Text:           m.GetText(),
		ReplyTo:        m.GetReplyTo(),
		Headers:        stringMapFromProto(m.GetHeaders()),
		Tags:           stringMapFromProto(m.GetTags()),
		Metadata:       json.RawMessage(m.GetMetadata()),
		Sandbox:        m.GetSandbox(),
		ScheduledAt:    timePtrFromProto(m.GetScheduledAt()),
		IdempotencyKey: m.GetIdempotencyKey(),
		CreatedAt:      timeFromProto(m.GetCreatedAt()),
		Recipients:     recipientsFromProto(m.GetRecipients()),
		Attachments:    storedAttachmentsFromProto(m.GetAttachments()),
		Events:         eventsFromProto(m.GetEvents()),
	}
}

func messagesToProto(messages []ports.Message) *emailv1.MessageList {
	if messages == nil {
		return nil
	}
	return &emailv1.MessageList{Items: mapItems(messages, messageToProto)}
}

func messagesFromProto(l *emailv1.MessageList) []ports.Message {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), messageFromProto)
}
