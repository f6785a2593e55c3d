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
	templatev1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1/templatev1connect"
	trackingv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1/trackingv1connect"
)

// Client is the core as seen from another tier. Its Core holds a client of every service of the table in
// service.go, each implementing its field's interface by calling a NewHandler over Connect and returning
// the same values and *ports.Error the in-process core would, so the tier is written once for both
// deployments.
type Client struct {
	core ports.Core

	templates templatev1connect.TemplateServiceClient
	deliver   deliverabilityv1connect.DeliverabilityServiceClient
	feedback  deliverabilityv1connect.FeedbackServiceClient
	tracking  trackingv1connect.TrackingServiceClient
}

var (
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
	c.templates = templatev1connect.NewTemplateServiceClient(httpClient, baseURL, opts...)
	c.deliver = deliverabilityv1connect.NewDeliverabilityServiceClient(httpClient, baseURL, opts...)
	c.feedback = deliverabilityv1connect.NewFeedbackServiceClient(httpClient, baseURL, opts...)
	c.tracking = trackingv1connect.NewTrackingServiceClient(httpClient, baseURL, opts...)
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
