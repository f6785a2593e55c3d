package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	templatev1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1/templatev1connect"
)

// postmill.template.v1.TemplateService carries two fields of ports.Core: Templates, the template API, and
// Renderer, RenderTemplate alone. The service is mounted when either is set; the methods of a field that
// is nil answer Unimplemented, which clients report as internal errors. The edge calls the template API;
// no tier calls RenderTemplate, because sending renders inside the core.
func init() {
	register(service{mount: mountTemplates, fill: fillTemplates}.
		calledBy(templatev1connect.TemplateServiceName, TierEdge).
		procedureCalledBy(templatev1connect.TemplateServiceRenderTemplateProcedure))
}

func mountTemplates(core ports.Core, env handlerEnv) (string, http.Handler, bool) {
	if core.Templates == nil && core.Renderer == nil {
		return "", nil, false
	}
	var h templatev1connect.TemplateServiceHandler = templatev1connect.UnimplementedTemplateServiceHandler{}
	if core.Templates != nil {
		h = &templateServer{svc: core.Templates, log: env.log}
	}
	if core.Renderer != nil {
		h = &rendererServer{TemplateServiceHandler: h, svc: core.Renderer, log: env.log}
	}
	path, handler := templatev1connect.NewTemplateServiceHandler(h, env.opts...)
	return path, handler, true
}

func fillTemplates(core *ports.Core, env clientEnv) {
	conn := templatev1connect.NewTemplateServiceClient(env.httpClient, env.baseURL, env.opts...)
	core.Templates = &templateClient{conn: conn}
	core.Renderer = &rendererClient{conn: conn}
}

// templateServer serves the template API of postmill.template.v1.TemplateService from a
// ports.TemplateService; its RenderTemplate is the generated Unimplemented one.
type templateServer struct {
	templatev1connect.UnimplementedTemplateServiceHandler
	svc ports.TemplateService
	log *slog.Logger
}

func (s *templateServer) CreateTemplate(ctx context.Context, req *connect.Request[templatev1.CreateTemplateRequest]) (*connect.Response[templatev1.CreateTemplateResponse], error) {
	t, err := s.svc.CreateTemplate(ctx, req.Msg.GetOrganizationId(), req.Msg.GetName())
	return respond(ctx, s.log, req, err, func() *templatev1.CreateTemplateResponse {
		return &templatev1.CreateTemplateResponse{Template: templateToProto(t)}
	})
}

func (s *templateServer) CreateTemplateVersion(ctx context.Context, req *connect.Request[templatev1.CreateTemplateVersionRequest]) (*connect.Response[templatev1.CreateTemplateVersionResponse], error) {
	m := req.Msg
	v, err := s.svc.CreateTemplateVersion(ctx, m.GetOrganizationId(), m.GetTemplateId(), newTemplateVersionFromProto(m.GetVersion()))
	return respond(ctx, s.log, req, err, func() *templatev1.CreateTemplateVersionResponse {
		return &templatev1.CreateTemplateVersionResponse{Version: templateVersionToProto(v)}
	})
}

func (s *templateServer) PublishTemplate(ctx context.Context, req *connect.Request[templatev1.PublishTemplateRequest]) (*connect.Response[templatev1.PublishTemplateResponse], error) {
	m := req.Msg
	t, err := s.svc.PublishTemplate(ctx, m.GetOrganizationId(), m.GetTemplateId(), int(m.GetVersion()))
	return respond(ctx, s.log, req, err, func() *templatev1.PublishTemplateResponse {
		return &templatev1.PublishTemplateResponse{Template: templateToProto(t)}
	})
}

func (s *templateServer) ListTemplates(ctx context.Context, req *connect.Request[templatev1.ListTemplatesRequest]) (*connect.Response[templatev1.ListTemplatesResponse], error) {
	templates, err := s.svc.ListTemplates(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *templatev1.ListTemplatesResponse {
		return &templatev1.ListTemplatesResponse{Templates: templatesToProto(templates)}
	})
}

