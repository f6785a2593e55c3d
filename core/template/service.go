package template

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/ports"
)

// Violation messages. They say what is expected and never echo the value.
const (
	msgName            = "must be 1 to 120 characters without control characters"
	msgSubjectRequired = "is required"
	msgNoCRLF          = "must not contain CR or LF"
	msgSubjectLen      = "must be at most 998 characters"
	msgStorable        = "must be valid UTF-8 without NUL characters"
	msgContentRequired = "one of html, text or reactSource is required"
	msgReactMissing    = "React rendering is not available"
	msgReactOutput     = "rendered to HTML that is not valid UTF-8 or contains NUL characters"
	msgVersion         = "must be an integer >= 1"
	msgTemplateMissing = "template not found"
)

// Deps are the Service's driven ports. Store is required; Clock defaults to the wall clock; React may be nil,
// in which case a version with reactSource is refused; CacheSize bounds the compiled-version cache
// (DefaultCacheSize when below 1).
type Deps struct {
	Store     ports.TemplateStore
	React     ports.ReactRenderer
	Clock     ports.Clock
	CacheSize int
}

// Service is the templates area's use-case type: the template API of SPEC §4.4 for the edge, and rendering
// of published versions for the send path.
type Service struct {
	store ports.TemplateStore
	react ports.ReactRenderer
	clock ports.Clock
	cache *Cache
}

var (
	_ ports.TemplateService  = (*Service)(nil)
	_ ports.TemplateRenderer = (*Service)(nil)
)

// New builds the Service.
func New(deps Deps) (*Service, error) {
	if deps.Store == nil {
		return nil, errors.New("template: a store is required")
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	return &Service{store: deps.Store, react: deps.React, clock: deps.Clock, cache: NewCache(deps.CacheSize)}, nil
}

// now is the clock's time in UTC at PostgreSQL's microsecond resolution, so a row returned right after it
// was written equals the same row read back later.
func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// newID is id.New under the name this package's files use.
var newID = id.New

// validID reports whether id can name a template: ids are UUIDs, so anything else names none and the store
// need not be asked.
func validID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil
}

// CreateTemplate creates an empty template. The name is trimmed of surrounding whitespace first, as API key
// and organization names are, then must be 1-120 characters (SPEC §8) without control characters.
func (s *Service) CreateTemplate(ctx context.Context, orgID, name string) (ports.Template, error) {
	name = strings.TrimSpace(name)
	if !validName(name) {
		return ports.Template{}, ports.ValidationError(ports.FieldViolation{Path: "name", Message: msgName})
	}
	now := s.now()
	t := ports.Template{ID: newID(), OrganizationID: orgID, Name: name, CreatedAt: now, UpdatedAt: now}
	if err := s.store.InsertTemplate(ctx, t); err != nil {
		return ports.Template{}, err
	}
	return t, nil
}

func validName(name string) bool {
	if !utf8.ValidString(name) {
		return false
	}
	if n := utf8.RuneCountInString(name); n < 1 || n > ports.MaxTemplateName {
		return false
	}
	return strings.IndexFunc(name, unicode.IsControl) < 0
}

// CreateTemplateVersion validates and appends a version. Every part must compile now, so that a published
// version can always be rendered; a React source is rendered once, here, and the HTML it produced is what
// sends interpolate. The store numbers the version.
func (s *Service) CreateTemplateVersion(ctx context.Context, orgID, templateID string, v ports.NewTemplateVersion) (ports.TemplateVersion, error) {
	if !validID(templateID) {
		return ports.TemplateVersion{}, ports.NotFound(msgTemplateMissing)
	}
	if violations := validateVersion(v, s.react != nil); len(violations) > 0 {
		return ports.TemplateVersion{}, ports.ValidationError(violations...)
	}
	htmlSrc, htmlField := v.HTML, "html"
	if v.ReactSource != "" {
		rendered, err := s.react.RenderReact(ctx, v.ReactSource)
		if err != nil {
			return ports.TemplateVersion{}, err
		}
		if !storable(rendered) {
			return ports.TemplateVersion{}, ports.ValidationError(ports.FieldViolation{Path: "reactSource", Message: msgReactOutput})
		}
		htmlSrc, htmlField = rendered, "reactSource"
	}
	compiled, violations := compileParts(v.Subject, htmlSrc, v.Text)
	if len(violations) > 0 {
		for i := range violations {
			if violations[i].Path == "html" {
				violations[i].Path = htmlField
			}
		}
		return ports.TemplateVersion{}, ports.ValidationError(violations...)
	}
	stored, err := s.store.InsertTemplateVersion(ctx, orgID, ports.TemplateVersion{
		ID:          newID(),
		TemplateID:  templateID,
		Subject:     v.Subject,
		HTML:        htmlSrc,
		Text:        v.Text,
		ReactSource: v.ReactSource,
		CreatedAt:   s.now(),
	})
	if err != nil {
		return ports.TemplateVersion{}, err
	}
	// Versions are immutable: the form compiled to validate this one is the one sends will use, so it is
	// cached now instead of being compiled again by the first send.
	s.cache.store(stored.ID, compiled)
	return stored, nil
}

