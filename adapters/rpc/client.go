package rpc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	deliverabilityv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1/deliverabilityv1connect"
	deliveryv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/delivery/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/delivery/v1/deliveryv1connect"
	domainv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/domain/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/domain/v1/domainv1connect"
	emailv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1/emailv1connect"
	templatev1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1/templatev1connect"
	trackingv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1/trackingv1connect"
	webhookv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/webhook/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/webhook/v1/webhookv1connect"
)

// Client is the core as seen from another tier. Its Core holds a client of every service of the table in
// service.go, each implementing its field's interface by calling a NewHandler over Connect and returning
// the same values and *ports.Error the in-process core would, so the tier is written once for both
// deployments.
type Client struct {
	core ports.Core

	domains   domainv1connect.DomainServiceClient
	emails    emailv1connect.EmailServiceClient
	delivery  deliveryv1connect.DeliveryServiceClient
	webhooks  webhookv1connect.WebhookServiceClient
	templates templatev1connect.TemplateServiceClient
	deliver   deliverabilityv1connect.DeliverabilityServiceClient
	feedback  deliverabilityv1connect.FeedbackServiceClient
	tracking  trackingv1connect.TrackingServiceClient
}

var (
	_ ports.DomainService         = (*Client)(nil)
	_ ports.EmailService          = (*Client)(nil)
	_ ports.DeliveryService       = (*Client)(nil)
	_ ports.WebhookService        = (*Client)(nil)
	_ ports.TemplateService       = (*Client)(nil)
	_ ports.TemplateRenderer      = (*Client)(nil)
	_ ports.DeliverabilityService = (*Client)(nil)
	_ ports.FeedbackService       = (*Client)(nil)
	_ ports.TrackingService       = (*Client)(nil)
	_ ports.Pinger                = (*Client)(nil)
)

// defaultHTTPClient keeps many idle connections per host instead of net/http's two: the edge calls the
// core on almost every request (authentication, rate limits), and re-dialling would dominate the hop.
func defaultHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   5 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
	}
}

// NewClient calls the handler served at baseURL (such as http://core:8081), presenting token as the
// inter-tier credential. A nil httpClient means one whose transport keeps up to 256 idle connections
// to the core, because the edge calls it on almost every request, and whose 30-second timeout bounds a
// call whose caller set no deadline. Messages up to MaxMessageBytes go either way, as the handler allows.
func NewClient(baseURL, token string, httpClient connect.HTTPClient) *Client {
	if httpClient == nil {
		httpClient = defaultHTTPClient()
	}
	env := clientEnv{
		httpClient: httpClient,
		baseURL:    baseURL,
		opts: []connect.ClientOption{
			connect.WithInterceptors(clientInterceptors(token)...),
			connect.WithReadMaxBytes(MaxMessageBytes),
			connect.WithSendMaxBytes(MaxMessageBytes),
		},
	}
	c := &Client{}
	for _, s := range services {
		s.fill(&c.core, env)
	}
	opts := env.opts
	c.domains = domainv1connect.NewDomainServiceClient(httpClient, baseURL, opts...)
	c.emails = emailv1connect.NewEmailServiceClient(httpClient, baseURL, opts...)
	c.delivery = deliveryv1connect.NewDeliveryServiceClient(httpClient, baseURL, opts...)
	c.webhooks = webhookv1connect.NewWebhookServiceClient(httpClient, baseURL, opts...)
	c.templates = templatev1connect.NewTemplateServiceClient(httpClient, baseURL, opts...)
	c.deliver = deliverabilityv1connect.NewDeliverabilityServiceClient(httpClient, baseURL, opts...)
	c.feedback = deliverabilityv1connect.NewFeedbackServiceClient(httpClient, baseURL, opts...)
	c.tracking = trackingv1connect.NewTrackingServiceClient(httpClient, baseURL, opts...)
	c.core.Domains, c.core.Emails, c.core.Delivery, c.core.Webhooks = c, c, c, c
	c.core.Templates, c.core.Renderer, c.core.Deliverability, c.core.Feedback, c.core.Tracking = c, c, c, c, c
	return c
}

