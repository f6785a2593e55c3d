package ports

import (
	"context"
	"time"
)

// Template bounds of SPEC §2 and §8.
const (
	MaxTemplateName = 120
	// TemplateVersionsShown is how many versions GetTemplate includes: the newest ones, oldest first.
	// Template.VersionsTruncated tells a client that older ones exist (ListTemplateVersions pages them).
	TemplateVersionsShown = 50
	// TemplatesConstraint names the templates table's key in the 400 "Referenced resource does not exist"
	// of a send that references a template that does not exist, or has no published version.
	TemplatesConstraint = "templates_pkey"
)

// Template is a named, versioned email template (SPEC §2). CurrentVersion is the published version number,
// nil until the first publish.
type Template struct {
	ID             string
	OrganizationID string
	Name           string
	CurrentVersion *int
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// Versions is filled only by GetTemplate: the newest TemplateVersionsShown versions, oldest first.
	Versions []TemplateVersion
	// VersionsTruncated is true when the template has versions older than those in Versions.
	VersionsTruncated bool
}

// TemplateVersion is one immutable version. When ReactSource is given, HTML holds what it rendered to at
// creation; its {{ placeholders }} are interpolated at send time like any other HTML.
type TemplateVersion struct {
	ID          string
	TemplateID  string
	Version     int // 1 for the first version: the template's current maximum plus one
	Subject     string
	HTML        string
	Text        string
	ReactSource string
	CreatedAt   time.Time
}

// NewTemplateVersion is the body of POST /v1/templates/{id}/versions.
type NewTemplateVersion struct {
	Subject     string
	HTML        string
	Text        string
	ReactSource string
}

// RenderedTemplate is a published version with a send's variables interpolated.
type RenderedTemplate struct {
	Subject string
	HTML    string
	Text    string
}

// TemplateService is SPEC §4.4.
type TemplateService interface {
	// CreateTemplate errors: invalid_argument (name 1-120 characters).
	CreateTemplate(ctx context.Context, orgID, name string) (Template, error)
	// CreateTemplateVersion appends a version numbered max+1, safe under concurrent creation. A React source
	// is rendered now and the HTML stored. Errors: invalid_argument (subject missing or with CR/LF, none of
	// html/text/reactSource, a React compile or render error with its text), not_found (no template).
	CreateTemplateVersion(ctx context.Context, orgID, templateID string, v NewTemplateVersion) (TemplateVersion, error)
	// PublishTemplate makes version the current one; later sends use it at once. Errors: invalid_argument
	// (version < 1), not_found (no such template or version).
	PublishTemplate(ctx context.Context, orgID, templateID string, version int) (Template, error)
	// ListTemplates returns the organization's newest MaxUnpagedListRows templates, newest first, without
	// versions: the bare-array form of GET /v1/templates.
	ListTemplates(ctx context.Context, orgID string) ([]Template, error)
	// ListTemplatesPage pages the organization's templates newest first, without versions. Errors:
	// invalid_argument (limit outside 1-MaxListLimit, a cursor this service did not issue).
	ListTemplatesPage(ctx context.Context, orgID string, q PageQuery) (Page[Template], error)
	// GetTemplate returns the template with its newest TemplateVersionsShown versions, oldest first, and
	// VersionsTruncated. Errors: not_found.
	GetTemplate(ctx context.Context, orgID, id string) (Template, error)
	// ListTemplateVersions pages a template's versions, newest first. Errors: not_found (no template),
	// invalid_argument (limit, cursor).
	ListTemplateVersions(ctx context.Context, orgID, templateID string, q PageQuery) (Page[TemplateVersion], error)
}

// TemplateRenderer is what the send path needs from templates.
type TemplateRenderer interface {
	// RenderTemplate renders the published version of a template with vars (SPEC §4.4 interpolation).
	// Errors: invalid_argument with Constraint TemplatesConstraint (MissingReference) when the template is
	// not the organization's or has no published version.
	RenderTemplate(ctx context.Context, orgID, templateID string, vars map[string]any) (RenderedTemplate, error)
}

// ReactRenderer turns React Email source (TSX using @react-email/components) into HTML.
type ReactRenderer interface {
	// RenderReact compiles source and renders its default export to an HTML document. Errors:
	// invalid_argument carrying the compile or render error's text, also when the render exceeds its CPU
	// time or memory bound.
	RenderReact(ctx context.Context, source string) (string, error)
}

// TemplateStore persists templates and versions; every method is scoped by organization.
type TemplateStore interface {
	// InsertTemplate writes a new template (CurrentVersion nil).
	InsertTemplate(ctx context.Context, t Template) error
	// InsertTemplateVersion assigns v.Version = the template's current maximum + 1 (1 for the first) in the
	// same statement that inserts it, so concurrent creations get distinct numbers, and returns the row.
	// Errors: not_found when the template is not the organization's.
	InsertTemplateVersion(ctx context.Context, orgID string, v TemplateVersion) (TemplateVersion, error)
	// PublishTemplateVersion sets CurrentVersion. Errors: not_found (template or version).
	PublishTemplateVersion(ctx context.Context, orgID, templateID string, version int, now time.Time) (Template, error)
	// ListTemplates pages templates newest first (keyset on createdAt, id), without versions. q.Limit is
	// 1-MaxUnpagedListRows. Errors: invalid_argument (limit, cursor).
	ListTemplates(ctx context.Context, orgID string, q PageQuery) (Page[Template], error)
	// GetTemplate returns the template with its newest `versions` versions, oldest first, and
	// VersionsTruncated when older ones exist. Errors: not_found.
	GetTemplate(ctx context.Context, orgID, id string, versions int) (Template, error)
	// ListTemplateVersions pages a template's versions newest first (keyset on the version number). q.Limit
	// is 1-MaxListLimit. Errors: not_found (no such template in the organization), invalid_argument
	// (limit, cursor).
	ListTemplateVersions(ctx context.Context, orgID, templateID string, q PageQuery) (Page[TemplateVersion], error)
	// PublishedTemplateVersion returns the version a send renders. Errors: not_found (no template, or none
	// published).
	PublishedTemplateVersion(ctx context.Context, orgID, templateID string) (TemplateVersion, error)
	// PublishedTemplateVersionID returns only the id of that version: a send whose version is compiled
	// already (versions are immutable) reads no bodies. Errors: not_found.
	PublishedTemplateVersionID(ctx context.Context, orgID, templateID string) (string, error)
}
