package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagTemplates is the OpenAPI tag of the template routes (SPEC §4.4).
const tagTemplates = "Templates"

// Template shapes. SPEC §4.4 fixes {id, name, currentVersion} for create and publish and leaves the rest
// open; the edge adds the timestamps everywhere and, on GET /v1/templates/{id}, the newest versions with
// versionsTruncated. A version's optional bodies are null when absent rather than missing, so every version
// has the same keys.

type templateResponse struct {
	ID             string    `json:"id" format:"uuid" doc:"Template id"`
	Name           string    `json:"name" doc:"1-120 characters"`
	CurrentVersion *int      `json:"currentVersion" doc:"The published version number; null until the first publish"`
	CreatedAt      time.Time `json:"createdAt" doc:"When the template was created"`
	UpdatedAt      time.Time `json:"updatedAt" doc:"When the template last changed, for example by a publish"`
}

type templateVersionResponse struct {
	ID          string    `json:"id" format:"uuid" doc:"Version id"`
	TemplateID  string    `json:"templateId" format:"uuid" doc:"The template it belongs to"`
	Version     int       `json:"version" doc:"1 for the first version, then the template's maximum plus one"`
	Subject     string    `json:"subject" doc:"Subject line; {{ placeholders }} are interpolated at send time"`
	HTML        *string   `json:"html" doc:"null when the version has no HTML body; for a reactSource version, the HTML it rendered to at creation"`
	Text        *string   `json:"text" doc:"null when the version has no text body"`
	ReactSource *string   `json:"reactSource" doc:"The React Email source as given; null when the version was not written in React"`
	CreatedAt   time.Time `json:"createdAt" doc:"When the version was created"`
}

// templateWithVersionsResponse repeats templateResponse's fields rather than embedding it, for the same
// reason as createdAPIKeyResponse: huma documents only exported embedded types.
type templateWithVersionsResponse struct {
	ID             string                    `json:"id" format:"uuid" doc:"Template id"`
	Name           string                    `json:"name" doc:"1-120 characters"`
	CurrentVersion *int                      `json:"currentVersion" doc:"The published version number; null until the first publish"`
	CreatedAt      time.Time                 `json:"createdAt" doc:"When the template was created"`
	UpdatedAt      time.Time                 `json:"updatedAt" doc:"When the template last changed, for example by a publish"`
	Versions       []templateVersionResponse `json:"versions" nullable:"false" doc:"The newest 50 versions, oldest first"`
	// VersionsTruncated keeps the answer bounded for a template edited for years.
	VersionsTruncated bool `json:"versionsTruncated" doc:"true when the template has versions older than those listed; GET /v1/templates/{id}/versions pages through all of them"`
}