// Core is every interface of ports.Core served by its client, ready to hand to a tier in place of the
// in-process core.
func (c *Client) Core() ports.Core {
	return c.core
}

// Ping implements ports.Pinger as Core().Health does, so that a process which does not run the core can
// hold the Client itself as its readiness check.
func (c *Client) Ping(ctx context.Context) error {
	return c.core.Health.Ping(ctx)
}

// call sends msg through send, one method of a generated client, and converts the answer with from. A
// failure comes back as fromConnectError makes it, beside the zero value, which is what the in-process
// core's method would have returned.
func call[Req, Res, T any](ctx context.Context, procedure string, send func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req, from func(*Res) T) (T, error) {
	res, err := send(ctx, connect.NewRequest(msg))
	if err != nil {
		var zero T
		return zero, fromConnectError(procedure, err)
	}
	return from(res.Msg), nil
}

// exec is call for a method whose only result is its error.
func exec[Req, Res any](ctx context.Context, procedure string, send func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req) error {
	_, err := send(ctx, connect.NewRequest(msg))
	return fromConnectError(procedure, err)
}

// CreateDomain implements ports.DomainService.
func (c *Client) CreateDomain(ctx context.Context, orgID, name string) (ports.Domain, error) {
	res, err := c.domains.CreateDomain(ctx, connect.NewRequest(&domainv1.CreateDomainRequest{OrganizationId: orgID, Name: name}))
	if err != nil {
		return ports.Domain{}, fromConnectError(domainv1connect.DomainServiceCreateDomainProcedure, err)
	}
	return domainFromProto(res.Msg.GetDomain()), nil
}

// ListDomains implements ports.DomainService.
func (c *Client) ListDomains(ctx context.Context, orgID string) ([]ports.Domain, error) {
	res, err := c.domains.ListDomains(ctx, connect.NewRequest(&domainv1.ListDomainsRequest{OrganizationId: orgID}))
	if err != nil {
		return nil, fromConnectError(domainv1connect.DomainServiceListDomainsProcedure, err)
	}
	return domainsFromProto(res.Msg.GetDomains()), nil
}

// GetDomain implements ports.DomainService.
func (c *Client) GetDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	res, err := c.domains.GetDomain(ctx, connect.NewRequest(&domainv1.GetDomainRequest{OrganizationId: orgID, Id: id}))
	if err != nil {
		return ports.Domain{}, fromConnectError(domainv1connect.DomainServiceGetDomainProcedure, err)
	}
	return domainFromProto(res.Msg.GetDomain()), nil
}

// VerifyDomain implements ports.DomainService.
func (c *Client) VerifyDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	res, err := c.domains.VerifyDomain(ctx, connect.NewRequest(&domainv1.VerifyDomainRequest{OrganizationId: orgID, Id: id}))
	if err != nil {
		return ports.Domain{}, fromConnectError(domainv1connect.DomainServiceVerifyDomainProcedure, err)
	}
	return domainFromProto(res.Msg.GetDomain()), nil
}

// SuspendDomain implements ports.DomainService.
func (c *Client) SuspendDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	res, err := c.domains.SuspendDomain(ctx, connect.NewRequest(&domainv1.SuspendDomainRequest{OrganizationId: orgID, Id: id}))
	if err != nil {
		return ports.Domain{}, fromConnectError(domainv1connect.DomainServiceSuspendDomainProcedure, err)
	}
	return domainFromProto(res.Msg.GetDomain()), nil
}

// UpdateDomainTracking implements ports.DomainService. A nil setting travels as unset and stays nil, so
// the core leaves it as it is.
func (c *Client) UpdateDomainTracking(ctx context.Context, orgID, id string, t ports.TrackingSettings) (ports.Domain, error) {
	res, err := c.domains.UpdateDomainTracking(ctx, connect.NewRequest(&domainv1.UpdateDomainTrackingRequest{
		OrganizationId: orgID,
		Id:             id,
		Tracking:       trackingSettingsToProto(t),
	}))
	if err != nil {
		return ports.Domain{}, fromConnectError(domainv1connect.DomainServiceUpdateDomainTrackingProcedure, err)
	}
	return domainFromProto(res.Msg.GetDomain()), nil
}

