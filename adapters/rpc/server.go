package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	deliverabilityv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1/deliverabilityv1connect"
	templatev1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1/templatev1connect"
	trackingv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1/trackingv1connect"
)

// MaxMessageBytes bounds every message either side of the hop reads or sends. A send carries up to
// 25 MiB of decoded attachments (SPEC §8) besides its bodies, so the bound sits well above that; it still
// keeps a single call from exhausting a process's memory.
const MaxMessageBytes = 64 << 20

// ServerConfig configures the core's side of the hop.
type ServerConfig struct {
	// Token is the shared secret every caller must present as `Authorization: Bearer <Token>`. The
	// handler refuses every call while it is empty, so a forgotten setting fails closed.
	Token string
	// Logger receives panics and errors that are not *ports.Error, which callers only see as
	// "internal error". Nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports a configuration that would refuse every call, so that a deployment fails at start
// rather than on its first request.
func (c ServerConfig) Validate() error {
	if c.Token == "" {
		return errors.New("rpc: server token is required")
	}
	return nil
}

// NewHandler serves core's services on one mux, behind the interceptors of serverInterceptors. It mounts
// every service of the table in service.go; a nil field of core leaves its service unmounted, so a
// process serves only what it has, and calls to it fail as Unimplemented, which clients report as
// internal errors.
func NewHandler(core ports.Core, cfg ServerConfig) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	env := handlerEnv{
		log: log,
		opts: []connect.HandlerOption{
			connect.WithInterceptors(serverInterceptors(cfg, log)...),
			connect.WithReadMaxBytes(MaxMessageBytes),
			connect.WithSendMaxBytes(MaxMessageBytes),
		},
	}
	mux := http.NewServeMux()
	for _, s := range services {
		if path, h, ok := s.mount(core, env); ok {
			mux.Handle(path, h)
		}
	}
	legacyMount(mux, core, env)
	return mux
}

// fail turns an implementation's error into its wire form, logging what the caller will not see.
func fail(ctx context.Context, log *slog.Logger, spec connect.Spec, err error) error {
	if ports.ErrorCode(err) == ports.CodeInternal {
		log.ErrorContext(ctx, "rpc: internal error", "procedure", spec.Procedure, "err", err)
	}
	return toConnectError(err)
}

// respond finishes a handler method: it answers with the wire form of err when the implementation
// failed, and otherwise with the message msg builds from the implementation's result.
func respond[Req, Res any](ctx context.Context, log *slog.Logger, req *connect.Request[Req], err error, msg func() *Res) (*connect.Response[Res], error) {
	if err != nil {
		return nil, fail(ctx, log, req.Spec(), err)
	}
	return connect.NewResponse(msg()), nil
}

// empty is respond's msg for a call whose answer carries nothing.
func empty[Res any]() *Res { return new(Res) }

func legacyMount(mux *http.ServeMux, core ports.Core, env handlerEnv) {
	s := &server{core: core, log: env.log}
	if r, ok := core.Templates.(ports.TemplateRenderer); ok {
		s.renderer = r
	}
	opts := env.opts
	mount := func(path string, h http.Handler) { mux.Handle(path, h) }
	if core.Templates != nil {
		mount(templatev1connect.NewTemplateServiceHandler(s, opts...))
	}
	if core.Deliverability != nil {
		mount(deliverabilityv1connect.NewDeliverabilityServiceHandler(s, opts...))
	}
	if core.Feedback != nil {
		mount(deliverabilityv1connect.NewFeedbackServiceHandler(s, opts...))
	}
	if core.Tracking != nil {
		mount(trackingv1connect.NewTrackingServiceHandler(s, opts...))
	}
}

// server implements the generated handler interfaces not yet split by area.
type server struct {
	core ports.Core
	// renderer is core.Templates when it renders too; nil leaves RenderTemplate unimplemented.
	renderer ports.TemplateRenderer
	log      *slog.Logger
}