func (s *templateServer) ListTemplatesPage(ctx context.Context, req *connect.Request[templatev1.ListTemplatesPageRequest]) (*connect.Response[templatev1.ListTemplatesPageResponse], error) {
	m := req.Msg
	page, err := s.svc.ListTemplatesPage(ctx, m.GetOrganizationId(), ports.PageQuery{Limit: int(m.GetLimit()), Cursor: m.GetCursor()})
	return respond(ctx, s.log, req, err, func() *templatev1.ListTemplatesPageResponse {
		return &templatev1.ListTemplatesPageResponse{Templates: templatesToProto(page.Data), NextCursor: page.NextCursor}
	})
}

func (s *templateServer) ListTemplateVersions(ctx context.Context, req *connect.Request[templatev1.ListTemplateVersionsRequest]) (*connect.Response[templatev1.ListTemplateVersionsResponse], error) {
	m := req.Msg
	page, err := s.svc.ListTemplateVersions(ctx, m.GetOrganizationId(), m.GetTemplateId(), ports.PageQuery{Limit: int(m.GetLimit()), Cursor: m.GetCursor()})
	return respond(ctx, s.log, req, err, func() *templatev1.ListTemplateVersionsResponse {
		return &templatev1.ListTemplateVersionsResponse{Versions: templateVersionsToProto(page.Data), NextCursor: page.NextCursor}
	})
}

func (s *templateServer) GetTemplate(ctx context.Context, req *connect.Request[templatev1.GetTemplateRequest]) (*connect.Response[templatev1.GetTemplateResponse], error) {
	t, err := s.svc.GetTemplate(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *templatev1.GetTemplateResponse {
		return &templatev1.GetTemplateResponse{Template: templateToProto(t)}
	})
}

// rendererServer serves RenderTemplate from a ports.TemplateRenderer and the rest of
// postmill.template.v1.TemplateService from the handler it wraps.
type rendererServer struct {
	templatev1connect.TemplateServiceHandler
	svc ports.TemplateRenderer
	log *slog.Logger
}

func (s *rendererServer) RenderTemplate(ctx context.Context, req *connect.Request[templatev1.RenderTemplateRequest]) (*connect.Response[templatev1.RenderTemplateResponse], error) {
	m := req.Msg
	vars, err := jsonObjectFromProto(m.GetVariablesJson())
	if err != nil {
		return nil, fail(ctx, s.log, req.Spec(), fmt.Errorf("template variables: %w", err))
	}
	r, err := s.svc.RenderTemplate(ctx, m.GetOrganizationId(), m.GetTemplateId(), vars)
	return respond(ctx, s.log, req, err, func() *templatev1.RenderTemplateResponse {
		return &templatev1.RenderTemplateResponse{Rendered: renderedTemplateToProto(r)}
	})
}

// templateClient implements ports.TemplateService over postmill.template.v1.TemplateService.
type templateClient struct {
	conn templatev1connect.TemplateServiceClient
}

var _ ports.TemplateService = (*templateClient)(nil)

func (c *templateClient) CreateTemplate(ctx context.Context, orgID, name string) (ports.Template, error) {
	return call(ctx, templatev1connect.TemplateServiceCreateTemplateProcedure, c.conn.CreateTemplate,
		&templatev1.CreateTemplateRequest{OrganizationId: orgID, Name: name},
		pick((*templatev1.CreateTemplateResponse).GetTemplate, templateFromProto))
}

func (c *templateClient) CreateTemplateVersion(ctx context.Context, orgID, templateID string, v ports.NewTemplateVersion) (ports.TemplateVersion, error) {
	return call(ctx, templatev1connect.TemplateServiceCreateTemplateVersionProcedure, c.conn.CreateTemplateVersion, &templatev1.CreateTemplateVersionRequest{
		OrganizationId: orgID,
		TemplateId:     templateID,
		Version:        newTemplateVersionToProto(v),
	}, pick((*templatev1.CreateTemplateVersionResponse).GetVersion, templateVersionFromProto))
}