// Send implements ports.EmailService.
func (c *Client) Send(ctx context.Context, orgID string, req ports.SendRequest) (ports.SendResult, error) {
	email, err := sendEmailToProto(req)
	if err != nil {
		return ports.SendResult{}, encodeError(emailv1connect.EmailServiceSendProcedure, err)
	}
	res, err := c.emails.Send(ctx, connect.NewRequest(&emailv1.SendRequest{OrganizationId: orgID, Email: email}))
	if err != nil {
		return ports.SendResult{}, fromConnectError(emailv1connect.EmailServiceSendProcedure, err)
	}
	return sendResultFromProto(res.Msg.GetResult()), nil
}

// SendBatch implements ports.EmailService. Each item's error comes back as the *ports.Error a single
// Send would have returned.
func (c *Client) SendBatch(ctx context.Context, orgID string, reqs []ports.SendRequest) ([]ports.BatchItemResult, error) {
	emails, err := sendEmailsToProto(reqs)
	if err != nil {
		return nil, encodeError(emailv1connect.EmailServiceSendBatchProcedure, err)
	}
	res, err := c.emails.SendBatch(ctx, connect.NewRequest(&emailv1.SendBatchRequest{OrganizationId: orgID, Emails: emails}))
	if err != nil {
		return nil, fromConnectError(emailv1connect.EmailServiceSendBatchProcedure, err)
	}
	return batchResultsFromProto(res.Msg.GetResults()), nil
}

// GetEmail implements ports.EmailService.
func (c *Client) GetEmail(ctx context.Context, orgID, id string) (ports.Message, error) {
	res, err := c.emails.GetEmail(ctx, connect.NewRequest(&emailv1.GetEmailRequest{OrganizationId: orgID, Id: id}))
	if err != nil {
		return ports.Message{}, fromConnectError(emailv1connect.EmailServiceGetEmailProcedure, err)
	}
	return messageFromProto(res.Msg.GetMessage()), nil
}

// CancelEmail implements ports.EmailService.
func (c *Client) CancelEmail(ctx context.Context, orgID, id string) (ports.Message, error) {
	res, err := c.emails.CancelEmail(ctx, connect.NewRequest(&emailv1.CancelEmailRequest{OrganizationId: orgID, Id: id}))
	if err != nil {
		return ports.Message{}, fromConnectError(emailv1connect.EmailServiceCancelEmailProcedure, err)
	}
	return messageFromProto(res.Msg.GetMessage()), nil
}

// ListEmails implements ports.EmailService.
func (c *Client) ListEmails(ctx context.Context, orgID string, q ports.ListEmailsQuery) (ports.EmailPage, error) {
	res, err := c.emails.ListEmails(ctx, connect.NewRequest(&emailv1.ListEmailsRequest{
		OrganizationId: orgID,
		Limit:          int64(q.Limit),
		Cursor:         q.Cursor,
		Status:         string(q.Status),
	}))
	if err != nil {
		return ports.EmailPage{}, fromConnectError(emailv1connect.EmailServiceListEmailsProcedure, err)
	}
	return ports.EmailPage{Data: messagesFromProto(res.Msg.GetData()), NextCursor: res.Msg.GetNextCursor()}, nil
}

// LoadOutbound implements ports.DeliveryService. The answer holds the DKIM private key in plaintext, as
// the in-process core's does.
func (c *Client) LoadOutbound(ctx context.Context, job ports.DeliveryJob) (ports.OutboundMessage, error) {
	res, err := c.delivery.LoadOutbound(ctx, connect.NewRequest(&deliveryv1.LoadOutboundRequest{Job: deliveryJobToProto(job)}))
	if err != nil {
		return ports.OutboundMessage{}, fromConnectError(deliveryv1connect.DeliveryServiceLoadOutboundProcedure, err)
	}
	return outboundMessageFromProto(res.Msg.GetMessage()), nil
}