type listTemplateVersionsInput struct {
	ID     string `path:"id" format:"uuid" doc:"Template id"`
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"25" doc:"Page size"`
	Cursor string `query:"cursor" maxLength:"1024" doc:"nextCursor of the previous page"`
}

type templateVersionPageResponse struct {
	Data       []templateVersionResponse `json:"data" nullable:"false" doc:"Newest version first"`
	NextCursor *string                   `json:"nextCursor" doc:"Pass as cursor for the next page; null on the last page"`
}

type createTemplateRequest struct {
	_    struct{} `json:"-" additionalProperties:"true"`
	Name string   `json:"name" minLength:"1" maxLength:"120" doc:"1-120 characters"`
}

type createTemplateVersionRequest struct {
	_           struct{} `json:"-" additionalProperties:"true"`
	Subject     string   `json:"subject" minLength:"1" pattern:"^[^\\r\\n]*$" patternDescription:"a single line (no CR or LF)" doc:"Immutable once created; {{ placeholders }} are interpolated at send time"`
	HTML        string   `json:"html,omitempty" doc:"HTML body; when reactSource is also given, the React output is the version's HTML and this is not used"`
	Text        string   `json:"text,omitempty" doc:"Plain-text body"`
	ReactSource string   `json:"reactSource,omitempty" doc:"React Email source (TSX) rendered to HTML now, at creation"`
}

type createTemplateVersionInput struct {
	ID   string `path:"id" format:"uuid" doc:"Template id"`
	Body createTemplateVersionRequest
}

type publishTemplateRequest struct {
	_       struct{} `json:"-" additionalProperties:"true"`
	Version int      `json:"version" minimum:"1" doc:"An existing version number of the template"`
}

type publishTemplateInput struct {
	ID   string `path:"id" format:"uuid" doc:"Template id"`
	Body publishTemplateRequest
}

func (s *Server) registerTemplateRoutes() {
	write := access{kind: authKey, scopes: []string{ports.ScopeTemplatesWrite}}
	// SPEC §5: templates are written with an API key and read from the dashboard.
	read := access{kind: authSession}

	register(s, huma.Operation{
		OperationID: "create-template", Method: http.MethodPost, Path: "/v1/templates", DefaultStatus: http.StatusCreated,
		Tags: []string{tagTemplates}, Summary: "Create a template",
		Description: "Creates an empty template; currentVersion is null until a version is published.",
	}, write, s.createTemplate, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "create-template-version", Method: http.MethodPost, Path: "/v1/templates/{id}/versions", DefaultStatus: http.StatusCreated,
		Tags: []string{tagTemplates}, Summary: "Add a template version",
		Description: "Appends an immutable version numbered the template's maximum plus one. At least one of html, " +
			"text or reactSource is required (400 reported against the object); a reactSource is rendered to HTML " +
			"now and a compile or render error is a 400. Publishing is a separate step. The body is at most 4 MiB.",
		MaxBodyBytes: TemplateMaxBodyBytes,
	}, write, s.createTemplateVersion, http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge)

	register(s, huma.Operation{
		OperationID: "publish-template", Method: http.MethodPost, Path: "/v1/templates/{id}/publish", DefaultStatus: http.StatusCreated,
		Tags: []string{tagTemplates}, Summary: "Publish a template version",
		Description: "Makes an existing version the current one; sends that name the template render it from now " +
			"on. 404 when the template or the version does not exist.",
	}, write, s.publishTemplate, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "list-templates", Method: http.MethodGet, Path: "/v1/templates",
		Tags: []string{tagTemplates}, Summary: "List templates",
		Description: "The organization's templates, newest first, without their versions: a bare array of the " +
			"newest 1000, or with limit or cursor a page {data, nextCursor}.",
	}, read, s.listTemplates, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "get-template", Method: http.MethodGet, Path: "/v1/templates/{id}",
		Tags: []string{tagTemplates}, Summary: "Get a template",
		Description: "The template with its newest 50 versions, oldest first; versionsTruncated is true when " +
			"older ones exist (GET /v1/templates/{id}/versions pages through every version).",
	}, read, s.getTemplate, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "list-template-versions", Method: http.MethodGet, Path: "/v1/templates/{id}/versions",
		Tags: []string{tagTemplates}, Summary: "List a template's versions",
		Description: "Every version of the template, newest first, a page at a time: {data, nextCursor}.",
	}, read, s.listTemplateVersions, http.StatusBadRequest, http.StatusNotFound)
}

func toTemplate(t ports.Template) templateResponse {
	return templateResponse{
		ID:             t.ID,
		Name:           t.Name,
		CurrentVersion: t.CurrentVersion,
		CreatedAt:      utc(t.CreatedAt),
		UpdatedAt:      utc(t.UpdatedAt),
	}
}

func toTemplateVersion(v ports.TemplateVersion) templateVersionResponse {
	return templateVersionResponse{
		ID:          v.ID,
		TemplateID:  v.TemplateID,
		Version:     v.Version,
		Subject:     v.Subject,
		HTML:        nullIfEmpty(v.HTML),
		Text:        nullIfEmpty(v.Text),
		ReactSource: nullIfEmpty(v.ReactSource),
		CreatedAt:   utc(v.CreatedAt),
	}
}

// nullIfEmpty renders a string the core leaves empty for "absent" as JSON null.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Server) createTemplate(ctx context.Context, in *body[createTemplateRequest]) (*body[templateResponse], error) {
	t, err := s.core.Templates.CreateTemplate(ctx, principalFrom(ctx).OrganizationID, in.Body.Name)
	if err != nil {
		return nil, err
	}
	return &body[templateResponse]{toTemplate(t)}, nil
}

func (s *Server) createTemplateVersion(ctx context.Context, in *createTemplateVersionInput) (*body[templateVersionResponse], error) {
	v, err := s.core.Templates.CreateTemplateVersion(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), ports.NewTemplateVersion{
		Subject:     in.Body.Subject,
		HTML:        in.Body.HTML,
		Text:        in.Body.Text,
		ReactSource: in.Body.ReactSource,
	})
	if err != nil {
		return nil, err
	}
	return &body[templateVersionResponse]{toTemplateVersion(v)}, nil
}

func (s *Server) publishTemplate(ctx context.Context, in *publishTemplateInput) (*body[templateResponse], error) {
	t, err := s.core.Templates.PublishTemplate(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), in.Body.Version)
	if err != nil {
		return nil, err
	}
	return &body[templateResponse]{toTemplate(t)}, nil
}

func (s *Server) listTemplates(ctx context.Context, in *listQuery) (*body[listBody[templateResponse]], error) {
	orgID := principalFrom(ctx).OrganizationID
	if !in.paged() {
		templates, err := s.core.Templates.ListTemplates(ctx, orgID)
		if err != nil {
			return nil, err
		}
		return &body[listBody[templateResponse]]{bareList(mapItems(templates, toTemplate))}, nil
	}
	page, err := s.core.Templates.ListTemplatesPage(ctx, orgID, in.pageQuery())
	if err != nil {
		return nil, err
	}
	return &body[listBody[templateResponse]]{pageList(mapItems(page.Data, toTemplate), page.NextCursor)}, nil
}

func (s *Server) listTemplateVersions(ctx context.Context, in *listTemplateVersionsInput) (*body[templateVersionPageResponse], error) {
	page, err := s.core.Templates.ListTemplateVersions(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID),
		ports.PageQuery{Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, err
	}
	return &body[templateVersionPageResponse]{templateVersionPageResponse{
		Data: mapItems(page.Data, toTemplateVersion), NextCursor: nullIfEmpty(page.NextCursor),
	}}, nil
}

func (s *Server) getTemplate(ctx context.Context, in *idPath) (*body[templateWithVersionsResponse], error) {
	t, err := s.core.Templates.GetTemplate(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	m := toTemplate(t)
	out := templateWithVersionsResponse{
		ID: m.ID, Name: m.Name, CurrentVersion: m.CurrentVersion, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
		Versions: make([]templateVersionResponse, 0, len(t.Versions)), VersionsTruncated: t.VersionsTruncated,
	}
	for _, v := range t.Versions {
		out.Versions = append(out.Versions, toTemplateVersion(v))
	}
	return &body[templateWithVersionsResponse]{out}, nil
}