func (c *templateClient) PublishTemplate(ctx context.Context, orgID, templateID string, version int) (ports.Template, error) {
	return call(ctx, templatev1connect.TemplateServicePublishTemplateProcedure, c.conn.PublishTemplate, &templatev1.PublishTemplateRequest{
		OrganizationId: orgID,
		TemplateId:     templateID,
		Version:        int64(version),
	}, pick((*templatev1.PublishTemplateResponse).GetTemplate, templateFromProto))
}

func (c *templateClient) ListTemplates(ctx context.Context, orgID string) ([]ports.Template, error) {
	return call(ctx, templatev1connect.TemplateServiceListTemplatesProcedure, c.conn.ListTemplates,
		&templatev1.ListTemplatesRequest{OrganizationId: orgID},
		pick((*templatev1.ListTemplatesResponse).GetTemplates, templatesFromProto))
}

func (c *templateClient) ListTemplatesPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Template], error) {
	return call(ctx, templatev1connect.TemplateServiceListTemplatesPageProcedure, c.conn.ListTemplatesPage,
		&templatev1.ListTemplatesPageRequest{OrganizationId: orgID, Limit: int64(q.Limit), Cursor: q.Cursor},
		func(m *templatev1.ListTemplatesPageResponse) ports.Page[ports.Template] {
			return ports.Page[ports.Template]{Data: templatesFromProto(m.GetTemplates()), NextCursor: m.GetNextCursor()}
		})
}

func (c *templateClient) GetTemplate(ctx context.Context, orgID, id string) (ports.Template, error) {
	return call(ctx, templatev1connect.TemplateServiceGetTemplateProcedure, c.conn.GetTemplate,
		&templatev1.GetTemplateRequest{OrganizationId: orgID, Id: id},
		pick((*templatev1.GetTemplateResponse).GetTemplate, templateFromProto))
}

func (c *templateClient) ListTemplateVersions(ctx context.Context, orgID, templateID string, q ports.PageQuery) (ports.Page[ports.TemplateVersion], error) {
	return call(ctx, templatev1connect.TemplateServiceListTemplateVersionsProcedure, c.conn.ListTemplateVersions,
		&templatev1.ListTemplateVersionsRequest{OrganizationId: orgID, TemplateId: templateID, Limit: int64(q.Limit), Cursor: q.Cursor},
		func(m *templatev1.ListTemplateVersionsResponse) ports.Page[ports.TemplateVersion] {
			return ports.Page[ports.TemplateVersion]{Data: templateVersionsFromProto(m.GetVersions()), NextCursor: m.GetNextCursor()}
		})
}

// rendererClient implements ports.TemplateRenderer over postmill.template.v1.TemplateService.
type rendererClient struct {
	conn templatev1connect.TemplateServiceClient
}

var _ ports.TemplateRenderer = (*rendererClient)(nil)

// RenderTemplate sends the variables as JSON, so the core receives every number as a json.Number,
// exactly as a send's template variables arrive; variables that are not JSON never leave the process.
func (c *rendererClient) RenderTemplate(ctx context.Context, orgID, templateID string, vars map[string]any) (ports.RenderedTemplate, error) {
	b, err := jsonObjectToProto(vars)
	if err != nil {
		return ports.RenderedTemplate{}, encodeError(templatev1connect.TemplateServiceRenderTemplateProcedure, fmt.Errorf("template variables: %w", err))
	}
	return call(ctx, templatev1connect.TemplateServiceRenderTemplateProcedure, c.conn.RenderTemplate, &templatev1.RenderTemplateRequest{
		OrganizationId: orgID,
		TemplateId:     templateID,
		VariablesJson:  b,
	}, pick((*templatev1.RenderTemplateResponse).GetRendered, renderedTemplateFromProto))
}

// CurrentVersion travels as an optional field, so a template never published (nil) and one whose
// pointer is set come back as they left; Versions, filled only by GetTemplate, travels as an unset list
// wrapper when nil. Pages travel the same way, so a nil page of a fake and an empty one stay apart.