// ReportDelivery implements ports.DeliveryService.
func (c *Client) ReportDelivery(ctx context.Context, r ports.DeliveryReport) error {
	_, err := c.delivery.ReportDelivery(ctx, connect.NewRequest(&deliveryv1.ReportDeliveryRequest{Report: deliveryReportToProto(r)}))
	return fromConnectError(deliveryv1connect.DeliveryServiceReportDeliveryProcedure, err)
}

// CreateEndpoint implements ports.WebhookService. The answer carries the plaintext secret; the sealed one
// stays in the core, so Secret is nil.
func (c *Client) CreateEndpoint(ctx context.Context, orgID, url string, eventTypes []string) (ports.CreatedWebhookEndpoint, error) {
	res, err := c.webhooks.CreateEndpoint(ctx, connect.NewRequest(&webhookv1.CreateEndpointRequest{
		OrganizationId: orgID,
		Url:            url,
		EventTypes:     eventTypesToProto(eventTypes),
	}))
	if err != nil {
		return ports.CreatedWebhookEndpoint{}, fromConnectError(webhookv1connect.WebhookServiceCreateEndpointProcedure, err)
	}
	return createdWebhookEndpointFromProto(res.Msg.GetEndpoint()), nil
}

// ListEndpoints implements ports.WebhookService.
func (c *Client) ListEndpoints(ctx context.Context, orgID string) ([]ports.WebhookEndpoint, error) {
	res, err := c.webhooks.ListEndpoints(ctx, connect.NewRequest(&webhookv1.ListEndpointsRequest{OrganizationId: orgID}))
	if err != nil {
		return nil, fromConnectError(webhookv1connect.WebhookServiceListEndpointsProcedure, err)
	}
	return webhookEndpointsFromProto(res.Msg.GetEndpoints()), nil
}

// DeleteEndpoint implements ports.WebhookService.
func (c *Client) DeleteEndpoint(ctx context.Context, orgID, id string) error {
	_, err := c.webhooks.DeleteEndpoint(ctx, connect.NewRequest(&webhookv1.DeleteEndpointRequest{OrganizationId: orgID, Id: id}))
	return fromConnectError(webhookv1connect.WebhookServiceDeleteEndpointProcedure, err)
}

// TestEndpoint implements ports.WebhookService.
func (c *Client) TestEndpoint(ctx context.Context, orgID, id string) (ports.WebhookDelivery, error) {
	res, err := c.webhooks.TestEndpoint(ctx, connect.NewRequest(&webhookv1.TestEndpointRequest{OrganizationId: orgID, Id: id}))
	if err != nil {
		return ports.WebhookDelivery{}, fromConnectError(webhookv1connect.WebhookServiceTestEndpointProcedure, err)
	}
	return webhookDeliveryFromProto(res.Msg.GetDelivery()), nil
}

// RotateSecret implements ports.WebhookService.
func (c *Client) RotateSecret(ctx context.Context, orgID, id string) (ports.CreatedWebhookEndpoint, error) {
	res, err := c.webhooks.RotateSecret(ctx, connect.NewRequest(&webhookv1.RotateSecretRequest{OrganizationId: orgID, Id: id}))
	if err != nil {
		return ports.CreatedWebhookEndpoint{}, fromConnectError(webhookv1connect.WebhookServiceRotateSecretProcedure, err)
	}
	return createdWebhookEndpointFromProto(res.Msg.GetEndpoint()), nil
}

// Replay implements ports.WebhookService.
func (c *Client) Replay(ctx context.Context, orgID, endpointID, deliveryID string) (ports.WebhookDelivery, error) {
	res, err := c.webhooks.Replay(ctx, connect.NewRequest(&webhookv1.ReplayRequest{
		OrganizationId: orgID,
		EndpointId:     endpointID,
		DeliveryId:     deliveryID,
	}))
	if err != nil {
		return ports.WebhookDelivery{}, fromConnectError(webhookv1connect.WebhookServiceReplayProcedure, err)
	}
	return webhookDeliveryFromProto(res.Msg.GetDelivery()), nil
}