var (
	_ templatev1connect.TemplateServiceHandler             = (*server)(nil)
	_ deliverabilityv1connect.DeliverabilityServiceHandler = (*server)(nil)
	_ deliverabilityv1connect.FeedbackServiceHandler       = (*server)(nil)
	_ trackingv1connect.TrackingServiceHandler             = (*server)(nil)
)

func (s *server) fail(ctx context.Context, spec connect.Spec, err error) error {
	return fail(ctx, s.log, spec, err)
}

func (s *server) CreateTemplate(ctx context.Context, req *connect.Request[templatev1.CreateTemplateRequest]) (*connect.Response[templatev1.CreateTemplateResponse], error) {
	t, err := s.core.Templates.CreateTemplate(ctx, req.Msg.GetOrganizationId(), req.Msg.GetName())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.CreateTemplateResponse{Template: templateToProto(t)}), nil
}

func (s *server) CreateTemplateVersion(ctx context.Context, req *connect.Request[templatev1.CreateTemplateVersionRequest]) (*connect.Response[templatev1.CreateTemplateVersionResponse], error) {
	m := req.Msg
	v, err := s.core.Templates.CreateTemplateVersion(ctx, m.GetOrganizationId(), m.GetTemplateId(), newTemplateVersionFromProto(m.GetVersion()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.CreateTemplateVersionResponse{Version: templateVersionToProto(v)}), nil
}

func (s *server) PublishTemplate(ctx context.Context, req *connect.Request[templatev1.PublishTemplateRequest]) (*connect.Response[templatev1.PublishTemplateResponse], error) {
	m := req.Msg
	t, err := s.core.Templates.PublishTemplate(ctx, m.GetOrganizationId(), m.GetTemplateId(), int(m.GetVersion()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.PublishTemplateResponse{Template: templateToProto(t)}), nil
}

func (s *server) ListTemplates(ctx context.Context, req *connect.Request[templatev1.ListTemplatesRequest]) (*connect.Response[templatev1.ListTemplatesResponse], error) {
	templates, err := s.core.Templates.ListTemplates(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.ListTemplatesResponse{Templates: templatesToProto(templates)}), nil
}

func (s *server) GetTemplate(ctx context.Context, req *connect.Request[templatev1.GetTemplateRequest]) (*connect.Response[templatev1.GetTemplateResponse], error) {
	t, err := s.core.Templates.GetTemplate(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.GetTemplateResponse{Template: templateToProto(t)}), nil
}

func (s *server) RenderTemplate(ctx context.Context, req *connect.Request[templatev1.RenderTemplateRequest]) (*connect.Response[templatev1.RenderTemplateResponse], error) {
	if s.renderer == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("rpc: this core's template service does not render"))
	}
	m := req.Msg
	vars, err := jsonObjectFromProto(m.GetVariablesJson())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), fmt.Errorf("template variables: %w", err))
	}
	r, err := s.renderer.RenderTemplate(ctx, m.GetOrganizationId(), m.GetTemplateId(), vars)
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.RenderTemplateResponse{Rendered: renderedTemplateToProto(r)}), nil
}

func (s *server) ListSuppressions(ctx context.Context, req *connect.Request[deliverabilityv1.ListSuppressionsRequest]) (*connect.Response[deliverabilityv1.ListSuppressionsResponse], error) {
	suppressions, err := s.core.Deliverability.ListSuppressions(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.ListSuppressionsResponse{Suppressions: suppressionsToProto(suppressions)}), nil
}

func (s *server) CreateSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.CreateSuppressionRequest]) (*connect.Response[deliverabilityv1.CreateSuppressionResponse], error) {
	sup, err := s.core.Deliverability.CreateSuppression(ctx, req.Msg.GetOrganizationId(), newSuppressionFromProto(req.Msg.GetSuppression()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.CreateSuppressionResponse{Suppression: suppressionToProto(sup)}), nil
}

func (s *server) DeleteSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.DeleteSuppressionRequest]) (*connect.Response[deliverabilityv1.DeleteSuppressionResponse], error) {
	deleted, err := s.core.Deliverability.DeleteSuppression(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.DeleteSuppressionResponse{Deleted: deleted}), nil
}