func intPtrToProto(n *int) *int64 {
	if n == nil {
		return nil
	}
	v := int64(*n)
	return &v
}

func intPtrFromProto(n *int64) *int {
	if n == nil {
		return nil
	}
	v := int(*n)
	return &v
}

func templateVersionToProto(v ports.TemplateVersion) *templatev1.TemplateVersion {
	return &templatev1.TemplateVersion{
		Id:          v.ID,
		TemplateId:  v.TemplateID,
		Version:     int64(v.Version),
		Subject:     v.Subject,
		Html:        v.HTML,
		Text:        v.Text,
		ReactSource: v.ReactSource,
		CreatedAt:   timeToProto(v.CreatedAt),
	}
}

func templateVersionFromProto(v *templatev1.TemplateVersion) ports.TemplateVersion {
	return ports.TemplateVersion{
		ID:          v.GetId(),
		TemplateID:  v.GetTemplateId(),
		Version:     int(v.GetVersion()),
		Subject:     v.GetSubject(),
		HTML:        v.GetHtml(),
		Text:        v.GetText(),
		ReactSource: v.GetReactSource(),
		CreatedAt:   timeFromProto(v.GetCreatedAt()),
	}
}

func templateVersionsToProto(versions []ports.TemplateVersion) *templatev1.TemplateVersionList {
	if versions == nil {
		return nil
	}
	return &templatev1.TemplateVersionList{Items: mapItems(versions, templateVersionToProto)}
}

func templateVersionsFromProto(l *templatev1.TemplateVersionList) []ports.TemplateVersion {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), templateVersionFromProto)
}

func templateToProto(t ports.Template) *templatev1.Template {
	return &templatev1.Template{
		Id:                t.ID,
		OrganizationId:    t.OrganizationID,
		Name:              t.Name,
		CurrentVersion:    intPtrToProto(t.CurrentVersion),
		CreatedAt:         timeToProto(t.CreatedAt),
		UpdatedAt:         timeToProto(t.UpdatedAt),
		Versions:          templateVersionsToProto(t.Versions),
		VersionsTruncated: t.VersionsTruncated,
	}
}

func templateFromProto(t *templatev1.Template) ports.Template {
	return ports.Template{
		ID:                t.GetId(),
		OrganizationID:    t.GetOrganizationId(),
		Name:              t.GetName(),
		CurrentVersion:    intPtrFromProto(t.CurrentVersion),
		CreatedAt:         timeFromProto(t.GetCreatedAt()),
		UpdatedAt:         timeFromProto(t.GetUpdatedAt()),
		Versions:          templateVersionsFromProto(t.GetVersions()),
		VersionsTruncated: t.GetVersionsTruncated(),
	}
}

func templatesToProto(templates []ports.Template) *templatev1.TemplateList {
	if templates == nil {
		return nil
	}
	return &templatev1.TemplateList{Items: mapItems(templates, templateToProto)}
}

func templatesFromProto(l *templatev1.TemplateList) []ports.Template {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), templateFromProto)
}

func newTemplateVersionToProto(v ports.NewTemplateVersion) *templatev1.NewTemplateVersion {
	return &templatev1.NewTemplateVersion{Subject: v.Subject, Html: v.HTML, Text: v.Text, ReactSource: v.ReactSource}
}

func newTemplateVersionFromProto(v *templatev1.NewTemplateVersion) ports.NewTemplateVersion {
	return ports.NewTemplateVersion{Subject: v.GetSubject(), HTML: v.GetHtml(), Text: v.GetText(), ReactSource: v.GetReactSource()}
}

func renderedTemplateToProto(r ports.RenderedTemplate) *templatev1.RenderedTemplate {
	return &templatev1.RenderedTemplate{Subject: r.Subject, Html: r.HTML, Text: r.Text}
}

func renderedTemplateFromProto(r *templatev1.RenderedTemplate) ports.RenderedTemplate {
	return ports.RenderedTemplate{Subject: r.GetSubject(), HTML: r.GetHtml(), Text: r.GetText()}
}