// ListDeliveries implements ports.WebhookService.
func (c *Client) ListDeliveries(ctx context.Context, orgID string) ([]ports.WebhookDelivery, error) {
	res, err := c.webhooks.ListDeliveries(ctx, connect.NewRequest(&webhookv1.ListDeliveriesRequest{OrganizationId: orgID}))
	if err != nil {
		return nil, fromConnectError(webhookv1connect.WebhookServiceListDeliveriesProcedure, err)
	}
	return webhookDeliveriesFromProto(res.Msg.GetDeliveries()), nil
}

// CreateTemplate implements ports.TemplateService.
func (c *Client) CreateTemplate(ctx context.Context, orgID, name string) (ports.Template, error) {
	res, err := c.templates.CreateTemplate(ctx, connect.NewRequest(&templatev1.CreateTemplateRequest{OrganizationId: orgID, Name: name}))
	if err != nil {
		return ports.Template{}, fromConnectError(templatev1connect.TemplateServiceCreateTemplateProcedure, err)
	}
	return templateFromProto(res.Msg.GetTemplate()), nil
}

// CreateTemplateVersion implements ports.TemplateService.
func (c *Client) CreateTemplateVersion(ctx context.Context, orgID, templateID string, v ports.NewTemplateVersion) (ports.TemplateVersion, error) {
	res, err := c.templates.CreateTemplateVersion(ctx, connect.NewRequest(&templatev1.CreateTemplateVersionRequest{
		OrganizationId: orgID,
		TemplateId:     templateID,
		Version:        newTemplateVersionToProto(v),
	}))
	if err != nil {
		return ports.TemplateVersion{}, fromConnectError(templatev1connect.TemplateServiceCreateTemplateVersionProcedure, err)
	}
	return templateVersionFromProto(res.Msg.GetVersion()), nil
}

// PublishTemplate implements ports.TemplateService.
func (c *Client) PublishTemplate(ctx context.Context, orgID, templateID string, version int) (ports.Template, error) {
	res, err := c.templates.PublishTemplate(ctx, connect.NewRequest(&templatev1.PublishTemplateRequest{
		OrganizationId: orgID,
		TemplateId:     templateID,
		Version:        int64(version),
	}))
	if err != nil {
		return ports.Template{}, fromConnectError(templatev1connect.TemplateServicePublishTemplateProcedure, err)
	}
	return templateFromProto(res.Msg.GetTemplate()), nil
}

// ListTemplates implements ports.TemplateService.
func (c *Client) ListTemplates(ctx context.Context, orgID string) ([]ports.Template, error) {
	res, err := c.templates.ListTemplates(ctx, connect.NewRequest(&templatev1.ListTemplatesRequest{OrganizationId: orgID}))
	if err != nil {
		return nil, fromConnectError(templatev1connect.TemplateServiceListTemplatesProcedure, err)
	}
	return templatesFromProto(res.Msg.GetTemplates()), nil
}

// GetTemplate implements ports.TemplateService.
func (c *Client) GetTemplate(ctx context.Context, orgID, id string) (ports.Template, error) {
	res, err := c.templates.GetTemplate(ctx, connect.NewRequest(&templatev1.GetTemplateRequest{OrganizationId: orgID, Id: id}))
	if err != nil {
		return ports.Template{}, fromConnectError(templatev1connect.TemplateServiceGetTemplateProcedure, err)
	}
	return templateFromProto(res.Msg.GetTemplate()), nil
}

// RenderTemplate implements ports.TemplateRenderer. Variables travel as JSON, so the core receives every
// number as a json.Number, exactly as a send's template variables arrive; variables that are not JSON
// never leave the process.
func (c *Client) RenderTemplate(ctx context.Context, orgID, templateID string, vars map[string]any) (ports.RenderedTemplate, error) {
	b, err := jsonObjectToProto(vars)
	if err != nil {
		return ports.RenderedTemplate{}, encodeError(templatev1connect.TemplateServiceRenderTemplateProcedure, fmt.Errorf("template variables: %w", err))
	}
	res, err := c.templates.RenderTemplate(ctx, connect.NewRequest(&templatev1.RenderTemplateRequest{
		OrganizationId: orgID,
		TemplateId:     templateID,
		VariablesJson:  b,
	}))
	if err != nil {
		return ports.RenderedTemplate{}, fromConnectError(templatev1connect.TemplateServiceRenderTemplateProcedure, err)
	}
	return renderedTemplateFromProto(res.Msg.GetRendered()), nil
}