func (s *server) ListGlobalSuppressions(ctx context.Context, req *connect.Request[deliverabilityv1.ListGlobalSuppressionsRequest]) (*connect.Response[deliverabilityv1.ListGlobalSuppressionsResponse], error) {
	suppressions, err := s.core.Deliverability.ListGlobalSuppressions(ctx)
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.ListGlobalSuppressionsResponse{Suppressions: suppressionsToProto(suppressions)}), nil
}

func (s *server) CreateGlobalSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.CreateGlobalSuppressionRequest]) (*connect.Response[deliverabilityv1.CreateGlobalSuppressionResponse], error) {
	sup, err := s.core.Deliverability.CreateGlobalSuppression(ctx, newSuppressionFromProto(req.Msg.GetSuppression()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.CreateGlobalSuppressionResponse{Suppression: suppressionToProto(sup)}), nil
}

func (s *server) DeleteGlobalSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.DeleteGlobalSuppressionRequest]) (*connect.Response[deliverabilityv1.DeleteGlobalSuppressionResponse], error) {
	deleted, err := s.core.Deliverability.DeleteGlobalSuppression(ctx, req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.DeleteGlobalSuppressionResponse{Deleted: deleted}), nil
}

func (s *server) ListBounces(ctx context.Context, req *connect.Request[deliverabilityv1.ListBouncesRequest]) (*connect.Response[deliverabilityv1.ListBouncesResponse], error) {
	page, err := s.core.Deliverability.ListBounces(ctx, req.Msg.GetOrganizationId(), pageQueryFromProto(req.Msg.GetQuery()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.ListBouncesResponse{Data: bouncesToProto(page.Data), NextCursor: page.NextCursor}), nil
}

func (s *server) ListComplaints(ctx context.Context, req *connect.Request[deliverabilityv1.ListComplaintsRequest]) (*connect.Response[deliverabilityv1.ListComplaintsResponse], error) {
	page, err := s.core.Deliverability.ListComplaints(ctx, req.Msg.GetOrganizationId(), pageQueryFromProto(req.Msg.GetQuery()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.ListComplaintsResponse{Data: complaintsToProto(page.Data), NextCursor: page.NextCursor}), nil
}

func (s *server) AcceptsRecipient(ctx context.Context, req *connect.Request[deliverabilityv1.AcceptsRecipientRequest]) (*connect.Response[deliverabilityv1.AcceptsRecipientResponse], error) {
	ok, err := s.core.Feedback.AcceptsRecipient(ctx, string(req.Msg.GetRcpt()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.AcceptsRecipientResponse{Accepted: ok}), nil
}

func (s *server) RecordBounce(ctx context.Context, req *connect.Request[deliverabilityv1.RecordBounceRequest]) (*connect.Response[deliverabilityv1.RecordBounceResponse], error) {
	if err := s.core.Feedback.RecordBounce(ctx, bounceReportFromProto(req.Msg.GetReport())); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.RecordBounceResponse{}), nil
}

func (s *server) RecordComplaint(ctx context.Context, req *connect.Request[deliverabilityv1.RecordComplaintRequest]) (*connect.Response[deliverabilityv1.RecordComplaintResponse], error) {
	if err := s.core.Feedback.RecordComplaint(ctx, complaintReportFromProto(req.Msg.GetReport())); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.RecordComplaintResponse{}), nil
}

func (s *server) Open(ctx context.Context, req *connect.Request[trackingv1.OpenRequest]) (*connect.Response[trackingv1.OpenResponse], error) {
	if err := s.core.Tracking.Open(ctx, string(req.Msg.GetToken())); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&trackingv1.OpenResponse{}), nil
}

func (s *server) Click(ctx context.Context, req *connect.Request[trackingv1.ClickRequest]) (*connect.Response[trackingv1.ClickResponse], error) {
	url, err := s.core.Tracking.Click(ctx, string(req.Msg.GetToken()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&trackingv1.ClickResponse{Url: url}), nil
}