// validateVersion reports every violation of a new version's fields (SPEC §2 Template): the subject is
// required, one line; one of html, text or reactSource is required. When both html and reactSource are
// given, the React source renders the version's HTML and html is not used (SPEC §2 allows any of the three;
// docs/templates.md says which wins). Cross-field rules report against the body (path "").
func validateVersion(v ports.NewTemplateVersion, reactAvailable bool) []ports.FieldViolation {
	var out []ports.FieldViolation
	add := func(path, msg string) { out = append(out, ports.FieldViolation{Path: path, Message: msg}) }
	switch {
	case v.Subject == "":
		add("subject", msgSubjectRequired)
	case strings.ContainsAny(v.Subject, "\r\n"):
		add("subject", msgNoCRLF)
	case !storable(v.Subject):
		add("subject", msgStorable)
	case utf8.RuneCountInString(v.Subject) > ports.MaxSubjectChars:
		add("subject", msgSubjectLen)
	}
	if v.HTML == "" && v.Text == "" && v.ReactSource == "" {
		add("", msgContentRequired)
	}
	if !storable(v.HTML) {
		add("html", msgStorable)
	}
	if !storable(v.Text) {
		add("text", msgStorable)
	}
	switch {
	case v.ReactSource == "":
	case !storable(v.ReactSource):
		add("reactSource", msgStorable)
	case !reactAvailable:
		add("reactSource", msgReactMissing)
	}
	return out
}

// storable reports whether s fits a PostgreSQL text column.
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.Contains(s, "\x00")
}

// PublishTemplate makes version the template's current one.
func (s *Service) PublishTemplate(ctx context.Context, orgID, templateID string, version int) (ports.Template, error) {
	if version < 1 {
		return ports.Template{}, ports.ValidationError(ports.FieldViolation{Path: "version", Message: msgVersion})
	}
	if !validID(templateID) {
		return ports.Template{}, ports.NotFound(msgTemplateMissing)
	}
	return s.store.PublishTemplateVersion(ctx, orgID, templateID, version, s.now())
}

// ListTemplates returns the organization's newest ports.MaxUnpagedListRows templates, newest first.
func (s *Service) ListTemplates(ctx context.Context, orgID string) ([]ports.Template, error) {
	page, err := s.store.ListTemplates(ctx, orgID, ports.Unpaged())
	return page.Data, err
}

// ListTemplatesPage pages the organization's templates newest first. Errors: invalid_argument (limit
// outside 1-100, a cursor the store did not issue).
func (s *Service) ListTemplatesPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Template], error) {
	q, err := q.Checked()
	if err != nil {
		return ports.Page[ports.Template]{}, err
	}
	return s.store.ListTemplates(ctx, orgID, q)
}

// GetTemplate returns a template with its newest ports.TemplateVersionsShown versions, oldest first: a
// template edited for years must not make one answer unbounded. VersionsTruncated says that
// ListTemplateVersions has more.
func (s *Service) GetTemplate(ctx context.Context, orgID, id string) (ports.Template, error) {
	if !validID(id) {
		return ports.Template{}, ports.NotFound(msgTemplateMissing)
	}
	return s.store.GetTemplate(ctx, orgID, id, ports.TemplateVersionsShown)
}

// ListTemplateVersions pages a template's versions, newest first. Errors: not_found, invalid_argument
// (limit outside 1-100, a cursor the store did not issue).
func (s *Service) ListTemplateVersions(ctx context.Context, orgID, templateID string, q ports.PageQuery) (ports.Page[ports.TemplateVersion], error) {
	q, err := q.Checked()
	if err != nil {
		return ports.Page[ports.TemplateVersion]{}, err
	}
	if !validID(templateID) {
		return ports.Page[ports.TemplateVersion]{}, ports.NotFound(msgTemplateMissing)
	}
	return s.store.ListTemplateVersions(ctx, orgID, templateID, q)
}

// RenderTemplate renders the template's published version with vars. A template that is not the
// organization's, or has no published version, is a missing reference: the send names something that does
// not exist and fails before anything is written.
func (s *Service) RenderTemplate(ctx context.Context, orgID, templateID string, vars map[string]any) (ports.RenderedTemplate, error) {
	if !validID(templateID) {
		return ports.RenderedTemplate{}, ports.MissingReference(ports.TemplatesConstraint)
	}
	// The send path's common case: the published version is compiled already, and only its id is read.
	id, err := s.store.PublishedTemplateVersionID(ctx, orgID, templateID)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return ports.RenderedTemplate{}, ports.MissingReference(ports.TemplatesConstraint)
	}
	if err != nil {
		return ports.RenderedTemplate{}, err
	}
	if cv, ok := s.cache.Lookup(id); ok {
		return cv.Render(vars), nil
	}
	v, err := s.store.PublishedTemplateVersion(ctx, orgID, templateID)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return ports.RenderedTemplate{}, ports.MissingReference(ports.TemplatesConstraint)
	}
	if err != nil {
		return ports.RenderedTemplate{}, err
	}
	return s.render(v, vars)
}

// render renders a stored version through the cache.
func (s *Service) render(v ports.TemplateVersion, vars map[string]any) (ports.RenderedTemplate, error) {
	cv, err := s.cache.Get(v)
	if err != nil {
		// Every stored version compiled when it was created, so this takes a version stored under other
		// rules. Sending it again unchanged cannot succeed: a 400 that says which part and why.
		detail := ports.ErrorMessage(err)
		if e, ok := ports.AsError(err); ok && len(e.Details) > 0 {
			detail = e.Details[0].Path + " " + e.Details[0].Message
		}
		return ports.RenderedTemplate{}, ports.Errorf(ports.CodeInvalidArgument,
			"template version %d does not compile: %s", v.Version, detail)
	}
	return cv.Render(vars), nil
}