// ListSuppressions implements ports.DeliverabilityService.
func (c *Client) ListSuppressions(ctx context.Context, orgID string) ([]ports.Suppression, error) {
	res, err := c.deliver.ListSuppressions(ctx, connect.NewRequest(&deliverabilityv1.ListSuppressionsRequest{OrganizationId: orgID}))
	if err != nil {
		return nil, fromConnectError(deliverabilityv1connect.DeliverabilityServiceListSuppressionsProcedure, err)
	}
	return suppressionsFromProto(res.Msg.GetSuppressions()), nil
}

// CreateSuppression implements ports.DeliverabilityService.
func (c *Client) CreateSuppression(ctx context.Context, orgID string, s ports.NewSuppression) (ports.Suppression, error) {
	res, err := c.deliver.CreateSuppression(ctx, connect.NewRequest(&deliverabilityv1.CreateSuppressionRequest{
		OrganizationId: orgID,
		Suppression:    newSuppressionToProto(s),
	}))
	if err != nil {
		return ports.Suppression{}, fromConnectError(deliverabilityv1connect.DeliverabilityServiceCreateSuppressionProcedure, err)
	}
	return suppressionFromProto(res.Msg.GetSuppression()), nil
}

// DeleteSuppression implements ports.DeliverabilityService.
func (c *Client) DeleteSuppression(ctx context.Context, orgID, id string) (bool, error) {
	res, err := c.deliver.DeleteSuppression(ctx, connect.NewRequest(&deliverabilityv1.DeleteSuppressionRequest{OrganizationId: orgID, Id: id}))
	if err != nil {
		return false, fromConnectError(deliverabilityv1connect.DeliverabilityServiceDeleteSuppressionProcedure, err)
	}
	return res.Msg.GetDeleted(), nil
}

// ListGlobalSuppressions implements ports.DeliverabilityService.
func (c *Client) ListGlobalSuppressions(ctx context.Context) ([]ports.Suppression, error) {
	res, err := c.deliver.ListGlobalSuppressions(ctx, connect.NewRequest(&deliverabilityv1.ListGlobalSuppressionsRequest{}))
	if err != nil {
		return nil, fromConnectError(deliverabilityv1connect.DeliverabilityServiceListGlobalSuppressionsProcedure, err)
	}
	return suppressionsFromProto(res.Msg.GetSuppressions()), nil
}

// CreateGlobalSuppression implements ports.DeliverabilityService.
func (c *Client) CreateGlobalSuppression(ctx context.Context, s ports.NewSuppression) (ports.Suppression, error) {
	res, err := c.deliver.CreateGlobalSuppression(ctx, connect.NewRequest(&deliverabilityv1.CreateGlobalSuppressionRequest{
		Suppression: newSuppressionToProto(s),
	}))
	if err != nil {
		return ports.Suppression{}, fromConnectError(deliverabilityv1connect.DeliverabilityServiceCreateGlobalSuppressionProcedure, err)
	}
	return suppressionFromProto(res.Msg.GetSuppression()), nil
}

// DeleteGlobalSuppression implements ports.DeliverabilityService.
func (c *Client) DeleteGlobalSuppression(ctx context.Context, id string) (bool, error) {
	res, err := c.deliver.DeleteGlobalSuppression(ctx, connect.NewRequest(&deliverabilityv1.DeleteGlobalSuppressionRequest{Id: id}))
	if err != nil {
		return false, fromConnectError(deliverabilityv1connect.DeliverabilityServiceDeleteGlobalSuppressionProcedure, err)
	}
	return res.Msg.GetDeleted(), nil
}

// ListBounces implements ports.DeliverabilityService.
func (c *Client) ListBounces(ctx context.Context, orgID string, q ports.PageQuery) (ports.BouncePage, error) {
	res, err := c.deliver.ListBounces(ctx, connect.NewRequest(&deliverabilityv1.ListBouncesRequest{
		OrganizationId: orgID,
		Query:          pageQueryToProto(q),
	}))
	if err != nil {
		return ports.BouncePage{}, fromConnectError(deliverabilityv1connect.DeliverabilityServiceListBouncesProcedure, err)
	}
	return ports.BouncePage{Data: bouncesFromProto(res.Msg.GetData()), NextCursor: res.Msg.GetNextCursor()}, nil
}

// ListComplaints implements ports.DeliverabilityService.
func (c *Client) ListComplaints(ctx context.Context, orgID string, q ports.PageQuery) (ports.ComplaintPage, error) {
	res, err := c.deliver.ListComplaints(ctx, connect.NewRequest(&deliverabilityv1.ListComplaintsRequest{
		OrganizationId: orgID,
		Query:          pageQueryToProto(q),
	}))
	if err != nil {
		return ports.ComplaintPage{}, fromConnectError(deliverabilityv1connect.DeliverabilityServiceListComplaintsProcedure, err)
	}
	return ports.ComplaintPage{Data: complaintsFromProto(res.Msg.GetData()), NextCursor: res.Msg.GetNextCursor()}, nil
}

// AcceptsRecipient implements ports.FeedbackService. rcpt travels byte for byte, so an address that is
// not UTF-8 gets the core's answer, as in process.
func (c *Client) AcceptsRecipient(ctx context.Context, rcpt string) (bool, error) {
	res, err := c.feedback.AcceptsRecipient(ctx, connect.NewRequest(&deliverabilityv1.AcceptsRecipientRequest{Rcpt: []byte(rcpt)}))
	if err != nil {
		return false, fromConnectError(deliverabilityv1connect.FeedbackServiceAcceptsRecipientProcedure, err)
	}
	return res.Msg.GetAccepted(), nil
}

// RecordBounce implements ports.FeedbackService. The report's strings come from mail a stranger sent;
// like every string on the hop they must be valid UTF-8, or the call fails as an internal error naming
// the field before it reaches the core.
func (c *Client) RecordBounce(ctx context.Context, r ports.BounceReport) error {
	_, err := c.feedback.RecordBounce(ctx, connect.NewRequest(&deliverabilityv1.RecordBounceRequest{Report: bounceReportToProto(r)}))
	return fromConnectError(deliverabilityv1connect.FeedbackServiceRecordBounceProcedure, err)
}

// RecordComplaint implements ports.FeedbackService, with RecordBounce's proviso on UTF-8.
func (c *Client) RecordComplaint(ctx context.Context, r ports.ComplaintReport) error {
	_, err := c.feedback.RecordComplaint(ctx, connect.NewRequest(&deliverabilityv1.RecordComplaintRequest{Report: complaintReportToProto(r)}))
	return fromConnectError(deliverabilityv1connect.FeedbackServiceRecordComplaintProcedure, err)
}

// Open implements ports.TrackingService. The token travels byte for byte, so a mangled one gets the
// core's answer (invalid_argument), as in process.
func (c *Client) Open(ctx context.Context, token string) error {
	_, err := c.tracking.Open(ctx, connect.NewRequest(&trackingv1.OpenRequest{Token: []byte(token)}))
	return fromConnectError(trackingv1connect.TrackingServiceOpenProcedure, err)
}

// Click implements ports.TrackingService.
func (c *Client) Click(ctx context.Context, token string) (string, error) {
	res, err := c.tracking.Click(ctx, connect.NewRequest(&trackingv1.ClickRequest{Token: []byte(token)}))
	if err != nil {
		return "", fromConnectError(trackingv1connect.TrackingServiceClickProcedure, err)
	}
	return res.Msg.GetUrl(), nil
}

// pick is call's usual from: the one field of a response that get reads, converted by from.
func pick[Res, W, T any](get func(*Res) W, from func(W) T) func(*Res) T {
	return func(r *Res) T { return from(get(r)) }
}
